//! `{{…}}` templates: parsing (validated before a run) and rendering
//! against a run's [`Scope`].
//!
//! References: `inputs.NAME`, `steps.NAME.output`, `steps.NAME.exit_code`,
//! `steps.NAME.error`, `loop.item` (optionally `loop.item.FIELD…`) and
//! `loop.index`. Whitespace inside the braces is ignored.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// Why a template string is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad template {template:?}: {reason}")]
pub struct TemplateError {
    /// The template text (truncated to 120 characters).
    pub template: String,
    /// What is wrong with it.
    pub reason: String,
}

/// One reference inside `{{ }}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `inputs.NAME`
    Input(String),
    /// `steps.NAME.FIELD`
    Step {
        /// The referenced step's name.
        step: String,
        /// Which value of the step.
        field: StepField,
    },
    /// `loop.item` followed by an optional field path.
    LoopItem(Vec<String>),
    /// `loop.index`
    LoopIndex,
    /// `workflow.dir`: the absolute directory of the workflow's file
    /// (empty for workflows built in Rust), so a workflow can name files
    /// that ship beside it.
    WorkflowDir,
}

/// The value of a step a template can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepField {
    /// The step's output (command stdout without its trailing newline,
    /// tool output, custom return value, agent answer, child outputs…).
    Output,
    /// A command's exit code.
    ExitCode,
    /// The step's error message (empty on success).
    Error,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Input(n) => write!(f, "inputs.{n}"),
            Reference::Step { step, field } => {
                let field = match field {
                    StepField::Output => "output",
                    StepField::ExitCode => "exit_code",
                    StepField::Error => "error",
                };
                write!(f, "steps.{step}.{field}")
            }
            Reference::LoopItem(path) if path.is_empty() => f.write_str("loop.item"),
            Reference::LoopItem(path) => write!(f, "loop.item.{}", path.join(".")),
            Reference::LoopIndex => f.write_str("loop.index"),
            Reference::WorkflowDir => f.write_str("workflow.dir"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Lit(String),
    Ref(Reference),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Segment>,
}

impl Template {
    /// Parses `text`; fails on an unclosed `{{`, an empty or unknown reference.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let err = |reason: String| TemplateError {
            template: text.chars().take(120).collect(),
            reason,
        };
        let mut segments = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                segments.push(Segment::Lit(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| err("unclosed '{{'".to_owned()))?;
            let inner = after[..close].trim();
            segments.push(Segment::Ref(parse_reference(inner).map_err(err)?));
            rest = &after[close + 2..];
        }
        if rest.contains("}}") {
            return Err(err("'}}' without a matching '{{'".to_owned()));
        }
        if !rest.is_empty() {
            segments.push(Segment::Lit(rest.to_owned()));
        }
        Ok(Self { segments })
    }

    /// The references in order of appearance.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Ref(r) => Some(r),
            Segment::Lit(_) => None,
        })
    }

    /// Renders to a string (non-string values as compact JSON, null as "").
    pub fn render(&self, scope: &Scope) -> String {
        let mut out = String::new();
        for s in &self.segments {
            match s {
                Segment::Lit(l) => out.push_str(l),
                Segment::Ref(r) => out.push_str(&value_to_text(&scope.lookup(r))),
            }
        }
        out
    }

    /// Renders to a JSON value: a template that is exactly one reference
    /// yields the referenced value itself (keeping numbers, arrays, objects);
    /// anything else yields a string.
    pub fn render_value(&self, scope: &Scope) -> Value {
        match self.segments.as_slice() {
            [Segment::Ref(r)] => scope.lookup(r),
            _ => Value::String(self.render(scope)),
        }
    }
}

fn parse_reference(inner: &str) -> Result<Reference, String> {
    if inner.is_empty() {
        return Err("empty reference '{{}}'".to_owned());
    }
    let parts: Vec<&str> = inner.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("malformed reference '{inner}'"));
    }
    match parts.as_slice() {
        ["inputs", name] => Ok(Reference::Input((*name).to_owned())),
        ["steps", step, field] => {
            let field = match *field {
                "output" => StepField::Output,
                "exit_code" => StepField::ExitCode,
                "error" => StepField::Error,
                other => {
                    return Err(format!(
                        "unknown step field '{other}' in '{inner}' (expected output, exit_code or error)"
                    ));
                }
            };
            Ok(Reference::Step {
                step: (*step).to_owned(),
                field,
            })
        }
        ["loop", "index"] => Ok(Reference::LoopIndex),
        ["workflow", "dir"] => Ok(Reference::WorkflowDir),
        ["loop", "item", fields @ ..] => Ok(Reference::LoopItem(
            fields.iter().map(|f| (*f).to_owned()).collect(),
        )),
        _ => Err(format!(
            "unknown reference '{inner}' (expected inputs.NAME, steps.NAME.output|exit_code|error, loop.item[.FIELD] or loop.index)"
        )),
    }
}

/// Text form of a value inside a rendered string.
pub fn value_to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What a step left for later templates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepValue {
    /// `steps.NAME.output`
    pub output: Value,
    /// `steps.NAME.exit_code` (commands only).
    pub exit_code: Option<i64>,
    /// `steps.NAME.error` (failed steps that continued).
    pub error: Option<String>,
}

/// The innermost loop's variables.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopFrame {
    /// `loop.item` (null in a `while` body).
    pub item: Value,
    /// `loop.index`
    pub index: u64,
}

/// Values visible to templates at one point of a run. Each concurrent
/// branch and each loop body works on its own copy, so no loop state is
/// shared between branches.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    workflow_dir: Option<Arc<str>>,
    inputs: Arc<Map<String, Value>>,
    steps: HashMap<String, StepValue>,
    loop_frame: Option<LoopFrame>,
}

impl Scope {
    /// A scope with the run's inputs and nothing else.
    pub fn new(inputs: Map<String, Value>) -> Self {
        Self {
            workflow_dir: None,
            inputs: Arc::new(inputs),
            steps: HashMap::new(),
            loop_frame: None,
        }
    }

    /// Sets what `{{workflow.dir}}` reads.
    pub fn with_workflow_dir(mut self, dir: Option<&std::path::Path>) -> Self {
        self.workflow_dir = dir.map(|d| Arc::from(d.display().to_string()));
        self
    }

    /// Records a step's value.
    pub fn set_step(&mut self, name: &str, value: StepValue) {
        self.steps.insert(name.to_owned(), value);
    }

    /// Sets the innermost loop frame.
    pub fn set_loop(&mut self, frame: LoopFrame) {
        self.loop_frame = Some(frame);
    }

    /// The value of a reference; unknown values read as null (validation
    /// has already rejected references to names that do not exist).
    pub fn lookup(&self, r: &Reference) -> Value {
        match r {
            Reference::Input(n) => self.inputs.get(n).cloned().unwrap_or(Value::Null),
            Reference::Step { step, field } => match (self.steps.get(step), field) {
                (Some(v), StepField::Output) => v.output.clone(),
                (Some(v), StepField::ExitCode) => v.exit_code.map(Value::from).unwrap_or_default(),
                (Some(v), StepField::Error) => Value::String(v.error.clone().unwrap_or_default()),
                (None, _) => Value::Null,
            },
            Reference::WorkflowDir => {
                Value::String(self.workflow_dir.as_deref().unwrap_or_default().to_owned())
            }
            Reference::LoopIndex => self
                .loop_frame
                .as_ref()
                .map(|f| Value::from(f.index))
                .unwrap_or_default(),
            Reference::LoopItem(path) => {
                let mut v = match &self.loop_frame {
                    Some(f) => &f.item,
                    None => return Value::Null,
                };
                for p in path {
                    v = match v {
                        Value::Object(m) => m.get(p).unwrap_or(&Value::Null),
                        Value::Array(a) => p
                            .parse::<usize>()
                            .ok()
                            .and_then(|i| a.get(i))
                            .unwrap_or(&Value::Null),
                        _ => &Value::Null,
                    };
                }
                v.clone()
            }
        }
    }
}

/// Parses every string leaf of a JSON value as a template (for validation).
pub fn templates_in(value: &Value) -> Result<Vec<Template>, TemplateError> {
    let mut out = Vec::new();
    collect(value, &mut out)?;
    Ok(out)
}

fn collect(value: &Value, out: &mut Vec<Template>) -> Result<(), TemplateError> {
    match value {
        Value::String(s) => out.push(Template::parse(s)?),
        Value::Array(a) => {
            for v in a {
                collect(v, out)?;
            }
        }
        Value::Object(m) => {
            for v in m.values() {
                collect(v, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Renders every string leaf of a JSON value (keys are left alone).
pub fn render_json(value: &Value, scope: &Scope) -> Value {
    match value {
        Value::String(s) if s.contains("{{") => match Template::parse(s) {
            Ok(t) => t.render_value(scope),
            // Validation rejects bad templates before the run; keep text as is.
            Err(_) => value.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|v| render_json(v, scope)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), render_json(v, scope)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Renders a string template (literal text when it has no `{{`).
pub fn render_str(text: &str, scope: &Scope) -> String {
    if !text.contains("{{") {
        return text.to_owned();
    }
    match Template::parse(text) {
        Ok(t) => t.render(scope),
        Err(_) => text.to_owned(),
    }
}

/// Evaluates a `while` condition: the rendered text, either `A == B`,
/// `A != B` (sides trimmed) or a truth value (false for "", "false", "0",
/// "no", "null", case-insensitive).
pub fn eval_condition(text: &str, scope: &Scope) -> bool {
    let rendered = render_str(text, scope);
    if let Some((a, b)) = rendered.split_once("!=") {
        return a.trim() != b.trim();
    }
    if let Some((a, b)) = rendered.split_once("==") {
        return a.trim() == b.trim();
    }
    let t = rendered.trim().to_ascii_lowercase();
    !matches!(t.as_str(), "" | "false" | "0" | "no" | "null")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_and_renders() {
        let t = Template::parse("a {{ inputs.x }} b {{steps.s.output}}{{loop.index}}").unwrap();
        let mut inputs = Map::new();
        inputs.insert("x".into(), json!("X"));
        let mut s = Scope::new(inputs);
        s.set_step(
            "s",
            StepValue {
                output: json!({"k": 1}),
                exit_code: Some(3),
                error: None,
            },
        );
        s.set_loop(LoopFrame {
            item: json!({"f": [5, 6]}),
            index: 2,
        });
        assert_eq!(t.render(&s), "a X b {\"k\":1}2");
        let v = Template::parse("{{loop.item.f.1}}")
            .unwrap()
            .render_value(&s);
        assert_eq!(v, json!(6));
        assert_eq!(
            Template::parse("{{steps.s.exit_code}}")
                .unwrap()
                .render_value(&s),
            json!(3)
        );
        assert_eq!(render_str("{{steps.s.error}}", &s), "");
        assert_eq!(render_str("{{steps.none.output}}", &s), "");
        assert_eq!(
            render_json(&json!({"a": ["{{inputs.x}}", 1]}), &s),
            json!({"a": ["X", 1]})
        );
    }

    #[test]
    fn rejects_bad_templates() {
        for bad in [
            "{{",
            "{{}}",
            "x }}",
            "{{inputs}}",
            "{{steps.a.stdout}}",
            "{{loop.count}}",
            "{{env.HOME}}",
            "{{inputs..x}}",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
        let e = Template::parse("{{ nope }}").unwrap_err();
        assert!(e.to_string().contains("unknown reference 'nope'"), "{e}");
    }

    #[test]
    fn conditions() {
        let s = Scope::default();
        assert!(eval_condition("a == a", &s));
        assert!(!eval_condition("a != a", &s));
        assert!(eval_condition("yes", &s));
        for f in ["", "false", "0", "NO", "null"] {
            assert!(!eval_condition(f, &s));
        }
        assert_eq!(
            Reference::LoopItem(vec!["a".into()]).to_string(),
            "loop.item.a"
        );
    }
}
