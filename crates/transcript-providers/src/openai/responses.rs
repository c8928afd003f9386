//! OpenAI Responses API: a `response` object, its SSE events, and the
//! output items (shared with Codex rollout `response_item`s).

use crate::json::Value;
use transcript_domain::Usage;

use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{
    diag, error_text, json_arguments, minus, ne, raw_of, rtype, s, synth, text_of, u,
};

/// Responses API usage: `input_tokens` includes cached tokens.
fn responses_usage(v: &Value) -> Usage {
    let details = v.get("input_tokens_details");
    let cached = details.and_then(|d| u(d, "cached_tokens"));
    Usage {
        input_tokens: minus(u(v, "input_tokens"), cached),
        output_tokens: u(v, "output_tokens"),
        cache_read_tokens: cached,
        cache_write_tokens: details.and_then(|d| u(d, "cache_write_tokens")),
        reasoning_tokens: v
            .get("output_tokens_details")
            .and_then(|d| u(d, "reasoning_tokens")),
        cost_usd: None,
        ..Default::default()
    }
}

pub(super) fn response(v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    turns.message(ne(v, "id"), ne(v, "model"), out);
    if let Some(id) = ne(v, "id") {
        turns.request_id(id);
    }
    if let Some(Value::Array(items)) = v.get("output") {
        for item in items {
            response_item(item, pos, turns, out);
        }
    }
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        diag(out, K::ProviderError, pos, "response/error", error_text(e));
    }
    if s(v, "status") == Some("incomplete") {
        let why = v
            .get("incomplete_details")
            .map(|d| d.to_string())
            .unwrap_or_default();
        diag(out, K::Incomplete, pos, "response", why);
    }
    if let Some(usage) = v.get("usage").filter(|x| x.is_object()) {
        turns.set_usage(responses_usage(usage));
    }
}

pub(super) fn response_event(
    t: &str,
    v: &Value,
    pos: Position,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    match t {
        "response.created" | "response.in_progress" => {
            turns.expect("`response.completed`");
            if let Some(r) = v.get("response") {
                turns.message(ne(r, "id"), ne(r, "model"), out);
                if let Some(id) = ne(r, "id") {
                    turns.request_id(id);
                }
            }
            diag(out, K::Metadata, pos, t, "");
        }
        "response.output_item.done" => match v.get("item") {
            Some(item) => response_item(item, pos, turns, out),
            None => diag(out, K::Malformed, pos, t, "no item"),
        },
        "response.completed" | "response.incomplete" | "response.failed" => {
            turns.terminal();
            let r = v.get("response");
            if let Some(usage) = r.and_then(|r| r.get("usage")).filter(|x| x.is_object()) {
                turns.set_usage(responses_usage(usage));
            }
            match t {
                "response.failed" => {
                    let e = r
                        .and_then(|r| r.get("error"))
                        .map(error_text)
                        .unwrap_or_default();
                    diag(out, K::ProviderError, pos, t, e);
                }
                "response.incomplete" => diag(out, K::Incomplete, pos, t, ""),
                _ => diag(out, K::Metadata, pos, t, ""),
            }
        }
        _ if is_progress_event(t) => diag(out, K::Progress, pos, t, ""),
        _ => diag(out, K::Unknown, pos, t, ""),
    }
}

/// Responses SSE events superseded by `response.output_item.done` /
/// `response.completed` (deltas, parts, server-side tool progress): the
/// families of the Responses streaming reference. Others are unknown.
fn is_progress_event(t: &str) -> bool {
    const FAMILIES: &[&str] = &[
        "output_item",
        "content_part",
        "output_text",
        "refusal",
        "function_call_arguments",
        "custom_tool_call_input",
        "reasoning",
        "reasoning_text",
        "reasoning_summary_part",
        "reasoning_summary_text",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "code_interpreter_call_code",
        "image_generation_call",
        "mcp_call",
        "mcp_call_arguments",
        "mcp_list_tools",
        "audio",
        "audio_transcript",
    ];
    matches!(t, "response.queued")
        || t.strip_prefix("response.")
            .and_then(|rest| rest.rsplit_once('.'))
            .is_some_and(|(family, _)| {
                FAMILIES.contains(&family) || family.starts_with("output_text.")
            })
}

fn call_id(item: &Value, pos: Position) -> String {
    ne(item, "call_id")
        .or_else(|| ne(item, "id"))
        .map(str::to_owned)
        .unwrap_or_else(|| synth(format_args!("item@line{}", pos.line)))
}

/// Maps one Responses API output item (also Codex rollout `response_item`s).
pub(crate) fn response_item(item: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let t = rtype(item);
    match t {
        "message" => message(item, pos, turns, out),
        "reasoning" => reasoning(item, pos, turns, out),
        "function_call" => {
            let name = ne(item, "name").unwrap_or("unknown");
            turns.tool_use(
                name,
                &call_id(item, pos),
                json_arguments(item.get("arguments")),
                out,
            );
        }
        "custom_tool_call" => {
            let name = ne(item, "name").unwrap_or("unknown");
            turns.tool_use(name, &call_id(item, pos), item.raw("input"), out);
        }
        "local_shell_call" => {
            turns.tool_use("local_shell", &call_id(item, pos), item.raw("action"), out)
        }
        "tool_search_call" => turns.tool_use(
            "tool_search",
            &call_id(item, pos),
            item.raw("arguments"),
            out,
        ),
        "function_call_output"
        | "custom_tool_call_output"
        | "local_shell_call_output"
        | "tool_search_output"
        | "computer_call_output" => {
            turns.tool_result(&call_id(item, pos), item.raw("output"), None, pos, t, out)
        }
        // Server-side tools: the call and its outcome arrive as one item.
        "web_search_call"
        | "image_generation_call"
        | "mcp_call"
        | "file_search_call"
        | "code_interpreter_call" => server_tool(t, item, pos, turns, out),
        "agent_message" => diag(out, K::Extra, pos, t, "inter-agent message"),
        "ghost_snapshot" | "compaction" | "compaction_summary" | "item_reference" => {
            diag(out, K::Metadata, pos, t, "")
        }
        _ => diag(out, K::Unknown, pos, t, ""),
    }
}

/// A `message` item: the assistant's text and refusals; other roles are the prompt's.
fn message(item: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let role = s(item, "role").unwrap_or("assistant");
    if role != "assistant" {
        return diag(
            out,
            K::Extra,
            pos,
            format!("message/{role}"),
            "prompt message",
        );
    }
    if let Some(Value::Array(parts)) = item.get("content") {
        for p in parts {
            match rtype(p) {
                pt @ ("output_text" | "text") => {
                    let text = text_of(p, "text", pos, &format!("message/{pt}"), out);
                    turns.text(text, out)
                }
                "refusal" => {
                    let r = s(p, "refusal").unwrap_or_default();
                    diag(out, K::Refusal, pos, "message/refusal", r);
                    turns.text(r, out);
                }
                pt => diag(out, K::Extra, pos, format!("message/{pt}"), ""),
            }
        }
    }
}

/// A `reasoning` item: its readable summary and content texts.
fn reasoning(item: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let mut any = false;
    for key in ["summary", "content"] {
        if let Some(Value::Array(parts)) = item.get(key) {
            for p in parts {
                if let Some(text) = s(p, "text") {
                    turns.thinking(text, out);
                    any = true;
                }
            }
        }
    }
    if !any {
        diag(
            out,
            K::Extra,
            pos,
            "reasoning",
            "reasoning without readable text (encrypted or empty)",
        );
    }
}

/// A server-side tool item: the call and its outcome arrive as one item.
fn server_tool(t: &str, item: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let id = call_id(item, pos);
    let (name, input, output) = match t {
        "web_search_call" => (
            "web_search".to_owned(),
            item.raw("action"),
            Value::object([("status", Value::from(item.get("status")))]),
        ),
        "image_generation_call" => (
            "image_generation".to_owned(),
            raw_of(Value::object([(
                "revised_prompt",
                Value::from(item.get("revised_prompt")),
            )])),
            item.get("result").cloned().unwrap_or(Value::Null),
        ),
        "mcp_call" => (
            match (ne(item, "server_label"), ne(item, "name")) {
                (Some(a), Some(b)) => format!("{a}/{b}"),
                (_, b) => b.unwrap_or("mcp_call").to_owned(),
            },
            json_arguments(item.get("arguments")),
            item.get("output").cloned().unwrap_or(Value::Null),
        ),
        "file_search_call" => (
            "file_search".to_owned(),
            raw_of(Value::object([(
                "queries",
                Value::from(item.get("queries")),
            )])),
            item.get("results").cloned().unwrap_or(Value::Null),
        ),
        _ => (
            "code_interpreter".to_owned(),
            raw_of(Value::object([("code", Value::from(item.get("code")))])),
            item.get("outputs").cloned().unwrap_or(Value::Null),
        ),
    };
    turns.tool_use(&name, &id, input, out);
    let error = item
        .get("error")
        .filter(|e| !e.is_null())
        .map(error_text)
        .or_else(|| (s(item, "status") == Some("failed")).then(|| "failed".to_owned()));
    turns.server_tool_result(&id, raw_of(output), error, pos, t, out);
}
