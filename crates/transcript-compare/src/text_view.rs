//! The text views of a diff and of a check, for a terminal: only the branches that differ, and
//! one line per expectation. Colors and escaping are the caller's [`Painter`]: this module
//! never decides what a terminal may be sent, it hands every recorded value to the painter.
//! Costs print as `transcript receipts` prints them (`$0.0009`, [`crate::usd`]), and a
//! change's note (the summary of two unrelated sessions) follows its values.

use std::fmt::Write as _;

use serde_json::Value;

use crate::expect::Outcome;
use crate::model::{Change, DiffDocument, LineOp, RunDiff, Side, StepDiff};
use crate::values::as_money;

/// How text reaches the reader. Every method receives recorded (untrusted) text and must
/// return it safe to show: the CLI's `style` escapes control characters and bidirectional
/// overrides before it colors anything.
pub trait Painter {
    /// `text` in `tone` (made safe for the terminal as [`Painter::one_line`] does).
    fn paint(&self, tone: Tone, text: &str) -> String;
    /// Uncolored text that may span lines (newlines and tabs kept).
    fn clean(&self, text: &str) -> String;
    /// Uncolored text for one line (newlines and tabs escaped too).
    fn one_line(&self, text: &str) -> String;
    /// Removed, failed (A's side).
    fn red(&self, text: &str) -> String {
        self.paint(Tone::Red, text)
    }
    /// Added, held (B's side).
    fn green(&self, text: &str) -> String {
        self.paint(Tone::Green, text)
    }
    /// Headings.
    fn bold(&self, text: &str) -> String {
        self.paint(Tone::Bold, text)
    }
    /// Secondary text.
    fn dim(&self, text: &str) -> String {
        self.paint(Tone::Dim, text)
    }
    /// Hunk headers.
    fn cyan(&self, text: &str) -> String {
        self.paint(Tone::Cyan, text)
    }
}

/// How a [`Painter`] shows a piece of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Removed, failed (A's side).
    Red,
    /// Added, held (B's side).
    Green,
    /// Headings.
    Bold,
    /// Secondary text.
    Dim,
    /// Hunk headers.
    Cyan,
}

/// A displayed value is cut after this many characters (the JSON document has it whole).
pub const SHOWN_CHARS: usize = 300;

/// The terminal view of a diff: a header naming A and B, then only what differs (run-level
/// changes, steps whose fields differ with their changes, steps on one side), then a verdict.
pub fn render_diff_text(doc: &DiffDocument, (a, b): (&str, &str), p: &dyn Painter) -> String {
    let mut out = String::new();
    let run = &doc.run;
    for (mark, arg, id, workflow, status) in [
        (
            p.red("--- A:"),
            a,
            &run.a_run_id,
            &run.a_workflow,
            &run.a_status,
        ),
        (
            p.green("+++ B:"),
            b,
            &run.b_run_id,
            &run.b_workflow,
            &run.b_status,
        ),
    ] {
        let _ = writeln!(
            out,
            "{mark} {} (run {}, {}, {})",
            p.one_line(arg),
            p.one_line(id),
            p.one_line(workflow.as_deref().unwrap_or("?")),
            p.one_line(status)
        );
    }
    if let Some(d) = &doc.divergence {
        // The divergence first (#61): the step and turn, then the rest.
        let _ = writeln!(
            out,
            "{} {}",
            p.bold("first divergence:"),
            p.one_line(&d.to_string())
        );
    }
    render_run(run, 0, p, &mut out);
    let s = &doc.summary;
    let verdict = if doc.equal {
        p.green(&format!("equal ({} steps compared)", s.compared))
    } else {
        p.red(&format!(
            "differ: {} of {} compared steps changed, {} only in A, {} only in B",
            s.changed, s.compared, s.only_in_a, s.only_in_b
        ))
    };
    let _ = writeln!(out, "{verdict}");
    out
}

fn render_run(run: &RunDiff, depth: usize, p: &dyn Painter, out: &mut String) {
    let indent = "  ".repeat(depth);
    if !run.changes.is_empty() {
        let _ = writeln!(out, "{indent}{}", p.bold("run"));
        for c in &run.changes {
            render_change(c, depth + 1, p, out);
        }
    }
    for s in run.steps.iter().filter(|s| !s.equal) {
        render_step(s, depth, p, out);
    }
}

fn title(step: &StepDiff) -> String {
    let mut t = format!(
        "{} [{}] {} #{}",
        step.path, step.kind, step.name, step.iteration
    );
    if step.occurrence > 0 {
        let _ = write!(t, " (run {})", step.occurrence + 1);
    }
    t
}

fn render_step(step: &StepDiff, depth: usize, p: &dyn Painter, out: &mut String) {
    let indent = "  ".repeat(depth);
    let heading = p.bold(&p.one_line(&title(step)));
    let one_side = |mark: String, note: String| format!("{indent}{mark} {heading} {note}");
    match step.side {
        Side::OnlyA => {
            let status = step.a_status.as_deref().unwrap_or("?");
            let _ = writeln!(
                out,
                "{}",
                one_side(p.red("-"), p.red(&format!("only in A ({status})")))
            );
            return;
        }
        Side::OnlyB => {
            let status = step.b_status.as_deref().unwrap_or("?");
            let _ = writeln!(
                out,
                "{}",
                one_side(p.green("+"), p.green(&format!("only in B ({status})")))
            );
            return;
        }
        Side::Both => {}
    }
    let _ = writeln!(out, "{indent}{heading}");
    for c in &step.changes {
        render_change(c, depth + 1, p, out);
    }
    if let Some(child) = step.child.as_ref().filter(|c| !c.equal) {
        let _ = writeln!(
            out,
            "{indent}  {}",
            p.dim(&format!(
                "child run {} vs {}",
                child.a_run_id, child.b_run_id
            ))
        );
        render_run(child, depth + 2, p, out);
    }
    for s in step.steps.iter().filter(|s| !s.equal) {
        render_step(s, depth + 1, p, out);
    }
}

/// A value for one line: a cost as receipts print it, strings quoted, other JSON compact,
/// cut after [`SHOWN_CHARS`].
fn shown(field: &str, v: &Value) -> String {
    if let Some(money) = as_money(field, v) {
        return money;
    }
    let text = match v {
        Value::Null => return "(absent)".to_owned(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    cut(&text)
}

fn cut(text: &str) -> String {
    let count = text.chars().count();
    if count <= SHOWN_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(SHOWN_CHARS).collect();
    format!(
        "{kept}… ({} more characters; --json has them all)",
        count - SHOWN_CHARS
    )
}

fn render_change(c: &Change, depth: usize, p: &dyn Painter, out: &mut String) {
    let indent = "  ".repeat(depth);
    let field = p.one_line(&c.field);
    if c.hunks.is_empty() {
        let _ = writeln!(
            out,
            "{indent}{field}: {} {} {}",
            p.red(&p.one_line(&shown(&c.field, &c.a))),
            p.dim("→"),
            p.green(&p.one_line(&shown(&c.field, &c.b)))
        );
        if let Some(note) = &c.note {
            let _ = writeln!(out, "{indent}  {}", p.dim(&p.one_line(note)));
        }
        return;
    }
    let _ = writeln!(out, "{indent}{field}:");
    for h in &c.hunks {
        let _ = writeln!(
            out,
            "{indent}  {}",
            p.cyan(&format!(
                "@@ -{},{} +{},{} @@",
                h.a_start, h.a_lines, h.b_start, h.b_lines
            ))
        );
        for l in &h.lines {
            let text = cut(&p.one_line(&l.text));
            let line = match l.op {
                LineOp::Equal => format!(" {text}"),
                LineOp::Delete => p.red(&format!("-{text}")),
                LineOp::Insert => p.green(&format!("+{text}")),
            };
            let _ = writeln!(out, "{indent}  {line}");
        }
    }
}

/// The terminal view of a check: `ok`, `FAIL` or `ERR ` (not decided: a judge that could not
/// grade), the scope, the expectation with its
/// `file:line`, what the run did; then the count.
pub fn render_outcomes_text(outcomes: &[Outcome], file: &str, p: &dyn Painter) -> String {
    let mut out = String::new();
    for o in outcomes {
        let (mark, detail) = if o.passed {
            (p.green("ok  "), p.dim(&p.one_line(&o.detail)))
        } else if o.errored {
            (p.red("ERR "), p.one_line(&o.detail))
        } else {
            (p.red("FAIL"), p.one_line(&o.detail))
        };
        let _ = writeln!(
            out,
            "{mark} {}: {} ({}:{}): {detail}",
            p.bold(&p.one_line(&o.scope)),
            p.one_line(&o.expectation),
            p.one_line(file),
            o.line,
        );
    }
    let failed = outcomes.iter().filter(|o| !o.passed).count();
    let errors = outcomes.iter().filter(|o| o.errored).count();
    let mut summary = format!(
        "{} of {} expectations hold, {} failed",
        outcomes.len() - failed,
        outcomes.len(),
        failed - errors
    );
    if errors > 0 {
        summary.push_str(&format!(", {errors} not graded (error)"));
    }
    let _ = writeln!(
        out,
        "{}",
        if failed == 0 {
            p.green(&summary)
        } else {
            p.red(&summary)
        }
    );
    out
}
