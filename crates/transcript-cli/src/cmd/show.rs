//! `transcript show`: the conversation for humans — prompts, answers,
//! thinking (dimmed), tool calls paired with their results, errors
//! highlighted. It follows the step tree (from the export document), so
//! concurrent branches read one after the other instead of interleaved as in
//! the file, and child runs appear under their `call_workflow` step.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::Value;
use transcript_domain::{Fidelity, NetworkRefused, RawJson, Role};
use transcript_export::{
    Entry, ExportBlock, ExportDocument, MessageExport, RunExport, StepExport, ToolCallExport,
};

use crate::CliError;
use crate::exit::stdout_result;
use crate::source;
use crate::style::{Style, clean};

/// Prints `run` (resolved in `store`) as a conversation.
pub fn run(
    run: &str,
    store: &crate::store::Store,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let run = source::open_run(run, store, None)?;
    let doc = run.document(&transcript_export::ExportOptions::default());
    let mut text = render(&doc, style);
    let open = run.state == transcript_domain::run_store::RunState::Open;
    if doc.run.status == "incomplete" && open {
        // `list` says `open` for such a run: say why it has no completion.
        let _ = writeln!(
            text,
            "{}",
            style.yellow("━━ open: this run mirrors an imported agent CLI session, which may still grow; the next `transcript import --store` appends what is new")
        );
    } else if doc.run.status == "incomplete" {
        let line = match run.state {
            transcript_domain::run_store::RunState::Running => {
                style.yellow("━━ running: its runner holds the run and is still recording it")
            }
            _ => style.red(
                "━━ abandoned: no run.completed, and no runner holds the run (it died or was killed)",
            ),
        };
        let _ = writeln!(text, "{line}");
    }
    let disagreements = crate::cmd::stats::mcp_disagreements(&run.events);
    if !disagreements.is_empty() {
        let _ = writeln!(
            text,
            "{}",
            style.yellow("MCP calls whose two observations (proxy, agent) disagree:")
        );
        for d in &disagreements {
            let _ = writeln!(text, "  {}", style.yellow(&clean(&d.describe())));
        }
    }
    stdout_result(out.write_all(text.as_bytes()))?;
    run.children_read()
}

/// Longest tool input/output shown inline before it is shortened.
const MAX_VALUE_CHARS: usize = 600;

/// Renders a run (with its child runs) as a conversation.
pub fn render(doc: &ExportDocument, style: &Style) -> String {
    let mut out = String::new();
    render_run(&doc.run, 0, style, &mut out);
    out
}

fn pad(depth: usize) -> String {
    "  ".repeat(depth)
}

fn render_run(run: &RunExport, depth: usize, style: &Style, out: &mut String) {
    let p = pad(depth);
    let _ = writeln!(
        out,
        "{p}{}",
        style.bold(&format!(
            "━━ run {} · {} · {}",
            run.run_id,
            run.workflow.as_deref().unwrap_or("?"),
            run.started_at.as_deref().unwrap_or("?")
        ))
    );
    if let Some(parent) = &run.parent_run_id {
        let _ = writeln!(
            out,
            "{p}{}",
            style.dim(&format!("   child of run {parent}"))
        );
    }
    render_entries(&run.entries, depth + 1, style, out);
    for step in &run.steps {
        render_step(step, depth + 1, style, out);
    }
    let end = match (&run.error, run.status.as_str()) {
        (Some(err), _) => style.red(&format!("━━ run failed: {}", clean(err))),
        (None, "succeeded") => style.bold("━━ run succeeded"),
        _ => style.yellow("━━ run incomplete (no run.completed)"),
    };
    let _ = writeln!(out, "{p}{end}");
    for problem in &run.problems {
        let _ = writeln!(
            out,
            "{p}{}",
            style.yellow(&format!("problem: {}", clean(problem)))
        );
    }
}

fn render_step(step: &StepExport, depth: usize, style: &Style, out: &mut String) {
    let p = pad(depth);
    let iteration = if step.iteration > 0 || step.path.contains('.') {
        format!(" #{}", step.iteration)
    } else {
        String::new()
    };
    let name = if step.path.rsplit('.').next() == Some(step.name.as_str()) {
        String::new()
    } else {
        format!(" {}", style.dim(&step.name))
    };
    let _ = writeln!(
        out,
        "{p}{}{name}",
        style.bold(&format!("▶ {} [{}]{iteration}", step.path, step.kind))
    );
    render_entries(&step.entries, depth + 1, style, out);
    for child in &step.steps {
        render_step(child, depth + 1, style, out);
    }
    if let Some(child) = &step.child_run {
        render_run(child, depth + 1, style, out);
    } else if let Some(id) = &step.child_run_id {
        let _ = writeln!(
            out,
            "{p}  {}",
            style.yellow(&format!("child run {id}: file not found"))
        );
    }
    render_diagnostics(step.result.as_ref(), &p, style, out);
    if let Some(err) = transcript_export::command_stderr(&step.kind, step.result.as_ref()) {
        let _ = writeln!(
            out,
            "{p}{}",
            style.yellow(&format!("stderr: {}", short_value(err)))
        );
    }
    render_refused(step.network_refused.as_ref(), &p, style, out);
    match (&step.error, step.status.as_str()) {
        (Some(err), _) => {
            let _ = writeln!(
                out,
                "{p}{}",
                style.red(&format!("✗ {} failed: {}", step.path, clean(err)))
            );
        }
        (None, "succeeded") => {
            // Non-agent results (command stdout, tool output) are short facts
            // worth seeing; an agent's result repeats its conversation.
            let result = step
                .result
                .as_ref()
                .filter(|_| step.kind != "agent")
                .map(|r| format!(" {}", style.dim(&format!("→ {}", short_value(r)))))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{p}{}{result}",
                style.green(&format!("✓ {}", step.path))
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "{p}{}",
                style.yellow(&format!("… {} incomplete", step.path))
            );
        }
    }
}

/// Renders a step's messages and tool calls. A tool call the agent reported (`agent_emitted`)
/// is also a `tool_use` block of an assistant message: it is shown once, inside the message,
/// linked to its `tool.call` / `tool.result` pair (its error, if the pair has one).
/// What an importer or agent reported about the provider output and kept in the step's result
/// (`{"diagnostics": {kind: {"count", "first"}}}`): one line per kind that needs attention
/// (warnings, refusals, errors, malformed or orphan records…), with its first example.
fn render_diagnostics(result: Option<&Value>, p: &str, style: &Style, out: &mut String) {
    // An agent step's warnings (a `--match fifo` replay's differences, #58).
    let warnings = result
        .and_then(|r| r.get("warnings"))
        .and_then(Value::as_array);
    for w in warnings.into_iter().flatten() {
        let text = w.as_str().map_or_else(|| w.to_string(), str::to_owned);
        let _ = writeln!(
            out,
            "{p}{}",
            style.yellow(&format!("! warning: {}", clean(&text)))
        );
    }
    let Some(kinds) = result
        .and_then(|r| r.get("diagnostics"))
        .and_then(Value::as_object)
    else {
        return;
    };
    // Bookkeeping the importer set aside on purpose is not worth a reader's attention.
    const ROUTINE: [&str; 4] = ["metadata", "progress", "extra", "repaired"];
    for (kind, d) in kinds.iter().filter(|(k, _)| !ROUTINE.contains(&k.as_str())) {
        let count = d.get("count").and_then(Value::as_u64).unwrap_or(0);
        let first = d.get("first").map(short_value).unwrap_or_default();
        let _ = writeln!(
            out,
            "{p}{}",
            style.yellow(&format!("! {kind} ×{count}: {first}"))
        );
    }
}

/// The destinations a step's processes were refused (decision 19), for its author to declare.
fn render_refused(r: Option<&NetworkRefused>, p: &str, style: &Style, out: &mut String) {
    let Some(r) = r else { return };
    let more = if r.count > r.first.len() as u64 {
        ", …"
    } else {
        ""
    };
    let line = format!(
        "refused network: {} destination(s): {}{more} (declare them under network:)",
        r.count,
        clean(&r.first.join(", "))
    );
    let _ = writeln!(out, "{p}  {}", style.yellow(&line));
}

fn render_entries(entries: &[Entry], depth: usize, style: &Style, out: &mut String) {
    let in_messages: HashSet<&str> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Message(m) => Some(m),
            Entry::ToolCall(_) => None,
        })
        .flat_map(|m| m.blocks.iter())
        .filter_map(|b| match b {
            ExportBlock::ToolUse { tool_id, .. } => Some(tool_id.as_str()),
            _ => None,
        })
        .collect();
    let linked: Vec<&ToolCallExport> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::ToolCall(c)
                if c.fidelity_kind() == Some(Fidelity::AgentEmitted)
                    && in_messages.contains(c.call_id.as_str()) =>
            {
                Some(c)
            }
            _ => None,
        })
        .collect();
    for entry in entries {
        match entry {
            Entry::Message(m) => render_message(m, &linked, depth, style, out),
            Entry::ToolCall(call) => {
                if !linked.iter().any(|c| std::ptr::eq(*c, call)) {
                    render_call(call, depth, style, out);
                }
            }
        }
    }
}

fn render_call(call: &ToolCallExport, depth: usize, style: &Style, out: &mut String) {
    let p = pad(depth);
    let _ = writeln!(
        out,
        "{p}{} {}",
        style.yellow(&format!("⚙ {} ({})", call.name, call.fidelity)),
        style.dim(&format!("{} {}", call.call_id, short_value(&call.input)))
    );
    match (&call.error, call.completed) {
        (Some(err), _) => {
            let _ = writeln!(
                out,
                "{p}  {}",
                style.red(&format!("↳ error: {}", clean(err)))
            );
            if !call.output.is_null() {
                let _ = writeln!(out, "{p}    {}", style.dim(&short_value(&call.output)));
            }
        }
        (None, true) => {
            let _ = writeln!(out, "{p}  ↳ {}", short_value(&call.output));
        }
        (None, false) => {
            let _ = writeln!(out, "{p}  {}", style.yellow("↳ (no result)"));
        }
    }
}

fn render_message(
    m: &MessageExport,
    linked: &[&ToolCallExport],
    depth: usize,
    style: &Style,
    out: &mut String,
) {
    let p = pad(depth);
    let user = m.role_kind() == Some(Role::User);
    let _ = writeln!(out, "{p}{}", message_header(m, style));
    // tool_result blocks are printed under their tool_use block.
    let (results, used) = tool_results(m);
    let body = format!("{p}  ");
    for (i, block) in m.blocks.iter().enumerate() {
        match block {
            ExportBlock::Text { text, .. } => {
                let label = if user && i > 0 { "system: " } else { "" };
                let _ = writeln!(out, "{}", indent_text(&format!("{label}{text}"), &body));
            }
            ExportBlock::Thinking { thinking, .. } => {
                let _ = writeln!(
                    out,
                    "{}",
                    style.dim(&indent_text(&format!("thinking: {thinking}"), &body))
                );
            }
            ExportBlock::ToolUse {
                tool_name,
                tool_id,
                tool_input,
                ..
            } => {
                let call = linked.iter().find(|c| &c.call_id == tool_id).copied();
                let result = results
                    .iter()
                    .find(|(id, _)| id == tool_id)
                    .map(|(_, content)| *content);
                tool_use_lines(
                    out,
                    &body,
                    style,
                    (tool_name, tool_id, tool_input),
                    call,
                    result,
                );
            }
            ExportBlock::ToolResult {
                tool_id,
                tool_content,
                ..
            } => {
                if !used.contains(tool_id.as_str()) {
                    let _ = writeln!(
                        out,
                        "{body}↳ {}: {}",
                        clean(tool_id),
                        short_value(tool_content)
                    );
                }
            }
            ExportBlock::Command { command, .. } => {
                let _ = writeln!(out, "{body}$ {}", clean(command));
            }
            ExportBlock::Stream { text, .. } => {
                let _ = writeln!(out, "{}", style.dim(&indent_text(text, &body)));
            }
            ExportBlock::Other { original_type, .. } => {
                let _ = writeln!(
                    out,
                    "{body}{}",
                    style.dim(&format!("· unknown block {}", clean(original_type)))
                );
            }
            ExportBlock::Unknown => {
                let _ = writeln!(out, "{body}{}", style.dim("· block of a newer type"));
            }
        }
    }
}

/// A message's header: its role, provider and model, and its token counts.
fn message_header(m: &MessageExport, style: &Style) -> String {
    let mut header = m.role.clone();
    for part in [&m.provider, &m.model].into_iter().flatten() {
        header.push_str(&format!(" · {part}"));
    }
    if let Some(u) = &m.usage {
        header.push_str(&format!(
            " · {} in / {} out tokens",
            u.input_tokens.map_or("?".into(), |n| n.to_string()),
            u.output_tokens.map_or("?".into(), |n| n.to_string())
        ));
    }
    if m.role_kind() == Some(Role::User) {
        style.cyan(&header)
    } else {
        style.bold(&header)
    }
}

/// A message's tool results by tool id, and the ids of its own tool uses (a result answering
/// one is printed under it, not on its own).
fn tool_results(m: &MessageExport) -> (Vec<(&str, &Value)>, HashSet<&str>) {
    let results = m
        .blocks
        .iter()
        .filter_map(|b| match b {
            ExportBlock::ToolResult {
                tool_id,
                tool_content,
                ..
            } => Some((tool_id.as_str(), tool_content)),
            _ => None,
        })
        .collect();
    let used = m
        .blocks
        .iter()
        .filter_map(|b| match b {
            ExportBlock::ToolUse { tool_id, .. } => Some(tool_id.as_str()),
            _ => None,
        })
        .collect();
    (results, used)
}

/// A tool use block: the call (marked when a `tool.call` event links it), then its error or
/// its result, or that it has none.
fn tool_use_lines(
    out: &mut String,
    body: &str,
    style: &Style,
    (tool_name, tool_id, tool_input): (&str, &str, &Value),
    call: Option<&ToolCallExport>,
    result: Option<&Value>,
) {
    let _ = writeln!(
        out,
        "{body}{} {}",
        style.yellow(&format!(
            "⚙ {tool_name}{}",
            if call.is_some() {
                " (agent_emitted)"
            } else {
                ""
            }
        )),
        style.dim(&format!("{tool_id} {}", short_value(tool_input)))
    );
    if let Some(err) = call.and_then(|c| c.error.as_ref()) {
        let _ = writeln!(
            out,
            "{body}  {}",
            style.red(&format!("↳ error: {}", clean(err)))
        );
        return;
    }
    match result {
        Some(content) => {
            let _ = writeln!(out, "{body}  ↳ {}", short_value(content));
        }
        None => {
            let _ = writeln!(out, "{body}  {}", style.yellow("↳ (dangling: no result)"));
        }
    }
}

fn indent_text(text: &str, pad: &str) -> String {
    clean(text)
        .lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON value on one line (strings unquoted), shortened on a character boundary.
pub fn short_value(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let one_line = clean(&text.replace('\n', "⏎"));
    if one_line.chars().count() > MAX_VALUE_CHARS {
        let cut: String = one_line.chars().take(MAX_VALUE_CHARS).collect();
        format!("{cut}… ({} bytes)", text.len())
    } else {
        one_line
    }
}

/// [`short_value`] for a verbatim value.
pub fn short(value: &RawJson) -> String {
    short_value(&value.to_value())
}
