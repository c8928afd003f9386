//! Markdown rendering of an [`ExportDocument`]: step headings follow the
//! tree (child runs nested under their `call_workflow` step), prompts and
//! answers as text, thinking in collapsible `<details>`, tool calls with
//! inputs and outputs in fenced code, errors marked.
//!
//! Every recorded value is escaped for its context ([`crate::md_escape`]):
//! identifiers as code spans, prose as escaped text, tool values in fences
//! longer than any backtick run inside. Only this module's own literals are
//! Markdown or HTML.

use std::fmt::Write as _;

use serde_json::Value;
use transcript_domain::Role;

use crate::md_escape::{code_span, longest_backtick_run, paragraphs, text};
use crate::model::{
    CostSummary, Entry, ExportBlock, ExportDocument, RunExport, StepExport, ToolCallExport,
};
use crate::render_util::{command_stderr, cost_note, duration, model_tokens, usage_line, usd};

/// Renders the document as Markdown.
pub fn to_markdown(doc: &ExportDocument) -> String {
    let mut out = String::new();
    render_run(&doc.run, 1, doc.cost.is_some(), &mut out);
    if let Some(cost) = &doc.cost {
        render_cost(cost, &mut out);
    }
    let _ = writeln!(
        out,
        "\n---\n_Exported by {} (schema {}){}{}._",
        text(&doc.generator),
        text(&doc.schema_version),
        if doc.options.reasoning_included {
            ""
        } else {
            "; reasoning omitted"
        },
        doc.options
            .truncate_outputs_bytes
            .map(|b| format!("; tool values truncated above {b} bytes"))
            .unwrap_or_default()
    );
    out
}

fn heading(level: usize, text: &str, out: &mut String) {
    if level <= 6 {
        let _ = writeln!(out, "\n{} {text}\n", "#".repeat(level));
    } else {
        let _ = writeln!(out, "\n**{text}**\n");
    }
}

fn status_mark(status: &str) -> &'static str {
    match status {
        "succeeded" => "✅",
        "failed" => "❌",
        _ => "⏸",
    }
}

/// The cost section of a priced document: one line per model, the total, the models
/// without a price.
fn render_cost(cost: &CostSummary, out: &mut String) {
    heading(2, "Cost by model", out);
    for m in &cost.by_model {
        let _ = writeln!(
            out,
            "- {}: {} turns · {} · cost {}",
            code_span(&m.model),
            m.turns,
            model_tokens(&m.usage),
            cost_note(true, m.cost_usd, Some(&m.usage)).unwrap_or_default()
        );
    }
    let _ = writeln!(
        out,
        "- Total (with child runs): {} · the CLIs reported {}",
        usd(cost.total_usd),
        usd(cost.reported_usd)
    );
    for m in &cost.unpriced_models {
        if m == transcript_domain::bill::NO_MODEL {
            // Not a gap of the table: the provider and the step named no model.
            let _ = writeln!(
                out,
                "- ⚠ Some turns name no model (set the step's `model:`): their cost shows —, never $0"
            );
            continue;
        }
        let _ = writeln!(
            out,
            "- ⚠ No price for {}: its cost shows —, never $0",
            code_span(m)
        );
    }
    let _ = writeln!(out, "\n_Priced with {}._", text(&cost.price_table));
}

fn render_run(run: &RunExport, level: usize, priced: bool, out: &mut String) {
    heading(
        level,
        &format!(
            "{} Run {} — {}",
            status_mark(&run.status),
            code_span(run.workflow.as_deref().unwrap_or("?")),
            text(&run.status)
        ),
        out,
    );
    let _ = writeln!(out, "- Run id: {}", code_span(&run.run_id));
    if let Some(parent) = &run.parent_run_id {
        let _ = writeln!(out, "- Parent run: {}", code_span(parent));
    }
    if let Some(started) = &run.started_at {
        let _ = writeln!(out, "- Started: {}", text(started));
    }
    let _ = writeln!(out, "- Duration: {}", duration(run.duration_ms));
    if let Some(u) = &run.usage {
        let _ = writeln!(out, "- Tokens: {}", usage_line(u));
    }
    if let Some(cost) = cost_note(priced, run.cost_usd, run.usage.as_ref()) {
        let _ = writeln!(out, "- Cost: {cost}");
    }
    if let Some(err) = &run.error {
        let _ = writeln!(out, "- **Error:** {}", text(err));
    }
    for p in &run.problems {
        let _ = writeln!(out, "- ⚠ {}", text(p));
    }
    render_entries(&run.entries, out);
    for step in &run.steps {
        render_step(step, level + 1, priced, out);
    }
}

fn render_step(step: &StepExport, level: usize, priced: bool, out: &mut String) {
    let iteration = if step.iteration > 0 || step.path.contains('.') {
        format!(" #{}", step.iteration)
    } else {
        String::new()
    };
    heading(
        level,
        &format!(
            "{} {}{iteration} · {} · {}",
            status_mark(&step.status),
            code_span(&step.path),
            text(&step.kind),
            duration(step.duration_ms)
        ),
        out,
    );
    if step.name != step.path.rsplit('.').next().unwrap_or_default() {
        let _ = writeln!(out, "- Name: {}", text(&step.name));
    }
    if let Some(u) = &step.usage {
        let _ = writeln!(out, "- Tokens: {}", usage_line(u));
    }
    if let Some(cost) = cost_note(priced, step.cost_usd, step.usage.as_ref()) {
        let _ = writeln!(out, "- Cost: {cost}");
    }
    if let Some(err) = &step.error {
        let _ = writeln!(out, "- **Error:** {}", text(err));
    }
    if let Some(result) = &step.result {
        let _ = writeln!(out, "- Result:\n");
        fenced(result, out);
    }
    if let Some(stderr) = command_stderr(&step.kind, step.result.as_ref()) {
        let _ = writeln!(out, "- Stderr:\n");
        fenced(stderr, out);
    }
    render_entries(&step.entries, out);
    for child in &step.steps {
        render_step(child, level + 1, priced, out);
    }
    if let Some(child) = &step.child_run {
        render_run(child, level + 1, priced, out);
    } else if let Some(id) = &step.child_run_id {
        let _ = writeln!(out, "\n⚠ Child run {} was not found.", code_span(id));
    }
}

fn render_entries(entries: &[Entry], out: &mut String) {
    for entry in entries {
        match entry {
            Entry::Message(m) => {
                let mut who = if m.role_kind() == Some(Role::User) {
                    "🧑 Prompt".to_owned()
                } else {
                    "🤖 Assistant".to_owned()
                };
                if let Some(p) = &m.provider {
                    who.push_str(&format!(" · {}", text(p)));
                }
                if let Some(model) = &m.model {
                    who.push_str(&format!(" · {}", text(model)));
                }
                if let Some(u) = &m.usage {
                    who.push_str(&format!(" · {}", usage_line(u)));
                }
                let _ = writeln!(out, "\n**{who}**\n");
                for (i, block) in m.blocks.iter().enumerate() {
                    render_block(block, m.role_kind() == Some(Role::User) && i > 0, out);
                }
            }
            Entry::ToolCall(call) => render_call(call, out),
        }
    }
}

fn render_block(block: &ExportBlock, system: bool, out: &mut String) {
    match block {
        ExportBlock::Text { text: body, .. } => {
            if system {
                let _ = writeln!(
                    out,
                    "<details><summary>System prompt</summary>\n\n{}\n\n</details>\n",
                    paragraphs(body)
                );
            } else {
                let _ = writeln!(out, "{}\n", paragraphs(body));
            }
        }
        ExportBlock::Thinking { thinking, .. } => {
            let _ = writeln!(
                out,
                "<details><summary>Thinking</summary>\n\n{}\n\n</details>\n",
                paragraphs(thinking)
            );
        }
        ExportBlock::ToolUse {
            tool_name,
            tool_id,
            tool_input,
            fidelity,
        } => {
            let _ = writeln!(
                out,
                "🔧 Tool use {} ({}, {}):\n",
                code_span(tool_name),
                code_span(tool_id),
                text(fidelity)
            );
            fenced(tool_input, out);
        }
        ExportBlock::ToolResult {
            tool_id,
            tool_content,
            ..
        } => {
            let _ = writeln!(out, "↳ Tool result for {}:\n", code_span(tool_id));
            fenced(tool_content, out);
        }
        ExportBlock::Command { command, .. } => {
            fenced(&Value::String(command.clone()), out);
        }
        ExportBlock::Stream { text: chunk, .. } => {
            let _ = writeln!(out, "_stream:_ {}\n", text(chunk));
        }
        ExportBlock::Other { original_type, .. } => {
            let _ = writeln!(
                out,
                "_(block of unknown type {} not rendered)_\n",
                code_span(original_type)
            );
        }
        ExportBlock::Unknown => {
            let _ = writeln!(out, "_(block of a newer type not rendered)_\n");
        }
    }
}

fn render_call(call: &ToolCallExport, out: &mut String) {
    let status = match (&call.error, call.completed) {
        (Some(_), _) => "❌",
        (None, true) => "✅",
        (None, false) => "⏸ no result",
    };
    let _ = writeln!(
        out,
        "\n🔧 **Tool call** {} ({}, {}) {status}\n",
        code_span(&call.name),
        code_span(&call.call_id),
        text(&call.fidelity)
    );
    let _ = writeln!(out, "Input:\n");
    fenced(&call.input, out);
    if call.completed {
        if let Some(err) = &call.error {
            let _ = writeln!(out, "**Error:** {}\n", text(err));
        }
        let _ = writeln!(out, "Output:\n");
        fenced(&call.output, out);
    }
}

/// A fenced block longer than any backtick run inside, so content cannot
/// close it early.
fn fenced(value: &Value, out: &mut String) {
    let (lang, body) = match value {
        Value::String(s) => ("text", s.clone()),
        other => (
            "json",
            serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
        ),
    };
    // Content lines are literal inside a fence, and a closing fence needs at
    // least as many backticks as the opening one.
    let fence = "`".repeat(longest_backtick_run(&body).max(2) + 1);
    let _ = writeln!(out, "{fence}{lang}\n{body}\n{fence}\n");
}
