//! `{{…}}` templates: parsing (once, when a workflow is built or loaded:
//! [`crate::compiled`]) and rendering against a run's [`Scope`].
//!
//! References: `inputs.NAME`, `steps.NAME.output`, `steps.NAME.exit_code`,
//! `steps.NAME.error`, `loop.item` (optionally `loop.item.FIELD…`),
//! `loop.index` and `workflow.dir`. Whitespace inside the braces is ignored.
//!
//! Literal text: a `}}` outside a tag is plain text (nested JSON needs no
//! escape); `{{ "{{" }}` (or `'…'`) writes a string literal, and
//! `{% raw %}…{% endraw %}` keeps a whole block verbatim (prompts about
//! Jinja, Helm or Go templates).
//!
//! Filters: `{{ inputs.x | raw }}` is the only way a value enters the
//! string form of `command:` (shell source, [`Template::check_shell_source`]);
//! it is the author saying "I vouch for this value as shell code". Every
//! other reference there is refused when the workflow loads: values reach a
//! shell through the step's `env:` instead. Everywhere else values are
//! inserted as text and `raw` changes nothing.
//!
//! `{{ inputs.x | option }}` marks a whole argv element whose value may start with `-` as
//! meant for the program as an option; without it such a value before a literal `--` fails
//! its step at run time (option injection, #39; `workflow::argv_rule`).

use std::fmt;

use serde_json::Value;

#[path = "scope.rs"]
mod scope;
use crate::shape::Shape;
pub use scope::{LoopFrame, Scope, StepValue};

#[path = "template_filter.rs"]
mod filter;
use filter::{Filters, split_filters};

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
pub(crate) enum Segment {
    /// Literal text; `escaped` when it came from `{% raw %}` or a string
    /// literal (never read as a condition operator).
    Lit { text: String, escaped: bool },
    /// A reference; `raw` when filtered with `| raw` (the author vouching
    /// for it as shell source), `option` with `| option` (the author meaning
    /// a value that may start with `-` or `+` as an option of the program, #39), `shape`
    /// with a shape filter (`| int`, `| path`, `| match('…')`, …, #48: checked when rendered),
    /// `file` with `| file` (rendered as the path of a private file holding the value).
    Ref {
        reference: Reference,
        raw: bool,
        option: bool,
        shape: Option<Shape>,
        file: bool,
    },
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub(crate) segments: Vec<Segment>,
}

impl Template {
    /// Parses `text`; fails on an unclosed `{{` or `{% raw %}`, an empty or
    /// unknown reference, or an unknown filter. A `}}` outside a tag is
    /// literal text (nested JSON needs no escape).
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        parse_count::bump();
        let err = |reason: String| TemplateError {
            template: text.chars().take(120).collect(),
            reason,
        };
        let mut segments = Vec::new();
        let push_lit = |segments: &mut Vec<Segment>, t: &str, escaped: bool| {
            if !t.is_empty() {
                segments.push(Segment::Lit {
                    text: t.to_owned(),
                    escaped,
                });
            }
        };
        let mut rest = text;
        loop {
            let expr = rest.find("{{");
            let block = find_tag(rest, "raw");
            let next = match (expr, block) {
                (Some(open), Some((start, _))) if open < start => Next::Expr(open),
                (Some(open), None) => Next::Expr(open),
                (_, Some((start, end))) => Next::Block(start, end),
                (None, None) => Next::End,
            };
            match next {
                Next::End => {
                    push_lit(&mut segments, rest, false);
                    break;
                }
                Next::Block(start, end) => {
                    push_lit(&mut segments, &rest[..start], false);
                    let after = &rest[end..];
                    let (close_start, close_end) = find_tag(after, "endraw")
                        .ok_or_else(|| err("'{% raw %}' without '{% endraw %}'".to_owned()))?;
                    push_lit(&mut segments, &after[..close_start], true);
                    rest = &after[close_end..];
                }
                Next::Expr(open) => {
                    push_lit(&mut segments, &rest[..open], false);
                    let after = &rest[open + 2..];
                    // A string literal may hold `}}`: look past it.
                    let lead = after.len() - after.trim_start().len();
                    let skip = match after[lead..].chars().next() {
                        Some(q @ ('"' | '\'')) => after[lead + 1..]
                            .find(q)
                            .map_or(0, |end| lead + 1 + end + 1),
                        _ => 0,
                    };
                    let close = after[skip..]
                        .find("}}")
                        .map(|c| skip + c)
                        .ok_or_else(|| err("unclosed '{{'".to_owned()))?;
                    segments.push(parse_expr(after[..close].trim()).map_err(err)?);
                    rest = &after[close + 2..];
                }
            }
        }
        Ok(Self { segments })
    }

    /// The references in order of appearance.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Ref { reference, .. } => Some(reference),
            Segment::Lit { .. } => None,
        })
    }

    /// Renders to a string (non-string values as compact JSON, null as "").
    /// No quoting: for prompts, messages, argv elements and JSON leaves. A shaped reference
    /// (`| int`, `| path`, …) whose value does not have its shape is an error naming the
    /// reference and the rule; `| file` writes the value to the run's private file channel.
    pub fn render(&self, scope: &Scope) -> Result<String, TemplateError> {
        let mut out = String::new();
        for s in &self.segments {
            match s {
                Segment::Lit { text, .. } => out.push_str(text),
                Segment::Ref {
                    reference,
                    shape,
                    file,
                    ..
                } => out.push_str(&self.render_ref(reference, shape.as_ref(), *file, scope)?),
            }
        }
        Ok(out)
    }

    /// One reference's text: its value checked against its shape, then written to a file
    /// when the reference says `| file`.
    fn render_ref(
        &self,
        reference: &Reference,
        shape: Option<&Shape>,
        file: bool,
        scope: &Scope,
    ) -> Result<String, TemplateError> {
        let value = scope.lookup(reference);
        let err = |reason: String| TemplateError {
            template: self.source_hint(),
            reason,
        };
        let text = match shape {
            // The value is masked whole before the message cuts it (#56); a `path` is resolved
            // beneath the run's workspace by the kernel.
            Some(shape) => shape.check_in(&value, scope.workspace()).map_err(|e| {
                err(format!(
                    "'{{{{{reference}}}}}' is not a {shape}: {}",
                    e.masked(&|t: &str| scope.mask_text(t))
                ))
            })?,
            None => value_to_text(&value),
        };
        if !file {
            return Ok(text);
        }
        let channel = scope.files().ok_or_else(|| {
            err(format!(
                "'{{{{{reference} | file}}}}' needs a run: only a running workflow has a private \
                 directory for its files"
            ))
        })?;
        channel
            .write(&text)
            .map_err(|e| err(format!("'{{{{{reference} | file}}}}': {e}")))
    }
    /// Checks that this template may become shell source: every reference
    /// is marked `| raw` (the author vouching for it as shell code). A plain
    /// `{{…}}` is refused with the fix: hand the value over through the
    /// step's `env:` (the script reads `"$NAME"`) or the list form of
    /// `command:` (argv, no shell). No value is ever quoted into shell
    /// source: a shell's grammar is not re-implemented here.
    pub fn check_shell_source(&self) -> Result<(), TemplateError> {
        for s in &self.segments {
            if let Segment::Ref {
                reference,
                raw: false,
                ..
            } = s
            {
                let var = env_name_for(reference);
                return Err(TemplateError {
                    template: self.source_hint(),
                    reason: format!(
                        "'{{{{{reference}}}}}' would be spliced into shell source; hand the value over as data: \
                         `env: {{ {var}: \"{{{{{reference}}}}}\" }}` and write \"${var}\" in the command, \
                         or use the list form (`command: [prog, arg, \"{{{{{reference}}}}}\"]`, no shell); \
                         '{{{{{reference} | raw}}}}' only if you vouch for the value as shell code"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The shell source of a command: its literal text, with only `| raw`
    /// values (the author's shell code) inserted. Any other reference is
    /// refused, as [`Template::check_shell_source`] does at load.
    pub fn render_shell_source(&self, scope: &Scope) -> Result<String, TemplateError> {
        self.check_shell_source()?;
        self.render(scope)
    }

    fn source_hint(&self) -> String {
        let mut s = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Lit { text, .. } => s.push_str(text),
                Segment::Ref { reference, raw, .. } => s.push_str(&format!(
                    "{{{{{reference}{}}}}}",
                    if *raw { " | raw" } else { "" }
                )),
            }
        }
        s.chars().take(120).collect()
    }

    /// Renders to a JSON value: a template that is exactly one reference
    /// yields the referenced value itself (keeping numbers, arrays, objects; a shaped one its
    /// checked value, a `| file` one the file's path); anything else yields a string.
    pub fn render_value(&self, scope: &Scope) -> Result<Value, TemplateError> {
        match self.segments.as_slice() {
            [
                Segment::Ref {
                    reference,
                    shape: None,
                    file: false,
                    ..
                },
            ] => Ok(scope.lookup(reference)),
            [
                Segment::Ref {
                    reference,
                    shape,
                    file,
                    ..
                },
            ] => {
                let text = self.render_ref(reference, shape.as_ref(), *file, scope)?;
                Ok(match shape {
                    Some(Shape::Integer | Shape::Number | Shape::Boolean) if !file => {
                        serde_json::from_str(&text).unwrap_or(Value::String(text))
                    }
                    _ => Value::String(text),
                })
            }
            _ => Ok(Value::String(self.render(scope)?)),
        }
    }
}

/// A test seam counting [`Template::parse`] calls on this thread, so a
/// test can show a run renders compiled templates and parses none.
/// Nothing outside `cfg(test)`.
pub(crate) mod parse_count {
    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn bump() {}

    #[cfg(test)]
    thread_local! {
        static PARSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    #[cfg(test)]
    pub(super) fn bump() {
        PARSES.with(|c| c.set(c.get() + 1));
    }

    /// Parses on this thread so far.
    #[cfg(test)]
    pub(crate) fn get() -> u64 {
        PARSES.with(std::cell::Cell::get)
    }
}

/// What comes next in the text being parsed.
enum Next {
    Expr(usize),
    Block(usize, usize),
    End,
}

/// Finds `{% NAME %}` (any whitespace inside the braces): (start, end).
fn find_tag(text: &str, name: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = text[from..].find("{%") {
        let start = from + i;
        let after = &text[start + 2..];
        if let Some(close) = after.find("%}")
            && after[..close].trim() == name
        {
            return Some((start, start + 2 + close + 2));
        }
        from = start + 2;
    }
    None
}

/// One `{{ … }}`: a string literal (`"{{"`, `'}}'`) or a reference with an
/// optional `| raw` filter.
fn parse_expr(inner: &str) -> Result<Segment, String> {
    if let Some(q) = inner.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let body = &inner[1..];
        let end = body
            .find(q)
            .ok_or_else(|| format!("unterminated string literal in '{{{{{inner}}}}}'"))?;
        if !body[end + 1..].trim().is_empty() {
            return Err(format!(
                "a string literal stands alone in '{{{{{inner}}}}}'"
            ));
        }
        return Ok(Segment::Lit {
            text: body[..end].to_owned(),
            escaped: true,
        });
    }
    let mut parts = split_filters(inner).into_iter();
    let expr = parts.next().unwrap_or_default();
    let mut filters = Filters::default();
    for filter in parts {
        filters
            .add(filter)
            .map_err(|why| format!("{why} in '{{{{{inner}}}}}'"))?;
    }
    Ok(Segment::Ref {
        reference: parse_reference(expr)?,
        raw: filters.raw,
        option: filters.option,
        shape: filters.shape,
        file: filters.file,
    })
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
            "unknown reference '{inner}' (expected inputs.NAME, steps.NAME.output|exit_code|error, loop.item[.FIELD], loop.index or workflow.dir)"
        )),
    }
}

/// A suggested environment variable name for a reference
/// (`inputs.who` -> `WHO`, `steps.build.output` -> `BUILD_OUTPUT`,
/// `loop.item.id` -> `ITEM_ID`), for the fix shown in errors.
pub fn env_name_for(reference: &Reference) -> String {
    let raw = match reference {
        Reference::Input(n) => n.clone(),
        Reference::Step { step, field } => format!(
            "{step}_{}",
            match field {
                StepField::Output => "output",
                StepField::ExitCode => "exit_code",
                StepField::Error => "error",
            }
        ),
        Reference::LoopItem(path) if path.is_empty() => "item".to_owned(),
        Reference::LoopItem(path) => format!("item_{}", path.join("_")),
        Reference::LoopIndex => "index".to_owned(),
        Reference::WorkflowDir => "workflow_dir".to_owned(),
    };
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

/// Text form of a value inside a rendered string.
pub fn value_to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;
