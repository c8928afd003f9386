//! The transcript of a run or of a step as the judge reads it: plain text, one recorded item a
//! line (a multi-line value continues on the lines after it), in the order it was recorded;
//! nested steps and child runs after their step's own content. Values are copied as they were
//! recorded: the prompt's fences, not escaping, keep them data.

use std::fmt::Write as _;

use serde_json::Value;

use crate::record::{BlockRecord, RunRecord, StepRecord};

/// The whole run: its outcome, then every step.
pub(crate) fn run_text(run: &RunRecord) -> String {
    let mut out = String::new();
    run_header(&mut out, run, "run");
    for s in &run.steps {
        step(&mut out, s, "");
    }
    out
}

/// Every execution in `steps` (the executions of one step path), in order.
pub(crate) fn steps_text(steps: &[&StepRecord]) -> String {
    let mut out = String::new();
    for s in steps {
        step(&mut out, s, "");
    }
    out
}

fn run_header(out: &mut String, run: &RunRecord, what: &str) {
    let _ = write!(out, "== {what} {}", run.run_id);
    if let Some(w) = &run.workflow {
        let _ = write!(out, " workflow {w}");
    }
    let _ = write!(out, ": {}", run.status.as_str());
    if let Some(ms) = run.duration_ms {
        let _ = write!(out, " in {ms} ms");
    }
    out.push('\n');
    if let Some(e) = &run.error {
        let _ = writeln!(out, "run error: {e}");
    }
}

fn json(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn step(out: &mut String, s: &StepRecord, prefix: &str) {
    let _ = write!(
        out,
        "== step {prefix}{} ({}) iteration {}: {}",
        s.path,
        s.kind,
        s.iteration,
        s.status.as_str()
    );
    if let Some(code) = s.exit_code {
        let _ = write!(out, ", exit code {code}");
    }
    out.push('\n');
    if let Some(c) = &s.command {
        let _ = writeln!(out, "command: {}", json(c));
    }
    for t in &s.turns {
        let model = t
            .model
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        let _ = writeln!(out, "{}{model}:", t.role);
        for b in &t.blocks {
            block(out, b);
        }
    }
    for c in &s.tool_calls {
        let _ = write!(
            out,
            "tool call {} ({}) input: {}",
            c.name,
            c.fidelity,
            json(&c.input)
        );
        if let Some(o) = &c.output {
            let _ = write!(out, "\n  output: {}", json(o));
        }
        if let Some(e) = &c.error {
            let _ = write!(out, "\n  error: {e}");
        }
        out.push('\n');
    }
    if let Some(o) = &s.output {
        let _ = writeln!(out, "output: {o}");
    }
    if let Some(e) = &s.error {
        let _ = writeln!(out, "error: {e}");
    }
    for n in &s.steps {
        step(out, n, prefix);
    }
    if let Some(child) = &s.child {
        run_header(out, child, &format!("child run of {prefix}{}:", s.path));
        let inner = format!("{prefix}{}/", s.path);
        for n in &child.steps {
            step(out, n, &inner);
        }
    }
}

fn block(out: &mut String, b: &BlockRecord) {
    let _ = match b {
        BlockRecord::Text { text } => writeln!(out, "  text: {text}"),
        BlockRecord::Thinking { thinking } => writeln!(out, "  thinking: {thinking}"),
        BlockRecord::ToolUse { name, id, input } => {
            writeln!(out, "  tool_use {name} ({id}): {}", json(input))
        }
        BlockRecord::ToolResult { id, content } => {
            writeln!(out, "  tool_result ({id}): {}", json(content))
        }
        BlockRecord::Command { command } => writeln!(out, "  command: {command}"),
        BlockRecord::Stream { text } => writeln!(out, "  stream: {text}"),
        BlockRecord::Unknown { block_type, raw } => writeln!(out, "  {block_type}: {raw}"),
    };
}
