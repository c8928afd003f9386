//! Claude Code: `--output-format stream-json` lines, the `--output-format
//! json` array, and `~/.claude/projects` session JSONL files. All three
//! carry the same records (`system`, `assistant`, `user`, `result`, plus
//! session bookkeeping), so one mapper handles them.

use crate::json::Value;
use transcript_domain::Usage;

use crate::facts::Fact;
use crate::frame::Record;
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{Mapper, anthropic_usage, diag, error_text, ne, rtype, s, synth, text_of};

/// The terminal record of a stream-json capture.
const TERMINAL: &str = "`result`";

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
        // stream-json lines carry no `timestamp` and end with `result`;
        // session logs carry one on every record and have no terminal record.
        if matches!(t, "assistant" | "user" | "system") && v.get("timestamp").is_none() {
            turns.expect(TERMINAL);
        }
        match t {
            "assistant" => match v.get("message") {
                Some(m) => assistant(v, m, pos, turns, out),
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
            "system" => system(v, pos, turns, out),
            "result" => result(v, pos, turns, out),
            "stream_event" => diag(out, K::Progress, pos, t, ""),
            _ if METADATA_TYPES.contains(&t) => diag(out, K::Metadata, pos, t, ""),
            _ => diag(out, K::Unknown, pos, t, ""),
        }
    }
}

/// An `assistant` record: one API response's message, its content and its request's usage.
fn assistant(v: &Value, m: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let fallback_id = record_id(v, pos);
    let id = ne(m, "id").unwrap_or(&fallback_id);
    turns.message(Some(id), ne(m, "model").map(model_id), out);
    if let Some(content) = m.get("content") {
        assistant_content(content, &fallback_id, pos, turns, out);
    }
    if let Some(usage) = m.get("usage") {
        // One API request: the message id and the request id
        // (session logs; stream-json lines carry no requestId).
        let request = ne(v, "requestId").unwrap_or("");
        turns.set_request_usage_parts(id, request, anthropic_usage(usage));
    }
}

/// A `system` record: the session's default model, or an error or refusal by its subtype.
fn system(v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let sub = s(v, "subtype").unwrap_or("-");
    let record = format!("system/{sub}");
    match sub {
        "init" => {
            if let Some(m) = ne(v, "model") {
                turns.default_model = Some(model_id(m).to_owned());
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

/// The terminal `result` record: the run's duration, result text, settled usage and cost, and
/// whether it failed.
fn result(v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    turns.terminal();
    if let Some(ms) = v.get("duration_ms").and_then(Value::as_u64) {
        turns.fact(Fact::Duration(ms), out);
    }
    if let Some(text) = ne(v, "result") {
        turns.fact(Fact::ResultText(text.to_owned()), out);
    }
    if let Some(total) = result_usage(v) {
        let over = turns.settle_usage(&total);
        if !over.is_empty() {
            diag(
                out,
                K::Metadata,
                pos,
                "result/usage",
                format!(
                    "the messages' usage already exceeds the result's {}; kept",
                    over.join(", ")
                ),
            );
        }
    }
    if let Some(cost) = v.get("total_cost_usd").and_then(Value::as_f64) {
        // The session's total cost lands on the last turn, so
        // summing cost over turns gives the run's cost.
        turns.add_cost(cost);
    }
    let sub = s(v, "subtype").unwrap_or("-");
    let failed =
        v.get("is_error").and_then(Value::as_bool) == Some(true) || sub.starts_with("error");
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
    // The run is over; its last turn carries the settled totals.
    turns.end_run(out);
}

/// The model id of a Claude Code model name: `claude-opus-4-8[1m]` (a
/// `modelUsage` key or `--model` value) is `claude-opus-4-8` with a
/// context-window tag, not another model.
fn model_id(name: &str) -> &str {
    match name.strip_suffix(']').and_then(|n| n.rsplit_once('[')) {
        Some((id, _tag)) if !id.is_empty() => id,
        _ => name,
    }
}

/// The run's totals on a `result` line: `usage` (Anthropic field names),
/// else the sum of the `modelUsage` entries (camelCase).
fn result_usage(v: &Value) -> Option<Usage> {
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        return Some(anthropic_usage(u));
    }
    let models = v.get("modelUsage").and_then(Value::as_object)?;
    let mut total = Usage::default();
    for m in models.values() {
        total.accumulate(&Usage {
            input_tokens: crate::util::u(m, "inputTokens"),
            output_tokens: crate::util::u(m, "outputTokens"),
            cache_read_tokens: crate::util::u(m, "cacheReadInputTokens"),
            cache_write_tokens: crate::util::u(m, "cacheCreationInputTokens"),
            reasoning_tokens: None,
            cost_usd: None,
            ..Default::default()
        });
    }
    Some(total)
}

/// A stable id for a record without a provider id: its `uuid`, else its
/// position (tool ids built from it are marked with [`synth`]).
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
                    .unwrap_or_else(|| synth(format_args!("{fallback_id}#{i}")));
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
    // Meta records are injected by the CLI (caveats, command output) and compact summaries
    // stand for earlier context: neither was typed by the user.
    let meta = ["isMeta", "isCompactSummary"]
        .iter()
        .any(|k| rec.get(k).and_then(Value::as_bool) == Some(true));
    let blocks = match content {
        Value::Array(b) => b,
        Value::String(text) if !meta => {
            turns.prompt(text.clone(), None, pos, "user/prompt", out);
            return;
        }
        _ => {
            diag(out, K::Extra, pos, "user/meta", "CLI-injected user content");
            return;
        }
    };
    let prompt: Vec<&str> = blocks
        .iter()
        .filter(|b| rtype(b) == "text")
        .filter_map(|b| s(b, "text"))
        .collect();
    let has_results = blocks.iter().any(|b| rtype(b) == "tool_result");
    if !meta && !has_results && !prompt.is_empty() {
        turns.prompt(prompt.join("\n"), None, pos, "user/text", out);
    }
    for (i, b) in blocks.iter().enumerate() {
        let bt = rtype(b);
        match bt {
            "tool_result" => {
                let id = ne(b, "tool_use_id")
                    .or_else(|| ne(rec, "sourceToolUseID"))
                    .map(str::to_owned)
                    .unwrap_or_else(|| synth(format_args!("{}#{i}", record_id(rec, pos))));
                let err = error_flag(b).then(|| content_error(b.get("content")));
                turns.tool_result(&id, b.raw("content"), err, pos, "user/tool_result", out);
            }
            "text" if !meta && !has_results && !prompt.is_empty() => {}
            "text" | "image" | "document" => {
                diag(out, K::Extra, pos, format!("user/{bt}"), "user content")
            }
            _ => diag(out, K::Unknown, pos, format!("user/{bt}"), ""),
        }
    }
}
