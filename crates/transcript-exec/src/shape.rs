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
//!   lexically inside the workspace; each character a letter, a digit or one of `._-+@~#%`
//!   (no `,`: `cc -wrapper` and others split a value at commas);
//!   the first character a letter, a digit, `_` or `.`. So no space (a path is never a
//!   command line with arguments), no `:` (no URL or `ext::` transport), no `=` (no `make`
//!   assignment), no `$`, `|`, `<`, `>` (no two-argument `open`), no control character; no
//!   hidden component (a name starting with `.`: `.git`, `.github`, `.envrc`, `.npmrc`)
//!   unless the input declares `hidden: true`. In a run, the path is then resolved beneath
//!   the workspace by the kernel when it is checked ([`Shape::check_in`]: `openat2` with
//!   `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, as the file tools do): a symlink anywhere on it
//!   is refused, so is a path through a file; a path that does not exist yet is checked
//!   through its longest existing parent. (That is the state when the value is checked: a
//!   symlink made afterwards, by a step, is not seen here.);
//! - `url`: `http` or `https`, a host, no user info, no whitespace or control character;
//!   written as the WHATWG URL parser (the `url` crate) serializes it, and that text holds
//!   only letters, digits and `-._~:/?#[]@%+=,` (no `;`, `&`, `|`, `$`, quotes, brackets or
//!   `!`: a URL is never shell syntax, whatever program reads it; write them `%XX`).
//!
//! An error shows at most 60 characters of the value, **masked whole first**
//! ([`ShapeError::masked`]: a secret cut before the mask sees it is no longer recognisable),
//! and none of a `secret: true` input's ([`ShapeError::without_value`]).
//!
//! Where the value lands in argv, [`crate::workflow`]'s argv rule adds one more: a typed value
//! never starts with `-` or `+` unless the reference says `| option`.

use std::fmt;
use std::path::Path;

use regex::Regex;
use serde_json::Value;

/// Why a value does not have its declared shape, or a declaration is not a shape.
///
/// The value is kept apart from the rule it breaks, so a message is made only once the
/// value has been masked whole ([`ShapeError::masked`]) or left out
/// ([`ShapeError::without_value`], for a `secret: true` input): a cut made before the mask
/// would leave a secret's first characters unrecognisable to it (#56).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.masked(&|t: &str| t.to_owned()))]
pub struct ShapeError {
    /// The whole text of the value that broke the rule, when the error is about one.
    value: Option<String>,
    /// The rule, as "… is not RULE" completes it (or the whole message without a value).
    rule: String,
}

impl ShapeError {
    /// An error saying `message` (about no value).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            value: None,
            rule: message.into(),
        }
    }

    /// `value` is not `rule`.
    fn about(value: &str, rule: impl Into<String>) -> Self {
        Self {
            value: Some(value.to_owned()),
            rule: rule.into(),
        }
    }

    /// The message with the value masked whole by `mask` first, then cut to at most 60
    /// characters.
    pub fn masked(&self, mask: &dyn Fn(&str) -> String) -> String {
        match &self.value {
            Some(value) => format!("{} is not {}", shown(&mask(value)), self.rule),
            None => self.rule.clone(),
        }
    }

    /// The message naming the rule only, never the value (a secret's shape error).
    pub fn without_value(&self) -> String {
        match &self.value {
            Some(_) => format!("the value is not {}", self.rule),
            None => self.rule.clone(),
        }
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
    /// A relative, normalized path inside the workspace; a component starting with `.`
    /// (`.git`, `.envrc`) only when `hidden` (an input declared `hidden: true`).
    Path {
        /// Whether a hidden component is allowed.
        hidden: bool,
    },
    /// An `http(s)` URL without user info.
    Url,
}

impl PartialEq for Shape {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Shape::Pattern { source: a, .. }, Shape::Pattern { source: b, .. }) => a == b,
            (Shape::Enum(a), Shape::Enum(b)) => a == b,
            (Shape::Path { hidden: a }, Shape::Path { hidden: b }) => a == b,
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
            Shape::Path { hidden: false } => f.write_str("path"),
            Shape::Path { hidden: true } => f.write_str("path (hidden allowed)"),
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
    /// which rule the value breaks (its message shows at most 60 characters of the value,
    /// masked first: [`ShapeError::masked`]). A `path` is checked as text only: see
    /// [`Shape::check_in`] for the check against the workspace.
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
        let bad = |rule: &str| Err(ShapeError::about(&text, rule));
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
            Shape::Path { hidden } => match path_problem(&text, *hidden) {
                None => Ok(text),
                Some(why) => bad(&format!("a relative path inside the workspace ({why})")),
            },
            Shape::Url => url(&text).map_err(|why| {
                ShapeError::about(&text, format!("an http(s) URL without user info ({why})"))
            }),
        }
    }
}

impl Shape {
    /// [`Shape::check`], then, for a `path` when a workspace is given, the kernel's word:
    /// the path is resolved beneath `workspace` with `openat2(RESOLVE_BENEATH |
    /// RESOLVE_NO_SYMLINKS)` ([`crate::confined::resolve_beneath`]), so a symlink anywhere
    /// on it (leading out or not) and a path through a file are refused. A path that does not
    /// exist yet (to be written) is checked through its longest existing parent.
    pub fn check_in(&self, value: &Value, workspace: Option<&Path>) -> Result<String, ShapeError> {
        let text = self.check(value)?;
        if let (Shape::Path { .. }, Some(workspace)) = (self, workspace) {
            crate::confined::resolve_beneath(workspace, &text).map_err(|e| {
                ShapeError::about(&text, format!("a path beneath the workspace ({e})"))
            })?;
        }
        Ok(text)
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
/// A hidden component (a name starting with `.`) is one unless `hidden`.
fn path_problem(text: &str, hidden: bool) -> Option<&'static str> {
    let Some(first) = text.chars().next() else {
        return Some("it is empty");
    };
    if !(first.is_alphanumeric() || matches!(first, '_' | '.')) {
        return Some("it must start with a letter, a digit, '_' or '.'");
    }
    if let Some(c) = text.chars().find(|c| {
        !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '@' | '~' | '#' | '%' | '/'))
    }) {
        return Some(if c.is_control() {
            "it holds a control character"
        } else {
            match c {
                ' ' => "it holds a space",
                ':' => "it holds ':' (a URL or transport, not a path)",
                '=' => "it holds '=' (an assignment, not a path)",
                _ => "it holds a character outside letters, digits and ._-+@~#%",
            }
        });
    }
    for component in text.split('/') {
        match component {
            "" => return Some("it is absolute, has an empty component or ends with '/'"),
            "." | ".." => return Some("it has a '.' or '..' component"),
            c if c.starts_with('.') && !hidden => {
                return Some(
                    "it names a hidden file or directory, a name starting with '.', which only \
                     an input declared `hidden: true` may",
                );
            }
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
    let written = parsed.to_string();
    if written.chars().any(|c| {
        !(c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '.'
                    | '_'
                    | '~'
                    | ':'
                    | '/'
                    | '?'
                    | '#'
                    | '['
                    | ']'
                    | '@'
                    | '%'
                    | '+'
                    | '='
                    | ','
            ))
    }) {
        return Err("it holds a character of shell syntax (;&|$'\"(){}<>!*`\\); write it %XX");
    }
    Ok(written)
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

    const PATH: Shape = Shape::Path { hidden: false };
    const HIDDEN: Shape = Shape::Path { hidden: true };

    #[test]
    fn paths_are_relative_normalized_and_plain() {
        for good in [
            "src/main.rs",
            "a-b/c.txt",
            "_x",
            "v1.2+build@3~#%",
            "a.b/c.",
        ] {
            assert_eq!(ok(&PATH, json!(good)), good);
            assert_eq!(ok(&HIDDEN, json!(good)), good);
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
            "mkdir,--,/x",
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
            assert!(PATH.check(&json!(bad)).is_err(), "{bad:?}");
            assert!(HIDDEN.check(&json!(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_hidden_component_only_where_the_input_declares_it() {
        for hidden in [
            ".git/config",
            ".envrc",
            "src/.npmrc",
            ".github/workflows/x.yml",
            "a/.b/c",
        ] {
            let e = err(&PATH, json!(hidden));
            assert!(e.contains("hidden"), "{hidden}: {e}");
            assert_eq!(ok(&HIDDEN, json!(hidden)), hidden);
        }
        assert!(HIDDEN.check(&json!("../.git")).is_err());
    }

    #[test]
    fn a_shape_error_masks_the_whole_value_before_cutting_it() {
        let secret = "s3cr3t-".repeat(11);
        let e = Shape::Integer.check(&json!(secret)).unwrap_err();
        // Cut first, the mask would never see the whole secret: 60 characters of it leak.
        assert!(e.to_string().contains(&secret[..60]));
        let mask = |t: &str| t.replace(&secret, "***");
        let masked = e.masked(&mask);
        assert_eq!(masked, "\"***\" is not an integer");
        for start in 0..secret.len() - 8 {
            assert!(!masked.contains(&secret[start..start + 8]), "{masked}");
        }
        let withheld = e.without_value();
        assert_eq!(withheld, "the value is not an integer");
        let url = Shape::Url
            .check(&json!(format!("ftp://{secret}")))
            .unwrap_err();
        assert!(
            !url.without_value().contains("s3cr3t"),
            "{}",
            url.without_value()
        );
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
            "http://h/?;touch${IFS}/x",
            "http://h/?a&b",
            "http://h/$(id)",
            "http://h/'x'",
        ] {
            assert!(Shape::Url.check(&json!(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn free_text_takes_anything_and_lists_are_not_scalars() {
        assert_eq!(ok(&Shape::Text, json!("; rm -rf /")), "; rm -rf /");
        assert_eq!(ok(&Shape::Text, json!([1])), "[1]");
        assert!(err(&PATH, json!(["a"])).contains("list"));
        assert!(!Shape::Text.is_typed() && Shape::Url.is_typed());
    }
}
