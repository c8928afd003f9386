//! A workflow's declared inputs (#48): a name, a default, and the value's **shape**
//! (`type: string | integer | number | boolean | enum | path | url`, with `pattern` for
//! strings, `values` for enums and `hidden` for paths), and whether it is `secret`.
//!
//! A `path` input never names a hidden component (`.git`, `.github`, `.envrc`, `.npmrc`)
//! unless it declares `hidden: true`; in a run its value is resolved beneath the workspace
//! by the kernel when it is checked (#56, [`crate::shape`]). A `secret: true` input that
//! fails its shape check is named with its rule, never shown.
//!
//! The shape decides where a value may stand: a typed input may be a whole argv element; an
//! input without a type, or a `string` without a `pattern`, is free text and reaches a
//! program only through its channels (`stdin:`, `{{ x | file }}`, `env:`, a prompt). The
//! shapes themselves and their checks live in [`crate::shape`].

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;

use crate::shape::{Shape, ShapeError};

/// The declared type of an input (`type:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    /// Text; free text unless `pattern` is given.
    String,
    /// A whole number (`-?[0-9]+`, within `i64`).
    Integer,
    /// A finite number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// One of `values`.
    Enum,
    /// A relative, normalized path inside the workspace, without a hidden component unless
    /// `hidden: true` ([`crate::shape`]).
    Path,
    /// An `http(s)` URL without user info.
    Url,
}

/// A declared workflow input.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputDef {
    /// The input's name (`{{inputs.NAME}}`).
    pub name: String,
    /// The value used when the caller gives none; without a default the
    /// input is required. A default is checked against the input's shape too.
    #[serde(default)]
    pub default: Option<Value>,
    /// What the input is for, in words; the engine does not use it.
    #[serde(default)]
    pub description: Option<String>,
    /// The value's declared type; none is free text.
    #[serde(default, rename = "type")]
    pub kind: Option<InputType>,
    /// For `type: string`: a regular expression the whole value must match (anchored at both
    /// ends). A pattern that admits anything (`.*`) is the author vouching for the value, as
    /// `| raw` is.
    #[serde(default)]
    pub pattern: Option<String>,
    /// For `type: enum`: the values allowed.
    #[serde(default)]
    pub values: Option<Vec<String>>,
    /// A secret (a token, a password): masked as `***` in every record, export, stderr line
    /// and span, with or without `--redact`.
    #[serde(default)]
    pub secret: bool,
    /// For `type: path`: the value may name a hidden component (a name starting with `.`:
    /// `.git/config`, `.envrc`), which a path never does otherwise (#56).
    #[serde(default)]
    pub hidden: bool,
}

impl InputDef {
    /// An untyped (free text) input named `name` with an optional default.
    pub fn new(name: impl Into<String>, default: Option<Value>) -> Self {
        Self {
            name: name.into(),
            default,
            description: None,
            kind: None,
            pattern: None,
            values: None,
            secret: false,
            hidden: false,
        }
    }

    /// Declares the input's type.
    #[must_use]
    pub fn typed(mut self, kind: InputType) -> Self {
        self.kind = Some(kind);
        self
    }

    /// Declares the whole-match pattern of a `string` input.
    #[must_use]
    pub fn pattern(mut self, pattern: impl Into<String>) -> Self {
        self.pattern = Some(pattern.into());
        self
    }

    /// Declares the values of an `enum` input.
    #[must_use]
    pub fn values<S: Into<String>>(mut self, values: impl IntoIterator<Item = S>) -> Self {
        self.values = Some(values.into_iter().map(Into::into).collect());
        self
    }

    /// Lets a `path` input name a hidden component (`hidden: true`).
    #[must_use]
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }

    /// Marks the input secret.
    #[must_use]
    pub fn secret(mut self) -> Self {
        self.secret = true;
        self
    }

    /// The input's shape, from its declaration; an error names what is inconsistent
    /// (`pattern` on an integer, an enum without values, a pattern that does not compile).
    pub fn shape(&self) -> Result<Shape, ShapeError> {
        let misplaced = |field: &str| {
            Err(ShapeError::new(format!(
                "input '{}': '{field}' does not apply to type {}",
                self.name,
                self.kind
                    .map_or("(none)".to_owned(), |k| format!("{k:?}").to_lowercase())
            )))
        };
        if self.pattern.is_some() && !matches!(self.kind, Some(InputType::String)) {
            return misplaced("pattern");
        }
        if self.values.is_some() && !matches!(self.kind, Some(InputType::Enum)) {
            return misplaced("values");
        }
        if self.hidden && !matches!(self.kind, Some(InputType::Path)) {
            return misplaced("hidden");
        }
        Ok(match self.kind {
            None => Shape::Text,
            Some(InputType::String) => match &self.pattern {
                None => Shape::Text,
                Some(p) => Shape::pattern(p)
                    .map_err(|e| ShapeError::new(format!("input '{}': {e}", self.name)))?,
            },
            Some(InputType::Integer) => Shape::Integer,
            Some(InputType::Number) => Shape::Number,
            Some(InputType::Boolean) => Shape::Boolean,
            Some(InputType::Enum) => match &self.values {
                Some(v) if !v.is_empty() => Shape::Enum(v.clone()),
                _ => {
                    return Err(ShapeError::new(format!(
                        "input '{}': type enum needs a non-empty 'values' list",
                        self.name
                    )));
                }
            },
            Some(InputType::Path) => Shape::Path {
                hidden: self.hidden,
            },
            Some(InputType::Url) => Shape::Url,
        })
    }
}

/// The inputs of a workflow by their shape: the typed ones (anything but free text) and
/// the closed ones (enum, integer, number, boolean: never code in any position). Every
/// declaration must make a shape; the error says which does not.
pub(super) fn shapes(inputs: &[InputDef]) -> Result<(HashSet<&str>, HashSet<&str>), String> {
    let mut typed = HashSet::new();
    let mut closed = HashSet::new();
    for i in inputs {
        // A default is a value like any other: checked when the run starts (or the child is
        // called), where a bad one is an input error naming `default` (exit 2).
        let shape = i.shape().map_err(|e| e.to_string())?;
        if shape.is_typed() {
            typed.insert(i.name.as_str());
        }
        if matches!(
            shape,
            Shape::Enum(_) | Shape::Integer | Shape::Number | Shape::Boolean
        ) {
            closed.insert(i.name.as_str());
        }
    }
    Ok((typed, closed))
}
