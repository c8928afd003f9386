//! The filters of a `{{ reference | filter | … }}`: `raw` (the author vouching), `option`
//! (a value meant as an option), `file` (the path of a private file holding the value) and
//! one shape (`int`, `number`, `bool`, `path`, `url`, `enum(a, b)`, `match('…')`, #48).
//! `| path` never admits a hidden component (`.git`, `.envrc`): only an input declared
//! `type: path` with `hidden: true` does (#56).

use crate::shape::Shape;

/// The filters of one reference.
#[derive(Default)]
pub(super) struct Filters {
    pub(super) raw: bool,
    pub(super) option: bool,
    pub(super) file: bool,
    pub(super) shape: Option<Shape>,
}

impl Filters {
    pub(super) fn add(&mut self, filter: &str) -> Result<(), String> {
        let (name, args) = match filter.split_once('(') {
            Some((name, rest)) => {
                let args = rest
                    .trim_end()
                    .strip_suffix(')')
                    .ok_or_else(|| format!("filter '{filter}' lacks its ')'"))?;
                (name.trim(), Some(args))
            }
            None => (filter, None),
        };
        let shape = match (name, args) {
            ("raw", None) => {
                self.raw = true;
                None
            }
            ("option", None) => {
                self.option = true;
                None
            }
            ("file", None) => {
                self.file = true;
                None
            }
            ("int", None) => Some(Shape::Integer),
            ("number", None) => Some(Shape::Number),
            ("bool", None) => Some(Shape::Boolean),
            // A filter declares nothing more: no hidden component (#56).
            ("path", None) => Some(Shape::Path { hidden: false }),
            ("url", None) => Some(Shape::Url),
            ("enum", Some(args)) => {
                let values: Vec<String> = args
                    .split(',')
                    .map(|v| unquote(v.trim()).to_owned())
                    .filter(|v| !v.is_empty())
                    .collect();
                if values.is_empty() {
                    return Err("enum(…) needs at least one value".to_owned());
                }
                Some(Shape::Enum(values))
            }
            ("match", Some(args)) => {
                let source = args.trim();
                let quoted = source.len() >= 2
                    && (source.starts_with('\'') && source.ends_with('\'')
                        || source.starts_with('"') && source.ends_with('"'));
                if !quoted {
                    return Err("match(…) takes one quoted pattern: match('[a-z]+')".to_owned());
                }
                Some(Shape::pattern(&source[1..source.len() - 1]).map_err(|e| e.to_string())?)
            }
            _ => {
                return Err(format!(
                    "unknown filter '{filter}' (the filters are raw, option, file, int, number, \
                     bool, path, url, enum(a, b) and match('…'))"
                ));
            }
        };
        if let Some(shape) = shape {
            if self.shape.is_some() {
                return Err("a reference takes one shape".to_owned());
            }
            self.shape = Some(shape);
        }
        if self.raw && (self.shape.is_some() || self.file || self.option) {
            return Err("'raw' stands alone: the author vouches for the value as it is".to_owned());
        }
        Ok(())
    }
}

/// `'x'` or `"x"` without its quotes; anything else as it is.
fn unquote(text: &str) -> &str {
    for q in ['\'', '"'] {
        if let Some(inner) = text.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            return inner;
        }
    }
    text
}

/// `expr | filter | filter(args)` split at the `|` outside quotes and parentheses (a
/// `match('a|b')` pattern keeps its `|`); each part trimmed.
pub(super) fn split_filters(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut start) = (0usize, None::<char>, 0usize);
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, '|') if depth == 0 => {
                parts.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(inner[start..].trim());
    parts
}
