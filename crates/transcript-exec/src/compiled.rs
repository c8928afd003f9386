//! Templates compiled when a workflow is built or loaded, rendered at
//! execution: every template of a [`Workflow`](crate::Workflow) (prompts,
//! argv elements, `env:` values, messages, outputs, `while` conditions and
//! the string leaves of `input:`, `inputs:` and `with:`) is parsed exactly
//! once, when the step is constructed (from YAML or in Rust), and never
//! again, however many times a loop runs it.
//!
//! A text that does not parse keeps its [`TemplateError`]: validation
//! ([`WorkflowSet::validate`](crate::WorkflowSet::validate), which
//! [`WorkflowSet::load`](crate::WorkflowSet::load) and every run start
//! call) refuses it, naming the file, the step and the field. Rendering a
//! template that did not compile returns that error (the step fails with
//! it); no text is ever used in place of a template that did not parse.

use std::fmt;

use serde_json::{Map, Value};

use crate::condition::Condition;
use crate::template::{Scope, Template, TemplateError};

/// What a workflow's text compiles to: a [`Template`] or a [`Condition`].
pub trait Compile: Sized {
    /// Parses `text`.
    fn compile(text: &str) -> Result<Self, TemplateError>;
}

impl Compile for Template {
    fn compile(text: &str) -> Result<Self, TemplateError> {
        Template::parse(text)
    }
}

impl Compile for Condition {
    fn compile(text: &str) -> Result<Self, TemplateError> {
        Condition::parse(text)
    }
}

/// A text of a workflow as written, with its compiled form (or why it does
/// not compile). Two are equal when their texts are.
#[derive(Clone)]
pub struct Compiled<T> {
    source: String,
    compiled: Result<T, TemplateError>,
}

/// A string template of a workflow (prompt, argv element, `env:` value,
/// message, output), compiled once.
pub type TemplateText = Compiled<Template>;

/// A `while` condition, compiled once.
pub type ConditionText = Compiled<Condition>;

impl<T: Compile> Compiled<T> {
    /// Compiles `source`.
    pub fn new(source: impl Into<String>) -> Self {
        let source = source.into();
        let compiled = T::compile(&source);
        Self { source, compiled }
    }
}

impl<T> Compiled<T> {
    /// The text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The compiled form, or why the text does not compile.
    pub fn compiled(&self) -> Result<&T, &TemplateError> {
        self.compiled.as_ref()
    }

    fn get(&self) -> Result<&T, TemplateError> {
        self.compiled.as_ref().map_err(Clone::clone)
    }
}

impl TemplateText {
    /// Renders to a string ([`Template::render`]).
    pub fn render(&self, scope: &Scope) -> Result<String, TemplateError> {
        self.get()?.render(scope)
    }

    /// Renders to a JSON value ([`Template::render_value`]).
    pub fn render_value(&self, scope: &Scope) -> Result<Value, TemplateError> {
        self.get()?.render_value(scope)
    }
}

impl ConditionText {
    /// Evaluates the condition ([`Condition::eval`]).
    pub fn eval(&self, scope: &Scope) -> Result<bool, TemplateError> {
        self.get()?.eval(scope)
    }
}

impl<T: Compile> Default for Compiled<T> {
    fn default() -> Self {
        Self::new("")
    }
}

impl<T: Compile> From<String> for Compiled<T> {
    fn from(source: String) -> Self {
        Self::new(source)
    }
}

impl<T: Compile> From<&str> for Compiled<T> {
    fn from(source: &str) -> Self {
        Self::new(source)
    }
}

impl<T> PartialEq for Compiled<T> {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl<T> Eq for Compiled<T> {}

impl<T> fmt::Debug for Compiled<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.source, f)
    }
}

/// A JSON value whose string leaves are templates (`input:` of an
/// operation, `with:` of a custom step, `inputs:` of `call_workflow`, a
/// `for_each` list item), compiled once. Keys are left alone.
#[derive(Clone)]
pub struct TemplateJson {
    source: Value,
    compiled: Result<JsonTemplate, TemplateError>,
}

/// The compiled form of a [`TemplateJson`]: its shape, with a template
/// at every string leaf.
#[derive(Debug, Clone)]
enum JsonTemplate {
    Text(Template),
    Array(Vec<JsonTemplate>),
    Object(Vec<(String, JsonTemplate)>),
    Other(Value),
}

impl JsonTemplate {
    fn compile(value: &Value) -> Result<Self, TemplateError> {
        Ok(match value {
            Value::String(s) => Self::Text(Template::parse(s)?),
            Value::Array(a) => Self::Array(a.iter().map(Self::compile).collect::<Result<_, _>>()?),
            Value::Object(m) => Self::Object(
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), Self::compile(v)?)))
                    .collect::<Result<_, TemplateError>>()?,
            ),
            other => Self::Other(other.clone()),
        })
    }

    /// A leaf that is exactly one reference yields the referenced value
    /// itself; other leaves yield strings ([`Template::render_value`]).
    fn render(&self, scope: &Scope) -> Result<Value, TemplateError> {
        Ok(match self {
            Self::Text(t) => t.render_value(scope)?,
            Self::Array(a) => Value::Array(
                a.iter()
                    .map(|v| v.render(scope))
                    .collect::<Result<_, _>>()?,
            ),
            Self::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), v.render(scope)?)))
                    .collect::<Result<Map<_, _>, TemplateError>>()?,
            ),
            Self::Other(v) => v.clone(),
        })
    }

    fn templates<'a>(&'a self, out: &mut Vec<&'a Template>) {
        match self {
            Self::Text(t) => out.push(t),
            Self::Array(a) => a.iter().for_each(|v| v.templates(out)),
            Self::Object(m) => m.iter().for_each(|(_, v)| v.templates(out)),
            Self::Other(_) => {}
        }
    }
}

impl TemplateJson {
    /// Compiles every string leaf of `source`.
    pub fn new(source: Value) -> Self {
        let compiled = JsonTemplate::compile(&source);
        Self { source, compiled }
    }

    /// The value as written.
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// Why a string leaf does not compile (the first one), if one does not.
    pub fn error(&self) -> Option<&TemplateError> {
        self.compiled.as_ref().err()
    }

    /// Every string leaf's template, in document order (none when one
    /// does not compile: see [`TemplateJson::error`]).
    pub fn templates(&self) -> Vec<&Template> {
        let mut out = Vec::new();
        if let Ok(c) = &self.compiled {
            c.templates(&mut out);
        }
        out
    }

    /// The template of the string at `key` of an object value.
    pub fn field(&self, key: &str) -> Option<&Template> {
        match &self.compiled {
            Ok(JsonTemplate::Object(m)) => m.iter().find_map(|(k, v)| match v {
                JsonTemplate::Text(t) if k == key => Some(t),
                _ => None,
            }),
            _ => None,
        }
    }

    /// The template of the string at `key[index]` of an object value.
    pub fn element(&self, key: &str, index: usize) -> Option<&Template> {
        match &self.compiled {
            Ok(JsonTemplate::Object(m)) => m.iter().find_map(|(k, v)| match v {
                JsonTemplate::Array(items) if k == key => match items.get(index) {
                    Some(JsonTemplate::Text(t)) => Some(t),
                    _ => None,
                },
                _ => None,
            }),
            _ => None,
        }
    }

    /// Renders every string leaf in `scope`.
    pub fn render(&self, scope: &Scope) -> Result<Value, TemplateError> {
        match &self.compiled {
            Ok(c) => c.render(scope),
            Err(e) => Err(e.clone()),
        }
    }
}

impl From<Value> for TemplateJson {
    fn from(source: Value) -> Self {
        Self::new(source)
    }
}

impl PartialEq for TemplateJson {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl fmt::Debug for TemplateJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.source, f)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope() -> Scope {
        let mut inputs = Map::new();
        inputs.insert("x".into(), json!("X"));
        inputs.insert("n".into(), json!(7));
        Scope::new(inputs)
    }

    #[test]
    fn json_leaves_render_like_templates_and_keys_stay() {
        let t = TemplateJson::new(
            json!({"{{inputs.x}}": ["{{inputs.x}}!", "{{inputs.n}}", 1, null], "raw": "{% raw %}{{x}}{% endraw %}"}),
        );
        assert!(t.error().is_none());
        assert_eq!(
            t.render(&scope()).unwrap(),
            json!({"{{inputs.x}}": ["X!", 7, 1, null], "raw": "{{x}}"})
        );
        assert_eq!(t.templates().len(), 3);
        assert!(t.field("raw").is_some());
    }

    #[test]
    fn a_text_that_does_not_parse_is_refused_when_rendered_never_used_as_text() {
        let bad = TemplateText::new("hello {{ inputs.x");
        let e = bad.render(&scope()).unwrap_err();
        assert!(e.reason.contains("unclosed"), "{e}");
        assert_eq!(bad.compiled().unwrap_err(), &e);
        let json = TemplateJson::new(json!({"a": ["ok", "{{nope}}"]}));
        assert!(json.render(&scope()).is_err());
        assert!(json.templates().is_empty());
        assert!(
            json.error()
                .unwrap()
                .reason
                .contains("unknown reference 'nope'")
        );
        let cond = ConditionText::new("{{ inputs.x | upper }} == X");
        assert!(cond.eval(&scope()).is_err());
    }
}
