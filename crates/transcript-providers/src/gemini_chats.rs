//! Gemini CLI's saved sessions: the chat files its `ChatRecordingService` keeps under
//! `<home>/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl` (0.61; `<home>` is
//! `$GEMINI_CLI_HOME`, else the user's home), one JSON record a line, append-only:
//!
//! - a metadata record first (`sessionId`, `projectHash`, `startTime`, `lastUpdated`, `kind`),
//!   written again when the session is resumed;
//! - message records (`id`, `timestamp`, `type`: `user` | `gemini` | `info` | `warning` |
//!   `error`, `content`); a `gemini` message carries `thoughts`, `tokens` (`input` = the
//!   prompt with its cached part, `output` = candidates without thoughts, `cached`, `thoughts`,
//!   `tool`, `total`), `model` and `toolCalls` (`id`, `name`, `args`, `result`, `status`);
//! - a message is **updated by appending it again whole, under the same `id`** (tokens, then
//!   tool calls and their results arrive after its text): the last record of an id wins;
//! - `{"$set": {...}}` updates metadata (`lastUpdated`; `messages`, the whole history again,
//!   after a resume or a history rewrite) and `{"$rewindTo": id}` drops messages from the
//!   session's view. Neither un-bills a request, so both are ignored here: only message
//!   records are read.
//!
//! Older versions kept one JSON document per session (`session-*.json`, rewritten whole:
//! the same metadata with a `messages` array); it is read the same way.
//!
//! What is emitted, so that a file that grows reproduces the items of its prefix (the
//! incremental store import relies on it): a `user` message with text is the prompt
//! ([`crate::Fact::Prompt`]; tool answers travel as `functionResponse` parts and are not prompts);
//! tool calls and their results are emitted as soon as a record shows them (each once); the
//! `gemini` message's turn (thinking, text, tool_use, tool_result blocks, its model and
//! usage) is emitted when a record of another message follows, or at the end of the input
//! (a later record of the same id can then only add blocks or grow the usage).
//! Usage of a turn: `input_tokens` = `input` − `cached` + `tool` (tool-use prompt tokens are
//! billed as input), `output_tokens` = `output`, `cache_read_tokens` = `cached`,
//! `reasoning_tokens` = `thoughts` (apart from output, as Gemini bills them).

use std::collections::HashSet;

use transcript_domain::{
    ContentBlock, Fidelity, MessagePayload, RawJson, Role, ToolPayload, Usage,
};

use crate::frame::Record;
use crate::gemini::Gemini;
use crate::json::Value;
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{Mapper, diag, error_text, raw, s, u};

const FIDELITY: Fidelity = Fidelity::AgentEmitted;

/// Gemini CLI output of either kind: its `stream-json` / `json` output ([`Gemini`]) or, once
/// a record of a saved session is seen, its chat files ([`Chats`]).
#[derive(Debug, Default)]
pub(crate) struct GeminiAny {
    stream: Gemini,
    chats: Option<Chats>,
}

/// Whether `v` is a record only a saved session has: its metadata (`sessionId` and
/// `projectHash`, no `type`) or a `$set` / `$rewindTo` update.
pub(crate) fn is_chat_record(v: &Value) -> bool {
    (v.get("sessionId").is_some() && v.get("projectHash").is_some() && v.get("type").is_none())
        || v.get("$set").is_some()
        || v.get("$rewindTo").is_some()
}

impl Mapper for GeminiAny {
    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        if self.chats.is_none() && is_chat_record(&rec.value) {
            self.chats = Some(Chats::default());
        }
        match &mut self.chats {
            Some(chats) => chats.record(rec, turns, out),
            None => self.stream.record(rec, turns, out),
        }
    }

    fn finish(&mut self, turns: &mut Turns, out: &mut Vec<Output>) {
        match &mut self.chats {
            Some(chats) => chats.finish(turns, out),
            None => self.stream.finish(turns, out),
        }
    }
}

/// A saved session being read.
#[derive(Debug, Default)]
pub(crate) struct Chats {
    /// The latest record of the `gemini` message not emitted yet.
    pending: Option<(Value, Position)>,
    /// Tool call ids whose `tool.call` was emitted.
    called: HashSet<String>,
    /// Tool call ids whose `tool.result` was emitted.
    answered: HashSet<String>,
}

impl Mapper for Chats {
    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        let v = rec.value;
        let pos = rec.position;
        if v.get("$set").is_some() || v.get("$rewindTo").is_some() {
            return;
        }
        if v.get("sessionId").is_some() && v.get("type").is_none() {
            if let Some(Value::Array(messages)) = v.get("messages") {
                // The older whole-document form.
                for m in messages {
                    self.message(m.value().clone(), pos, turns, out);
                }
            } else {
                diag(out, K::Metadata, pos, "session", "");
            }
            return;
        }
        self.message(v, pos, turns, out);
    }

    fn finish(&mut self, _turns: &mut Turns, out: &mut Vec<Output>) {
        self.flush(out);
    }
}

impl Chats {
    /// One message record.
    fn message(&mut self, v: Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        let id = s(&v, "id").unwrap_or_default().to_owned();
        if self
            .pending
            .as_ref()
            .is_some_and(|(p, _)| s(p, "id").unwrap_or_default() != id)
        {
            self.flush(out);
        }
        match s(&v, "type").unwrap_or("-") {
            "gemini" => {
                self.tools(&v, out);
                self.pending = Some((v, pos));
            }
            "user" => {
                let text = prompt_text(v.get("content"));
                if !text.is_empty() {
                    turns.prompt(text, None, pos, "user", out);
                }
            }
            t @ ("info" | "warning" | "error") => {
                let kind = if t == "info" { K::Metadata } else { K::Warning };
                let detail = prompt_text(v.get("content"));
                diag(out, kind, pos, t, detail);
            }
            other => diag(out, K::Unknown, pos, other.to_owned(), ""),
        }
    }

    /// `tool.call` and `tool.result` for what this record shows that was not emitted yet.
    fn tools(&mut self, v: &Value, out: &mut Vec<Output>) {
        for call in calls(v) {
            let (id, name) = call_id_name(call);
            if self.called.insert(id.clone()) {
                out.push(Output::ToolCall(ToolPayload::call(
                    name.clone(),
                    id.clone(),
                    arguments(call),
                    FIDELITY,
                )));
            }
            if let Some((output, error)) = result(call)
                && self.answered.insert(id.clone())
            {
                out.push(Output::ToolResult(ToolPayload::result(
                    name, id, output, error, FIDELITY,
                )));
            }
        }
    }

    /// Emits the pending `gemini` message's turn.
    fn flush(&mut self, out: &mut Vec<Output>) {
        let Some((v, _)) = self.pending.take() else {
            return;
        };
        let mut blocks = Vec::new();
        if let Some(Value::Array(thoughts)) = v.get("thoughts") {
            for t in thoughts {
                let t = t.value();
                let text = [s(t, "subject"), s(t, "description")]
                    .into_iter()
                    .flatten()
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n");
                if !text.is_empty() {
                    blocks.push(ContentBlock::thinking(FIDELITY, text));
                }
            }
        }
        let text = prompt_text(v.get("content"));
        if !text.is_empty() {
            blocks.push(ContentBlock::text(FIDELITY, text));
        }
        let mut results = Vec::new();
        for call in calls(&v) {
            let (id, name) = call_id_name(call);
            blocks.push(ContentBlock::tool_use(
                FIDELITY,
                name,
                id.clone(),
                arguments(call),
            ));
            if let Some((output, _)) = result(call) {
                results.push(ContentBlock::tool_result(FIDELITY, id, output));
            }
        }
        blocks.extend(results);
        let usage = v.get("tokens").map(usage).filter(|u| !u.is_empty());
        if blocks.is_empty() && usage.is_none() {
            return;
        }
        out.push(Output::Turn(MessagePayload {
            role: Role::Assistant,
            blocks,
            provider: Some("gemini".to_owned()),
            model: s(&v, "model").filter(|m| !m.is_empty()).map(str::to_owned),
            usage,
            // The session file's message id is the request's identity (decision 17).
            request_id: s(&v, "id").filter(|id| !id.is_empty()).map(str::to_owned),
        }));
    }
}

/// A message's `tokens` as usage (see the module docs).
fn usage(t: &Value) -> Usage {
    let cached = u(t, "cached");
    let input = u(t, "input").map(|i| {
        i.saturating_sub(cached.unwrap_or(0))
            .saturating_add(u(t, "tool").unwrap_or(0))
    });
    Usage {
        input_tokens: input,
        output_tokens: u(t, "output"),
        cache_read_tokens: cached.filter(|c| *c > 0),
        cache_write_tokens: None,
        reasoning_tokens: u(t, "thoughts").filter(|c| *c > 0),
        cost_usd: None,
        ..Default::default()
    }
}

/// The text of a message's `content`: a string, or the `text` of its parts.
fn prompt_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| s(p.value(), "text").map(str::to_owned))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn calls(v: &Value) -> impl Iterator<Item = &Value> {
    v.get("toolCalls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| c.value())
}

fn call_id_name(call: &Value) -> (String, String) {
    let name = s(call, "name").unwrap_or("unknown").to_owned();
    let id = s(call, "id")
        .filter(|i| !i.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| crate::util::synth(format_args!("call:{name}")));
    (id, name)
}

fn arguments(call: &Value) -> RawJson {
    call.get("args").map(raw).unwrap_or_else(RawJson::null)
}

/// A call's result, once it has one: the `functionResponse`'s `output` (its whole `response`
/// when it has no `output`), and the error of a call whose `status` is `error`.
fn result(call: &Value) -> Option<(RawJson, Option<String>)> {
    let parts = call.get("result")?.as_array()?;
    let response = parts
        .iter()
        .find_map(|p| p.value().get("functionResponse"))
        .and_then(|f| f.get("response"));
    let output = match response {
        Some(r) => r.get("output").map(raw).unwrap_or_else(|| raw(r)),
        None => raw(call.get("result")?),
    };
    let error = (s(call, "status") == Some("error")).then(|| {
        response
            .and_then(|r| r.get("error"))
            .map(error_text)
            .unwrap_or_else(|| "error".to_owned())
    });
    Some((output, error))
}
