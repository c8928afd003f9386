//! `transcript show`: the conversation for humans — prompts, answers,
//! thinking (dimmed), tool calls paired with their results, errors
//! highlighted.

use std::collections::HashMap;
use std::fmt::Write as _;

use transcript_domain::{
    BlockBody, DecodedBlock, DecodedEvent, DecodedPayload, EventKind, EventType, RawJson,
    ToolPayload,
};

use crate::style::Style;

/// Longest tool input/output shown inline before it is shortened.
const MAX_VALUE_CHARS: usize = 600;

/// Renders a run's events as a conversation.
pub fn render(events: &[DecodedEvent], style: &Style) -> String {
    let mut out = String::new();
    // Results by call id, so each call is printed with its result.
    let results: HashMap<&str, &ToolPayload> = events
        .iter()
        .filter(|e| e.kind == EventKind::Known(EventType::ToolResult))
        .filter_map(|e| e.tool().map(|t| (t.call_id.as_str(), t)))
        .collect();
    let calls: std::collections::HashSet<&str> = events
        .iter()
        .filter(|e| e.kind == EventKind::Known(EventType::ToolCall))
        .filter_map(|e| e.tool().map(|t| t.call_id.as_str()))
        .collect();
    for event in events {
        let indent = "  ".repeat(depth(&event.path));
        match &event.kind {
            EventKind::Known(EventType::RunStarted) => {
                let name = event.step().map(|s| s.name.as_str()).unwrap_or("?");
                let _ = writeln!(
                    out,
                    "{}",
                    style.bold(&format!(
                        "━━ run {} · {name} · {}",
                        event.run_id, event.timestamp
                    ))
                );
                if let Some(parent) = event.parent_run_id {
                    let _ = writeln!(out, "{}", style.dim(&format!("   child of run {parent}")));
                }
            }
            EventKind::Known(EventType::RunCompleted) => {
                match event.step().and_then(|s| s.error.as_deref()) {
                    Some(err) => {
                        let _ = writeln!(out, "{}", style.red(&format!("━━ run failed: {err}")));
                    }
                    None => {
                        let _ = writeln!(out, "{}", style.bold("━━ run succeeded"));
                    }
                }
            }
            EventKind::Known(EventType::StepStarted | EventType::CallWorkflowStarted) => {
                let (name, kind) = event
                    .step()
                    .map(|s| (s.name.as_str(), s.kind.as_str()))
                    .unwrap_or(("?", "?"));
                let iteration = if event.iteration > 0 {
                    format!(" #{}", event.iteration)
                } else {
                    String::new()
                };
                let child = event
                    .child_run_id
                    .map(|c| format!(" → run {c}"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{indent}{} {}",
                    style.bold(&format!("▶ {} [{kind}]{iteration}", event.path)),
                    style.dim(&format!("{name}{child}"))
                );
            }
            EventKind::Known(EventType::StepCompleted | EventType::CallWorkflowCompleted) => {
                match event.step().and_then(|s| s.error.as_deref()) {
                    Some(err) => {
                        let _ = writeln!(
                            out,
                            "{indent}{}",
                            style.red(&format!("✗ {} failed: {err}", event.path))
                        );
                    }
                    None => {
                        // Non-agent results (command stdout, tool output) are short facts
                        // worth seeing; agent results repeat the conversation.
                        let result = event
                            .step()
                            .filter(|s| s.kind != "agent")
                            .and_then(|s| s.result.as_ref())
                            .map(|r| format!(" {}", style.dim(&format!("→ {}", short(r)))))
                            .unwrap_or_default();
                        let done = style.green(&format!("✓ {}", event.path));
                        let _ = writeln!(out, "{indent}{done}{result}");
                    }
                }
            }
            EventKind::Known(EventType::MessageUser | EventType::MessageAssistant) => {
                render_message(event, &indent, style, &mut out);
            }
            EventKind::Known(EventType::ToolCall) => {
                if let Some(call) = event.tool() {
                    let _ = writeln!(
                        out,
                        "{indent}  {} {}",
                        style.yellow(&format!("⚙ {} ({})", call.name, call.fidelity)),
                        style.dim(&format!("{} {}", call.call_id, short(&call.input)))
                    );
                    match results.get(call.call_id.as_str()) {
                        Some(result) => render_result(result, &indent, style, &mut out),
                        None => {
                            let _ = writeln!(out, "{indent}    {}", style.yellow("↳ (no result)"));
                        }
                    }
                }
            }
            EventKind::Known(EventType::ToolResult) => {
                // Printed with its call; a result without a call is shown alone.
                if let Some(result) = event.tool()
                    && !calls.contains(result.call_id.as_str())
                {
                    let _ = writeln!(
                        out,
                        "{indent}  {}",
                        style.yellow(&format!("⚙ {} (result without call)", result.name))
                    );
                    render_result(result, &indent, style, &mut out);
                }
            }
            EventKind::Unknown(t) => {
                let _ = writeln!(
                    out,
                    "{indent}  {}",
                    style.dim(&format!("· unknown event {t}"))
                );
            }
        }
    }
    out
}

fn depth(path: &str) -> usize {
    if path.is_empty() {
        0
    } else {
        path.matches('.').count() + 1
    }
}

fn render_result(result: &ToolPayload, indent: &str, style: &Style, out: &mut String) {
    match &result.error {
        Some(err) => {
            let _ = writeln!(out, "{indent}    {}", style.red(&format!("↳ error: {err}")));
            if !result.output.is_null() {
                let _ = writeln!(out, "{indent}      {}", style.dim(&short(&result.output)));
            }
        }
        None => {
            let _ = writeln!(out, "{indent}    ↳ {}", short(&result.output));
        }
    }
}

fn render_message(event: &DecodedEvent, indent: &str, style: &Style, out: &mut String) {
    let DecodedPayload::Message(message) = &event.payload else {
        let _ = writeln!(
            out,
            "{indent}  {}",
            style.dim("· message with an unreadable payload")
        );
        return;
    };
    let user = event.kind == EventKind::Known(EventType::MessageUser);
    let mut header = if user {
        "user".to_owned()
    } else {
        "assistant".to_owned()
    };
    if let Some(p) = &message.provider {
        header.push_str(&format!(" · {p}"));
    }
    if let Some(m) = &message.model {
        header.push_str(&format!(" · {m}"));
    }
    if let Some(u) = &message.usage {
        header.push_str(&format!(
            " · {} in / {} out tokens",
            u.input_tokens.map_or("?".into(), |n| n.to_string()),
            u.output_tokens.map_or("?".into(), |n| n.to_string())
        ));
    }
    let _ = writeln!(
        out,
        "{indent}  {}",
        if user {
            style.cyan(&header)
        } else {
            style.bold(&header)
        }
    );
    // tool_result blocks are printed under their tool_use block.
    let block_results: HashMap<&str, &RawJson> = message
        .blocks
        .iter()
        .filter_map(|b| match b {
            DecodedBlock::Known(k) => match &k.body {
                BlockBody::ToolResult {
                    tool_id,
                    tool_content,
                } => Some((tool_id.as_str(), tool_content)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let used: std::collections::HashSet<&str> = message
        .blocks
        .iter()
        .filter_map(|b| match b {
            DecodedBlock::Known(k) => match &k.body {
                BlockBody::ToolUse { tool_id, .. } => Some(tool_id.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    for (i, block) in message.blocks.iter().enumerate() {
        let pad = format!("{indent}    ");
        match block {
            DecodedBlock::Known(b) => match &b.body {
                BlockBody::Text { text } => {
                    let label = if user && i > 0 { "system: " } else { "" };
                    let _ = writeln!(out, "{}", indent_text(&format!("{label}{text}"), &pad));
                }
                BlockBody::Thinking { thinking } => {
                    let _ = writeln!(
                        out,
                        "{}",
                        style.dim(&indent_text(&format!("thinking: {thinking}"), &pad))
                    );
                }
                BlockBody::ToolUse {
                    tool_name,
                    tool_id,
                    tool_input,
                } => {
                    let _ = writeln!(
                        out,
                        "{pad}{} {}",
                        style.yellow(&format!("⚙ {tool_name}")),
                        style.dim(&format!("{tool_id} {}", short(tool_input)))
                    );
                    match block_results.get(tool_id.as_str()) {
                        Some(content) => {
                            let _ = writeln!(out, "{pad}  ↳ {}", short(content));
                        }
                        None => {
                            let _ =
                                writeln!(out, "{pad}  {}", style.yellow("↳ (dangling: no result)"));
                        }
                    }
                }
                BlockBody::ToolResult {
                    tool_id,
                    tool_content,
                } => {
                    if !used.contains(tool_id.as_str()) {
                        let _ = writeln!(out, "{pad}↳ {tool_id}: {}", short(tool_content));
                    }
                }
                BlockBody::Command { command } => {
                    let _ = writeln!(out, "{pad}$ {}", crate::style::clean(command));
                }
                BlockBody::Stream { text } => {
                    let _ = writeln!(out, "{}", style.dim(&indent_text(text, &pad)));
                }
            },
            DecodedBlock::Unknown(u) => {
                let _ = writeln!(
                    out,
                    "{pad}{}",
                    style.dim(&format!("· unknown block {}", u.block_type))
                );
            }
        }
    }
}

fn indent_text(text: &str, pad: &str) -> String {
    crate::style::clean(text)
        .lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON value on one line, shortened on a character boundary.
pub fn short(value: &RawJson) -> String {
    let text: String = match serde_json::from_str::<serde_json::Value>(value.get()) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(v) => v.to_string(),
        Err(_) => value.get().to_owned(),
    };
    let one_line = crate::style::clean(&text.replace('\n', "⏎"));
    if one_line.chars().count() > MAX_VALUE_CHARS {
        let cut: String = one_line.chars().take(MAX_VALUE_CHARS).collect();
        format!("{cut}… ({} bytes)", text.len())
    } else {
        one_line
    }
}
