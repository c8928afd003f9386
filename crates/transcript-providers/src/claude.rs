//! Claude Code: `--output-format stream-json` lines, the `--output-format
//! json` array, and `~/.claude/projects` session JSONL files. All three
//! carry the same records (`system`, `assistant`, `user`, `result`, plus
//! session bookkeeping), so one mapper handles them.

use crate::json::Value;

use crate::frame::Record;
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{Mapper, anthropic_usage, diag, error_text, ne, rtype, s, text_of};

/// Session-file record types that carry no content for blocks.
const METADATA_TYPES: &[&str] = &[
    "summary",
    "attachment",
    "file-history-snapshot",
    "progress",
    "queue-operation",
    "agent-name",
    "custom-title",
    "ai-title",
    "last-prompt",
    "mode",
    "permission-mode",
    "pr-link",
    "frame-link",
    "started",
    "relocated",
    "worktree-state",
    "bridge-session",
    "atis-latch",
    "control_request",
    "control_response",
    "rate_limit_event",
];

#[derive(Debug, Default)]
pub(crate) struct Claude;

impl Mapper for Claude {
    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        let v = &rec.value;
        let pos = rec.position;
        let t = rtype(v);
        match t {
            "assistant" => match v.get("message") {
                Some(m) => {
                    let fallback_id = record_id(v, pos);
                    let id = ne(m, "id").unwrap_or(&fallback_id);
                    turns.message(Some(id), ne(m, "model"), out);
                    if let Some(content) = m.get("content") {
                        assistant_content(content, &fallback_id, pos, turns, out);
                    }
                    if let Some(usage) = m.get("usage") {
                        turns.set_usage(anthropic_usage(usage));
                    }
                }
                None => diag(
                    out,
                    K::Malformed,
                    pos,
                    t,
                    "assistant record without message",
                ),
            },
            "user" => match v.get("message").and_then(|m| m.get("content")) {
                Some(content) => user_content(v, content, pos, turns, out),
                None => diag(
                    out,
                    K::Malformed,
                    pos,
                    t,
                    "user record without message.content",
                ),
            },
            "system" => {
                let sub = s(v, "subtype").unwrap_or("-");
                let record = format!("system/{sub}");
                match sub {
                    "init" => {
                        if let Some(m) = ne(v, "model") {
                            turns.default_model = Some(m.to_owned());
                        }
                        diag(out, K::Metadata, pos, record, "");
                    }
                    "api_error" | "error" => {
                        let detail = v.get("error").map(error_text).unwrap_or_default();
                        diag(out, K::ProviderError, pos, record, detail);
                    }
                    "api_refusal" | "model_refusal_fallback" => {
                        let detail = ne(v, "apiRefusalExplanation").unwrap_or_default();
                        diag(out, K::Refusal, pos, record, detail);
                    }
                    _ => diag(out, K::Metadata, pos, record, ""),
                }
            }
            "result" => {
                if let Some(cost) = v.get("total_cost_usd").and_then(Value::as_f64) {
                    // The session's total cost lands on the last turn, so
                    // summing cost over turns gives the run's cost.
                    turns.add_cost(cost);
                }
                let sub = s(v, "subtype").unwrap_or("-");
                let failed = v.get("is_error").and_then(Value::as_bool) == Some(true)
                    || sub.starts_with("error");
                if failed {
                    let detail = match (v.get("result"), v.get("errors")) {
                        (Some(r), _) if !r.is_null() => format!("{sub}: {}", error_text(r)),
                        (_, Some(e)) => format!("{sub}: {e}"),
                        _ => sub.to_owned(),
                    };
                    diag(out, K::ProviderError, pos, format!("result/{sub}"), detail);
                } else {
                    diag(out, K::Metadata, pos, format!("result/{sub}"), "");
                }
            }
            "stream_event" => diag(out, K::Progress, pos, t, ""),
            _ if METADATA_TYPES.contains(&t) => diag(out, K::Metadata, pos, t, ""),
            _ => diag(out, K::Unknown, pos, t, ""),
        }
    }
}

/// A stable id for a record without a provider id: its `uuid`, else its position.
fn record_id(v: &Value, pos: Position) -> String {
    match ne(v, "uuid") {
        Some(u) => u.to_owned(),
        None => match pos.element {
            Some(e) => format!("line{}.{e}", pos.line),
            None => format!("line{}", pos.line),
        },
    }
}

/// Maps the content blocks of an Anthropic assistant message (shared with
/// the `anthropic` provider). `fallback_id` names tool_use blocks without id.
pub(crate) fn assistant_content(
    content: &Value,
    fallback_id: &str,
    pos: Position,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    let blocks = match content {
        Value::Array(b) => b,
        Value::String(text) => {
            turns.text(text.as_str(), out);
            return;
        }
        _ => {
            diag(
                out,
                K::Malformed,
                pos,
                "assistant/content",
                "content is neither array nor string",
            );
            return;
        }
    };
    for (i, b) in blocks.iter().enumerate() {
        let bt = rtype(b);
        match bt {
            "text" => {
                let text = text_of(b, "text", pos, "assistant/text", out);
                turns.text(text, out)
            }
            "thinking" => {
                let text = text_of(b, "thinking", pos, "assistant/thinking", out);
                turns.thinking(text, out);
                if ne(b, "signature").is_some() {
                    diag(
                        out,
                        K::Extra,
                        pos,
                        "thinking/signature",
                        "thinking signature not carried by blocks",
                    );
                }
            }
            "redacted_thinking" => diag(out, K::Extra, pos, bt, "encrypted thinking"),
            "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                let id = ne(b, "id")
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{fallback_id}#{i}"));
                let name = match (bt, ne(b, "server_name"), s(b, "name")) {
                    ("mcp_tool_use", Some(server), Some(n)) => format!("{server}/{n}"),
                    (_, _, n) => n.unwrap_or("unknown").to_owned(),
                };
                turns.tool_use(&name, &id, b.raw("input"), out);
            }
            "fallback" => diag(out, K::Metadata, pos, bt, ""),
            _ if bt.ends_with("tool_result") => {
                // Server-side tool results arrive inside the assistant message.
                let id = ne(b, "tool_use_id").unwrap_or_default();
                let err = error_flag(b).then(|| content_error(b.get("content")));
                turns.server_tool_result(id, b.raw("content"), err, pos, bt, out);
            }
            "image" | "document" => diag(out, K::Extra, pos, format!("assistant/{bt}"), ""),
            _ => diag(out, K::Unknown, pos, format!("assistant/{bt}"), ""),
        }
    }
}

fn error_flag(b: &Value) -> bool {
    b.get("is_error").and_then(Value::as_bool) == Some(true)
        || b.get("content")
            .and_then(|c| s(c, "type"))
            .is_some_and(|t| t.ends_with("_error"))
}

/// Text of an error tool result.
pub(crate) fn content_error(c: Option<&Value>) -> String {
    match c {
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        Some(Value::Array(parts)) => {
            let text: Vec<&str> = parts.iter().filter_map(|p| s(p, "text")).collect();
            if text.is_empty() {
                "tool error".to_owned()
            } else {
                text.join("\n")
            }
        }
        Some(v @ Value::Object(_)) => error_text(v),
        _ => "tool error".to_owned(),
    }
}

fn user_content(
    rec: &Value,
    content: &Value,
    pos: Position,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    let blocks = match content {
        Value::Array(b) => b,
        _ => {
            diag(
                out,
                K::Extra,
                pos,
                "user/prompt",
                "user prompt (recorded as message.user by the agent seam)",
            );
            return;
        }
    };
    for (i, b) in blocks.iter().enumerate() {
        let bt = rtype(b);
        match bt {
            "tool_result" => {
                let id = ne(b, "tool_use_id")
                    .or_else(|| ne(rec, "sourceToolUseID"))
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{}#{i}", record_id(rec, pos)));
                let err = error_flag(b).then(|| content_error(b.get("content")));
                turns.tool_result(&id, b.raw("content"), err, pos, "user/tool_result", out);
            }
            "text" | "image" | "document" => {
                diag(out, K::Extra, pos, format!("user/{bt}"), "user content")
            }
            _ => diag(out, K::Unknown, pos, format!("user/{bt}"), ""),
        }
    }
}
