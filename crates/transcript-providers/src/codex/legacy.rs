//! Codex's legacy (≤ 0.41) `{"id","msg":{…}}` stream: task lifecycle, agent text and
//! reasoning, and the `*_begin` / `*_end` tool events.

use crate::json::Value;
use transcript_domain::RawJson;
use transcript_domain::Usage;

use super::{LEGACY_TERMINAL, token_count};
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{
    diag, error_text, json_arguments, ne, raw_of, raw_opt, rtype, s, synth, text_of,
};

/// Legacy (≤ 0.41) `{"id","msg":{…}}` events.
pub(super) fn legacy(
    msg: &Value,
    pos: Position,
    last_total: &mut Option<Usage>,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    let t = rtype(msg);
    let record = format!("msg/{t}");
    match t {
        "task_started" | "task_complete" => {
            if t == "task_started" {
                turns.expect(LEGACY_TERMINAL);
            } else {
                turns.terminal();
            }
            turns.end_turn(out);
            diag(out, K::Metadata, pos, record, "");
        }
        "agent_message" => {
            let text = text_of(msg, "message", pos, &record, out);
            turns.text(text, out)
        }
        "agent_reasoning" | "agent_reasoning_raw_content" => {
            let text = text_of(msg, "text", pos, &record, out);
            turns.thinking(text, out)
        }
        "exec_command_begin" | "patch_apply_begin" | "mcp_tool_call_begin" | "web_search_begin" => {
            tool_begin(t, msg, &call_id(msg, pos), pos, &record, turns, out)
        }
        "exec_command_end" | "patch_apply_end" | "mcp_tool_call_end" | "web_search_end" => {
            tool_end(t, msg, &call_id(msg, pos), pos, &record, turns, out)
        }
        "token_count" => token_count(msg, pos, &record, last_total, turns, out),
        "error" | "stream_error" | "turn_aborted" => {
            let detail = s(msg, "message")
                .or_else(|| s(msg, "reason"))
                .unwrap_or_default();
            diag(out, K::ProviderError, pos, record, detail);
        }
        "agent_message_delta"
        | "agent_reasoning_delta"
        | "agent_reasoning_raw_content_delta"
        | "agent_reasoning_section_break"
        | "exec_command_output_delta" => diag(out, K::Progress, pos, record, ""),
        "session_configured"
        | "background_event"
        | "turn_diff"
        | "plan_update"
        | "exec_approval_request"
        | "apply_patch_approval_request"
        | "get_history_entry_response"
        | "shutdown_complete" => diag(out, K::Metadata, pos, record, ""),
        _ => diag(out, K::Unknown, pos, record, ""),
    }
}

/// A legacy call id: `call_id`, or one made up from the line.
fn call_id(m: &Value, pos: Position) -> String {
    ne(m, "call_id")
        .map(str::to_owned)
        .unwrap_or_else(|| synth(format_args!("call@line{}", pos.line)))
}

/// A legacy `*_begin` event: opens the tool call `id`.
fn tool_begin(
    t: &str,
    msg: &Value,
    id: &str,
    pos: Position,
    record: &str,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    match t {
        "exec_command_begin" => {
            let input = Value::object([
                ("command", Value::from(msg.get("command"))),
                ("cwd", Value::from(msg.get("cwd"))),
            ]);
            turns.tool_use("command_execution", id, raw_of(input), out);
        }
        "patch_apply_begin" => {
            let input = Value::object([("changes", Value::from(msg.get("changes")))]);
            turns.tool_use("apply_patch", id, raw_of(input), out);
        }
        "mcp_tool_call_begin" => {
            let inv = msg.get("invocation").unwrap_or(msg);
            let name = match (ne(inv, "server"), ne(inv, "tool")) {
                (Some(a), Some(b)) => format!("{a}/{b}"),
                (_, Some(b)) => b.to_owned(),
                _ => "mcp_tool_call".to_owned(),
            };
            turns.tool_use(&name, id, json_arguments(inv.get("arguments")), out);
        }
        "web_search_begin" => {
            let input = Value::object([("query", Value::from(msg.get("query")))]);
            turns.tool_use("web_search", id, raw_of(input), out);
        }
        _ => diag(out, K::Unknown, pos, record, ""),
    }
}

/// A legacy `*_end` event: the result of the tool call `id`.
fn tool_end(
    t: &str,
    msg: &Value,
    id: &str,
    pos: Position,
    record: &str,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    match t {
        "exec_command_end" => {
            let code = msg.get("exit_code").and_then(Value::as_i64);
            let error = code.filter(|c| *c != 0).map(|c| {
                let stderr = s(msg, "stderr").unwrap_or_default();
                format!("exit code {c}: {stderr}")
                    .trim_end()
                    .trim_end_matches(':')
                    .to_owned()
            });
            let output = if msg.get("aggregated_output").is_some() {
                msg.raw("aggregated_output")
            } else {
                msg.raw("stdout")
            };
            turns.tool_result(id, output, error, pos, record, out);
        }
        "patch_apply_end" => {
            let ok = msg.get("success").and_then(Value::as_bool) != Some(false);
            let error = (!ok).then(|| s(msg, "stderr").unwrap_or("failed").to_owned());
            turns.tool_result(id, msg.raw("stdout"), error, pos, record, out);
        }
        "mcp_tool_call_end" => {
            let result = msg.get("result");
            let (content, error) = match result.and_then(|r| r.get("Err")) {
                Some(e) => (raw_opt(Some(e)), Some(error_text(e))),
                None => (raw_opt(result.and_then(|r| r.get("Ok")).or(result)), None),
            };
            turns.tool_result(id, content, error, pos, record, out);
        }
        "web_search_end" => {
            if !turns.is_pending(id) {
                let input = Value::object([("query", Value::from(msg.get("query")))]);
                turns.tool_use("web_search", id, raw_of(input), out);
            }
            turns.tool_result(id, RawJson::null(), None, pos, record, out);
        }
        _ => diag(out, K::Unknown, pos, record, ""),
    }
}
