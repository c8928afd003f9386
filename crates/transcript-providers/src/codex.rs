//! Codex: `codex exec --json` (current `thread.*` / `turn.*` / `item.*`
//! events, and the 0.42–0.43 form with `item_type` / `assistant_message`),
//! the legacy `{"id","msg":{…}}` stream with its config and prompt header
//! lines, and `~/.codex/sessions` rollout files (`session_meta`,
//! `turn_context`, `response_item`, `event_msg`, …).

use crate::json::Value;
use transcript_domain::{RawJson, Usage};

use crate::frame::Record;
use crate::openai::response_item;
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{
    Mapper, diag, error_text, json_arguments, minus, ne, raw_of, rtype, s, synth, text_of, u,
};

mod legacy;

use legacy::legacy;

/// The terminal record of `codex exec --json`.
const EXEC_TERMINAL: &str = "`turn.completed`";
/// The terminal record of the legacy `{"id","msg"}` stream.
const LEGACY_TERMINAL: &str = "`task_complete`";

#[derive(Debug, Default)]
pub(crate) struct Codex {
    /// `error` items of the open turn: a warning when the turn then
    /// completes (Codex prints e.g. missing model metadata this way and
    /// carries on), a provider error when it fails or the stream ends.
    item_errors: Vec<(Position, String, String)>,
    /// A turn started and has not completed or failed yet.
    in_turn: bool,
    /// The session's cumulative usage at the last `token_count` that
    /// carried `info.total_token_usage`.
    last_total: Option<Usage>,
}

/// `event_msg` types of rollout files that duplicate a `response_item`.
const ROLLOUT_DUPLICATES: &[&str] = &[
    "user_message",
    "agent_message",
    "agent_reasoning",
    "agent_reasoning_raw_content",
    "exec_command_begin",
    "exec_command_end",
    "mcp_tool_call_begin",
    "mcp_tool_call_end",
    "patch_apply_begin",
    "patch_apply_end",
    "web_search_begin",
    "web_search_end",
    "item_started",
    "item_completed",
    "view_image_tool_call",
    "image_generation_end",
    "dynamic_tool_call_request",
    "dynamic_tool_call_response",
];

/// Rollout `event_msg` types that are session bookkeeping (approvals,
/// review mode, thread settings, sub-agent collaboration, notices).
const ROLLOUT_METADATA: &[&str] = &[
    "session_configured",
    "background_event",
    "turn_diff",
    "plan_update",
    "exec_approval_request",
    "apply_patch_approval_request",
    "request_user_input",
    "elicitation_request",
    "get_history_entry_response",
    "mcp_list_tools_response",
    "mcp_startup_update",
    "mcp_startup_complete",
    "list_custom_prompts_response",
    "shutdown_complete",
    "conversation_path",
    "entered_review_mode",
    "exited_review_mode",
    "context_compacted",
    "deprecation_notice",
    "warning",
    "undo_started",
    "undo_completed",
    "guardian_assessment",
    "thread_goal_updated",
    "thread_settings_applied",
    "thread_name_updated",
    "thread_rolled_back",
    "sub_agent_activity",
];

/// Rollout `event_msg` streaming pieces, superseded by the complete item.
const ROLLOUT_PROGRESS: &[&str] = &[
    "agent_message_delta",
    "agent_message_content_delta",
    "agent_reasoning_delta",
    "agent_reasoning_raw_content_delta",
    "agent_reasoning_section_break",
    "reasoning_content_delta",
    "reasoning_raw_content_delta",
    "exec_command_output_delta",
    "terminal_interaction",
];

impl Mapper for Codex {
    fn finish(&mut self, _turns: &mut Turns, out: &mut Vec<Output>) {
        // No turn.completed after them: the run did not survive them.
        self.flush_item_errors(K::ProviderError, out);
    }

    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        let v = &rec.value;
        let pos = rec.position;
        if let Some(msg) = v.get("msg") {
            return legacy(msg, pos, &mut self.last_total, turns, out);
        }
        let t = rtype(v);
        match t {
            "thread.started" => {
                turns.expect(EXEC_TERMINAL);
                diag(out, K::Metadata, pos, t, "")
            }
            "turn.started" => self.turn_started(pos, turns, out),
            "turn.completed" => self.turn_completed(v, pos, turns, out),
            "turn.failed" => self.turn_failed(v, pos, turns, out),
            "error" => {
                let detail = s(v, "message").unwrap_or_default();
                diag(out, K::ProviderError, pos, t, detail);
            }
            "item.started" | "item.updated" | "item.completed" => match v.get("item") {
                Some(item) if t == "item.completed" && rtype(item) == "error" => {
                    let detail = s(item, "message").unwrap_or_default().to_owned();
                    self.item_errors.push((pos, format!("{t}/error"), detail));
                }
                Some(item) => exec_item(t, item, pos, turns, out),
                None => diag(out, K::Malformed, pos, t, "no item"),
            },
            // Rollout session files.
            "session_meta" | "compacted" | "world_state" | "inter_agent_communication_metadata" => {
                diag(out, K::Metadata, pos, t, "")
            }
            "turn_context" => {
                if let Some(m) = v.get("payload").and_then(|p| ne(p, "model")) {
                    turns.default_model = Some(m.to_owned());
                }
                diag(out, K::Metadata, pos, t, "");
            }
            "response_item" => match v.get("payload") {
                Some(p) => response_item(p, pos, turns, out),
                None => diag(out, K::Malformed, pos, t, "no payload"),
            },
            "event_msg" => match v.get("payload") {
                Some(p) => rollout_event(p, pos, &mut self.last_total, turns, out),
                None => diag(out, K::Malformed, pos, t, "no payload"),
            },
            "-" if v.get("prompt").is_some() => match ne(v, "prompt") {
                Some(text) => turns.prompt(text.to_owned(), None, pos, "prompt", out),
                None => diag(out, K::Extra, pos, "prompt", "empty prompt header (legacy)"),
            },
            "-" if v.is_object() && (v.get("model").is_some() || v.get("sandbox").is_some()) => {
                if let Some(m) = ne(v, "model") {
                    turns.default_model = Some(m.to_owned());
                }
                diag(out, K::Metadata, pos, "config", "legacy config header");
            }
            _ => diag(out, K::Unknown, pos, t, ""),
        }
    }
}

impl Codex {
    /// `turn.started`: a new turn of an exec run.
    fn turn_started(&mut self, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        turns.expect(EXEC_TERMINAL);
        // Error items seen before the turn (Codex prints its "Model metadata ... not
        // found" warning before `turn.started`) stay pending: the turn's outcome
        // decides whether the run survived them. Those of a previous turn that never
        // completed are errors.
        if self.in_turn {
            self.flush_item_errors(K::ProviderError, out);
        }
        self.in_turn = true;
        turns.end_turn(out);
        diag(out, K::Metadata, pos, "turn.started", "");
    }

    /// `turn.completed`: the turn survived its error items; its usage.
    fn turn_completed(
        &mut self,
        v: &Value,
        pos: Position,
        turns: &mut Turns,
        out: &mut Vec<Output>,
    ) {
        self.in_turn = false;
        turns.terminal();
        self.flush_item_errors(K::Warning, out);
        if let Some(usage) = v.get("usage") {
            turns.set_usage(exec_usage(usage));
        } else {
            diag(out, K::Metadata, pos, "turn.completed", "no usage");
        }
        turns.end_turn(out);
    }

    /// `turn.failed`: the turn's error items and its own error are provider errors.
    fn turn_failed(&mut self, v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        self.in_turn = false;
        turns.terminal();
        self.flush_item_errors(K::ProviderError, out);
        let detail = v.get("error").map(error_text).unwrap_or_default();
        diag(out, K::ProviderError, pos, "turn.failed", detail);
        turns.end_turn(out);
    }
    /// Reports the open turn's error items, as `kind`.
    fn flush_item_errors(&mut self, kind: K, out: &mut Vec<Output>) {
        for (pos, record, detail) in self.item_errors.drain(..) {
            let detail = match kind {
                K::Warning => format!("{detail} (the turn completed)"),
                _ => detail,
            };
            diag(out, kind, pos, record, detail);
        }
    }
}

/// `turn.completed.usage`: `input_tokens` includes `cached_input_tokens`.
/// Whether any count of `now` is below `prev` (the total was reset).
fn shrank(now: &Usage, prev: &Usage) -> bool {
    [
        (now.input_tokens, prev.input_tokens),
        (now.output_tokens, prev.output_tokens),
        (now.cache_read_tokens, prev.cache_read_tokens),
        (now.cache_write_tokens, prev.cache_write_tokens),
        (now.reasoning_tokens, prev.reasoning_tokens),
    ]
    .iter()
    .any(|(n, p)| n.unwrap_or(0) < p.unwrap_or(0))
}

/// `now − prev` per count (counts `now` lacks stay absent).
fn minus_usage(now: &Usage, prev: &Usage) -> Usage {
    let d = |n: Option<u64>, p: Option<u64>| n.map(|n| n.saturating_sub(p.unwrap_or(0)));
    Usage {
        input_tokens: d(now.input_tokens, prev.input_tokens),
        output_tokens: d(now.output_tokens, prev.output_tokens),
        cache_read_tokens: d(now.cache_read_tokens, prev.cache_read_tokens),
        cache_write_tokens: d(now.cache_write_tokens, prev.cache_write_tokens),
        reasoning_tokens: d(now.reasoning_tokens, prev.reasoning_tokens),
        cost_usd: None,
        ..Default::default()
    }
}

/// Whether every count present is 0.
fn is_zero(u: &Usage) -> bool {
    [
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
    ]
    .iter()
    .all(|c| c.unwrap_or(0) == 0)
}

fn exec_usage(v: &Value) -> Usage {
    let cached = u(v, "cached_input_tokens");
    Usage {
        input_tokens: minus(u(v, "input_tokens"), cached),
        output_tokens: u(v, "output_tokens"),
        cache_read_tokens: cached,
        cache_write_tokens: u(v, "cache_write_input_tokens"),
        reasoning_tokens: u(v, "reasoning_output_tokens"),
        cost_usd: None,
        ..Default::default()
    }
}

fn item_id(item: &Value, pos: Position) -> String {
    ne(item, "id")
        .map(str::to_owned)
        .unwrap_or_else(|| synth(format_args!("item@line{}", pos.line)))
}

fn exec_item(event: &str, item: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let kind = s(item, "type")
        .or_else(|| s(item, "item_type"))
        .unwrap_or("-");
    let record = format!("{event}/{kind}");
    let id = item_id(item, pos);
    let completed = event == "item.completed";
    let started = event == "item.started";
    match kind {
        "agent_message" | "assistant_message" | "reasoning" if !completed => {
            diag(out, K::Progress, pos, record, "")
        }
        "agent_message" | "assistant_message" => {
            let text = text_of(item, "text", pos, &record, out);
            turns.text(text, out)
        }
        "reasoning" => {
            let text = text_of(item, "text", pos, &record, out);
            turns.thinking(text, out)
        }
        "command_execution" | "mcp_tool_call" | "web_search" | "file_change" | "function_call" => {
            if !(started || completed) {
                return diag(out, K::Progress, pos, record, "");
            }
            if !turns.is_pending(&id) {
                let (name, input) = tool_call(kind, item);
                turns.tool_use(&name, &id, input, out);
            } else if started {
                return diag(out, K::Progress, pos, record, "duplicate start");
            }
            if completed && kind != "function_call" {
                let (content, error) = tool_outcome(kind, item);
                turns.tool_result(&id, content, error, pos, &record, out);
            }
        }
        "todo_list" => diag(out, K::Extra, pos, record, "plan state"),
        "error" => diag(
            out,
            K::ProviderError,
            pos,
            record,
            s(item, "message").unwrap_or_default(),
        ),
        _ => diag(out, K::Unknown, pos, record, ""),
    }
}

fn tool_call(kind: &str, item: &Value) -> (String, RawJson) {
    match kind {
        "command_execution" => (
            kind.to_owned(),
            raw_of(Value::object([(
                "command",
                Value::from(item.get("command")),
            )])),
        ),
        "mcp_tool_call" => {
            let name = match (ne(item, "server"), ne(item, "tool")) {
                (Some(server), Some(tool)) => format!("{server}/{tool}"),
                (_, Some(tool)) => tool.to_owned(),
                _ => kind.to_owned(),
            };
            (name, json_arguments(item.get("arguments")))
        }
        "web_search" => (
            kind.to_owned(),
            raw_of(Value::object([("query", Value::from(item.get("query")))])),
        ),
        "file_change" => (
            kind.to_owned(),
            raw_of(Value::object([(
                "changes",
                Value::from(item.get("changes")),
            )])),
        ),
        _ => (
            ne(item, "name").unwrap_or(kind).to_owned(),
            json_arguments(item.get("arguments")),
        ),
    }
}

fn tool_outcome(kind: &str, item: &Value) -> (RawJson, Option<String>) {
    let failed = s(item, "status") == Some("failed");
    match kind {
        "command_execution" => {
            let code = item.get("exit_code").and_then(Value::as_i64);
            let error = match code {
                Some(c) if c != 0 => Some(format!("exit code {c}")),
                _ if failed => Some("failed".to_owned()),
                _ => None,
            };
            (item.raw("aggregated_output"), error)
        }
        "mcp_tool_call" => {
            let error = item.get("error").filter(|e| !e.is_null()).map(error_text);
            let error = error.or_else(|| failed.then(|| "failed".to_owned()));
            (item.raw("result"), error)
        }
        _ => (
            raw_of(Value::object([("status", Value::from(item.get("status")))])),
            failed.then(|| "failed".to_owned()),
        ),
    }
}

/// `token_count`: one model response's usage. `info.total_token_usage` is
/// the session's cumulative total: the response's bill is what the total
/// grew by since the previous `token_count` (Codex repeats a `token_count`
/// with an unchanged total, e.g. beside rate-limit updates: summing each
/// event's `last_token_usage` would bill that response twice). The first
/// total of a file, or one that shrank (a new session in the same file),
/// bills `last_token_usage`: a resumed session's first total also holds
/// what the earlier file already billed. Without a total, `last_token_usage` (the legacy form
/// carries the counts directly) is the open turn's usage.
pub(super) fn token_count(
    p: &Value,
    pos: Position,
    record: &str,
    last_total: &mut Option<Usage>,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    if let Some(total) = p
        .get("info")
        .and_then(|i| i.get("total_token_usage"))
        .filter(|t| t.is_object())
        .map(exec_usage)
    {
        let grew = match last_total.as_ref() {
            Some(prev) if !shrank(&total, prev) => minus_usage(&total, prev),
            _ => match p.get("info").and_then(|i| i.get("last_token_usage")) {
                Some(last) if last.is_object() => exec_usage(last),
                _ => total.clone(),
            },
        };
        *last_total = Some(total);
        if grew.is_empty() || is_zero(&grew) {
            diag(out, K::Metadata, pos, record, "cumulative total unchanged");
        } else {
            turns.add_usage(&grew);
        }
        return;
    }
    let usage = match p.get("info") {
        Some(Value::Null) => None,
        Some(info) => info.get("last_token_usage"),
        None if p.get("input_tokens").is_some() => Some(p),
        None => None,
    };
    match usage {
        Some(usage) => turns.set_usage(exec_usage(usage)),
        None => diag(out, K::Metadata, pos, record, "token_count without usage"),
    }
}

fn rollout_event(
    p: &Value,
    pos: Position,
    last_total: &mut Option<Usage>,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    let t = rtype(p);
    let record = format!("event_msg/{t}");
    match t {
        "token_count" => token_count(p, pos, &record, last_total, turns, out),
        // The message the user typed (the response_item copy also holds
        // injected context); in items mode it is the prompt.
        "user_message" if turns.collecting() => match ne(p, "message") {
            Some(text) => turns.prompt(text.to_owned(), None, pos, &record, out),
            None => diag(out, K::Progress, pos, record, "duplicates a response_item"),
        },
        "error" | "stream_error" | "turn_aborted" => {
            let detail = s(p, "message")
                .or_else(|| s(p, "reason"))
                .unwrap_or_default();
            diag(out, K::ProviderError, pos, record, detail);
        }
        "task_started" | "task_complete" => {
            turns.end_turn(out);
            diag(out, K::Metadata, pos, record, "");
        }
        _ if ROLLOUT_DUPLICATES.contains(&t) => {
            diag(out, K::Progress, pos, record, "duplicates a response_item")
        }
        _ if ROLLOUT_PROGRESS.contains(&t) => diag(out, K::Progress, pos, record, ""),
        _ if ROLLOUT_METADATA.contains(&t) || t.starts_with("collab_") => {
            diag(out, K::Metadata, pos, record, "")
        }
        // A type this mapper does not know is counted as such, never
        // passed off as bookkeeping (issue #23).
        _ => diag(out, K::Unknown, pos, record, ""),
    }
}
