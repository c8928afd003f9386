//! The shape of a value (#48): what the workflow declared a value to be, checked when the
//! value enters (an input when the run starts or a child is called, a reference's filter
//! when it is rendered). A value with a shape other than [`Shape::Text`] is **typed**; only
//! typed values may stand as a whole argv element. Free text reaches a program through its
//! channels instead: `stdin:`, `{{ x | file }}`, `env:`, an agent's prompt.
//!
//! The rules are about the value, never about a program:
//! - `integer`: `-?[0-9]+` within `i64` (a JSON integer or such a string), written canonically;
//! - `number`: a finite number, written as JSON writes it;
//! - `boolean`: `true` or `false`;
//! - `enum`: one of the declared values, exactly;
//! - `pattern` / `match('…')`: the whole value matches the regular expression (the `regex`
//!   crate: linear time on any data). A pattern that admits anything is the author vouching;
//! - `path`: relative, normalized (no `.`/`..`, no empty component, no trailing `/`), so
//!   lexically inside the workspace; each character a letter, a digit or one of `._-+@,~#%`;
//!   the first character a letter, a digit, `_` or `.`. So no space (a path is never a
//!   command line with arguments), no `:` (no URL or `ext::` transport), no `=` (no `make`
//!   assignment), no `$`, `|`, `<`, `>` (no two-argument `open`), no control character;
//! - `url`: `http` or `https`, a host, no user info, no whitespace or control character;
//!   written as the WHATWG URL parser (the `url` crate) serializes it.
//!
//! Where the value lands in argv, [`crate::workflow`]'s argv rule adds one more: a typed value
//! never starts with `-` or `+` unless the reference says `| option`.

use std::fmt;

use regex::Regex;
use serde_json::Value;

/// Why a value does not have its declared shape, or a declaration is not a shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(String);

impl ShapeError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// What a value is declared to be.
#[derive(Debug, Clone)]
pub enum Shape {
    /// Free text: any value; never a whole argv element.
    Text,
    /// A string whose whole text matches the pattern.
    Pattern {
        /// The pattern as written.
        source: String,
        /// `^(?:source)$`, compiled.
        regex: Regex,
    },
    /// A whole number.
    Integer,
    /// A finite number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// One of these values.
    Enum(Vec<String>),
    /// A relative, normalized path inside the workspace.
    Path,
    /// An `http(s)` URL without user info.
    Url,
}

impl PartialEq for Shape {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Shape::Pattern { source: a, .. }, Shape::Pattern { source: b, .. }) => a == b,
            (Shape::Enum(a), Shape::Enum(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl Eq for Shape {}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Text => f.write_str("free text"),
            Shape::Pattern { source, .. } => write!(f, "match({source:?})"),
            Shape::Integer => f.write_str("integer"),
            Shape::Number => f.write_str("number"),
            Shape::Boolean => f.write_str("boolean"),
            Shape::Enum(values) => write!(f, "enum({})", values.join(", ")),
            Shape::Path => f.write_str("path"),
            Shape::Url => f.write_str("url"),
        }
    }
}

/// The longest value shown in an error.
const SHOWN: usize = 60;

fn shown(text: &str) -> String {
    let cut: String = text.chars().take(SHOWN).collect();
    if cut.len() < text.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

impl Shape {
    /// A whole-match pattern; an error when it does not compile.
    pub fn pattern(source: &str) -> Result<Self, ShapeError> {
        let regex = Regex::new(&format!("^(?:{source})$"))
            .map_err(|e| ShapeError::new(format!("pattern {source:?} does not compile: {e}")))?;
        Ok(Shape::Pattern {
            source: source.to_owned(),
            regex,
        })
    }

    /// Whether a value of this shape is typed (anything but free text).
    pub fn is_typed(&self) -> bool {
        !matches!(self, Shape::Text)
    }

    /// Checks `value` against the shape and gives the text it is written as; the error says
    /// which rule the value breaks (showing at most 60 characters of it).
    pub fn check(&self, value: &Value) -> Result<String, ShapeError> {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null if matches!(self, Shape::Text) => String::new(),
            Value::Array(_) | Value::Object(_) if matches!(self, Shape::Text) => value.to_string(),
            other => {
                return Err(ShapeError::new(format!(
                    "a {} is not a {self}",
                    json_kind(other)
                )));
            }
        };
        let bad = |rule: &str| Err(ShapeError::new(format!("{} is not {rule}", shown(&text))));
        match self {
            Shape::Text => Ok(text),
            Shape::Pattern { source, regex } => {
                if regex.is_match(&text) {
                    Ok(text)
                } else {
                    bad(&format!("a whole match of the pattern {source:?}"))
                }
            }
            Shape::Integer => integer(&text).map_or_else(|| bad("an integer"), Ok),
            Shape::Number => number(value, &text).map_or_else(|| bad("a finite number"), Ok),
            Shape::Boolean => match text.as_str() {
                "true" | "false" => Ok(text),
                _ => bad("a boolean (true or false)"),
            },
            Shape::Enum(values) => {
                if values.contains(&text) {
                    Ok(text)
                } else {
                    bad(&format!("one of {}", values.join(", ")))
                }
            }
            Shape::Path => match path_problem(&text) {
                None => Ok(text),
                Some(why) => bad(&format!("a relative path inside the workspace ({why})")),
            },
            Shape::Url => url(&text).map_err(|why| {
                ShapeError::new(format!(
                    "{} is not an http(s) URL without user info ({why})",
                    shown(&text)
                ))
            }),
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// `-?[0-9]+` within `i64`, written canonically.
fn integer(text: &str) -> Option<String> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok().map(|n| n.to_string())
}

/// A finite number, written as JSON writes it.
fn number(value: &Value, text: &str) -> Option<String> {
    if let Value::Number(n) = value {
        return Some(n.to_string());
    }
    // Only the JSON number grammar: no `inf`, `NaN`, `+1` or `0x10` through Rust's parser.
    let n: serde_json::Number = serde_json::from_str(text.trim_matches(' ')).ok()?;
    (n.as_f64().is_some_and(f64::is_finite) && text == text.trim()).then(|| n.to_string())
}

/// Why `text` is not a relative, normalized path inside the workspace; `None` when it is.
fn path_problem(text: &str) -> Option<&'static str> {
    let Some(first) = text.chars().next() else {
        return Some("it is empty");
    };
    if !(first.is_alphanumeric() || matches!(first, '_' | '.')) {
        return Some("it must start with a letter, a digit, '_' or '.'");
    }
    if let Some(c) = text.chars().find(|c| {
        !(c.is_alphanumeric()
            || matches!(c, '.' | '_' | '-' | '+' | '@' | ',' | '~' | '#' | '%' | '/'))
    }) {
        return Some(if c.is_control() {
            "it holds a control character"
        } else {
            match c {
                ' ' => "it holds a space",
                ':' => "it holds ':' (a URL or transport, not a path)",
                '=' => "it holds '=' (an assignment, not a path)",
                _ => "it holds a character outside letters, digits and ._-+@,~#%",
            }
        });
    }
    for component in text.split('/') {
        match component {
            "" => return Some("it is absolute, has an empty component or ends with '/'"),
            "." | ".." => return Some("it has a '.' or '..' component"),
            _ => {}
        }
    }
    None
}

/// An `http(s)` URL without user info, as the WHATWG parser serializes it.
fn url(text: &str) -> Result<String, &'static str> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it holds whitespace or a control character");
    }
    let parsed = url::Url::parse(text).map_err(|_| "it does not parse as a URL")?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("its scheme is not http or https");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("it carries user info");
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("it has no host");
    }
    Ok(parsed.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(shape: &Shape, v: Value) -> String {
        shape.check(&v).unwrap()
    }

    fn err(shape: &Shape, v: Value) -> String {
        shape.check(&v).unwrap_err().to_string()
    }

    #[test]
    fn integers_are_whole_numbers_written_canonically() {
        assert_eq!(ok(&Shape::Integer, json!(5)), "5");
        assert_eq!(ok(&Shape::Integer, json!("-12")), "-12");
        for bad in [
            json!("1.5"),
            json!("+1"),
            json!(" 1"),
            json!("0x10"),
            json!("1;id"),
            json!(1.5),
            json!(true),
        ] {
            assert!(Shape::Integer.check(&bad).is_err(), "{bad}");
        }
        assert!(err(&Shape::Integer, json!("99999999999999999999")).contains("integer"));
    }

    #[test]
    fn numbers_are_finite_json_numbers() {
        assert_eq!(ok(&Shape::Number, json!("1.50")), "1.5");
        assert_eq!(ok(&Shape::Number, json!(2)), "2");
        for bad in ["inf", "NaN", "+1", "1e999", "", "--1", "1 "] {
            assert!(Shape::Number.check(&json!(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn enums_and_booleans_are_exact() {
        let e = Shape::Enum(vec!["a".into(), "b".into()]);
        assert_eq!(ok(&e, json!("a")), "a");
        assert!(err(&e, json!("A")).contains("one of a, b"));
        assert_eq!(ok(&Shape::Boolean, json!(true)), "true");
        assert!(Shape::Boolean.check(&json!("yes")).is_err());
    }

    #[test]
    fn patterns_match_whole_values() {
        let p = Shape::pattern("[a-z0-9._/-]+").unwrap();
        assert_eq!(ok(&p, json!("main")), "main");
        assert!(p.check(&json!("main; id")).is_err());
        assert!(p.check(&json!("ok\nX")).is_err());
        assert!(Shape::pattern("(").is_err());
        // Alternation is anchored as a whole: `a|b` never matches "a-and-more".
        assert!(
            Shape::pattern("a|b")
                .unwrap()
                .check(&json!("a-and-more"))
                .is_err()
        );
    }

    #[test]
    fn paths_are_relative_normalized_and_plain() {
        for good in [
            "src/main.rs",
            "a-b/c.txt",
            ".github/x.yml",
            "_x",
            "v1.2+build@3,4~#%",
        ] {
            assert_eq!(ok(&Shape::Path, json!(good)), good);
        }
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "",
            "-rf",
            "+cmd",
            "@opts",
            "x|",
            "rm -rf / |",
            "<x",
            "a:b",
            "ext::sh -c id",
            "X=$(id)",
            "a\nb",
            "a\0b",
            " a",
            "a ",
            "$HOME",
            "a;b",
            "`id`",
            "a\\b",
            "*",
        ] {
            assert!(Shape::Path.check(&json!(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn urls_are_http_without_user_info() {
        assert_eq!(
            ok(&Shape::Url, json!("https://example.com/a?b=c")),
            "https://example.com/a?b=c"
        );
        assert_eq!(
            ok(&Shape::Url, json!("http://EXAMPLE.com")),
            "http://example.com/"
        );
        for bad in [
            "file:///etc/passwd",
            "https://user:pw@example.com/",
            "https://u@x.test",
            "gopher://x",
            "-K/etc/passwd",
            "https://x.test/ a",
            "https://x.test/\n-o",
            "ext::sh",
            "http://",
            "//x",
        ] {
            assert!(Shape::Url.check(&json!(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn free_text_takes_anything_and_lists_are_not_scalars() {
        assert_eq!(ok(&Shape::Text, json!("; rm -rf /")), "; rm -rf /");
        assert_eq!(ok(&Shape::Text, json!([1])), "[1]");
        assert!(err(&Shape::Path, json!(["a"])).contains("list"));
        assert!(!Shape::Text.is_typed() && Shape::Url.is_typed());
    }
}
