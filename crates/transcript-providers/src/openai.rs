//! OpenAI: Chat Completions (a `chat.completion` response, SSE
//! `chat.completion.chunk`s with tool calls assembled by index, chat
//! `messages` lists where role `tool` messages are tool results) and the
//! Responses API (a `response` object or its SSE events; items `reasoning`,
//! `message` / `output_text`, `function_call`, `function_call_output`, …).
//! The Responses item mapping is shared with Codex rollout files.

use std::collections::BTreeMap;

mod responses;

pub(crate) use responses::response_item;

use crate::json::Value;
use transcript_domain::{RawJson, Usage};

use crate::frame::Record;
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{
    Mapper, diag, error_text, json_arguments, minus, ne, raw_of, rtype, s, synth, text_of, u,
};

#[derive(Debug, Default)]
pub(crate) struct OpenAi {
    chunks: Option<Chunks>,
    /// The last `system` / `developer` message, the system prompt of the
    /// next `user` message.
    system: Option<String>,
}

/// The terminal record of a streamed chat completion.
const CHUNK_TERMINAL: &str = "a chunk with `finish_reason`";

/// A streamed chat completion being assembled.
#[derive(Debug, Default)]
struct Chunks {
    id: String,
    pos: Position,
    /// Reasoning, text, refusal and tool calls in stream order, so text
    /// before and after a tool call keeps its place (issue #18).
    segments: Vec<Segment>,
    /// Tool calls by `index`: id, name, arguments.
    tools: BTreeMap<u64, (String, String, String)>,
    finished: bool,
}

/// One run of same-kind deltas of a streamed completion.
#[derive(Debug)]
enum Segment {
    Reasoning(String),
    Text(String),
    Refusal(String),
    /// The tool call at this `index` (assembled in `tools`).
    Tool(u64),
}

impl Mapper for OpenAi {
    /// `created` (Unix seconds) of completions, chunks and responses.
    fn time(&self, v: &Value) -> Option<transcript_domain::Timestamp> {
        let secs = v
            .get("created")
            .or_else(|| v.get("created_at"))
            .or_else(|| v.get("response").and_then(|r| r.get("created_at")))
            .and_then(Value::as_i64)?;
        transcript_domain::Timestamp::from_unix_millis(secs.checked_mul(1000)?)
    }

    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        let v = &rec.value;
        let pos = rec.position;
        let object = s(v, "object").unwrap_or("");
        match object {
            "chat.completion.chunk" => return self.chunk(v, pos, turns, out),
            "chat.completion" => return completion(v, pos, turns, out),
            "response" => return responses::response(v, pos, turns, out),
            _ => {}
        }
        if v.get("choices")
            .is_some_and(|c| c.at(0).and_then(|c| c.get("delta")).is_some())
        {
            return self.chunk(v, pos, turns, out);
        }
        if v.get("choices").is_some() {
            return completion(v, pos, turns, out);
        }
        if let Some(Value::Array(messages)) = v.get("messages") {
            for m in messages {
                chat_message(m, pos, &mut self.system, turns, out);
            }
            return;
        }
        if v.get("role").is_some() {
            return chat_message(v, pos, &mut self.system, turns, out);
        }
        let t = rtype(v);
        if t.starts_with("response.") {
            return responses::response_event(t, v, pos, turns, out);
        }
        match t {
            "error" => diag(
                out,
                K::ProviderError,
                pos,
                t,
                v.get("error").map(error_text).unwrap_or_default(),
            ),
            _ if v.get("error").is_some_and(|e| !e.is_null()) => diag(
                out,
                K::ProviderError,
                pos,
                "error",
                v.get("error").map(error_text).unwrap_or_default(),
            ),
            _ => diag(out, K::Unknown, pos, if t == "-" { object } else { t }, ""),
        }
    }

    fn finish(&mut self, turns: &mut Turns, out: &mut Vec<Output>) {
        if let Some(c) = self.chunks.take() {
            if !c.finished {
                diag(
                    out,
                    K::Incomplete,
                    c.pos,
                    "chat.completion.chunk",
                    "stream ended without finish_reason",
                );
            }
            flush_chunks(c, turns, out);
        }
    }
}

impl OpenAi {
    fn chunk(&mut self, v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        let id = s(v, "id").unwrap_or("");
        if self.chunks.as_ref().is_none_or(|c| c.id != id) {
            self.start_completion(id, v, pos, turns, out);
        }
        let Some(c) = self.chunks.as_mut() else {
            return;
        };
        let mut late = false;
        if let Some(Value::Array(choices)) = v.get("choices") {
            for choice in choices {
                if u(choice, "index").unwrap_or(0) != 0 {
                    diag(
                        out,
                        K::Extra,
                        pos,
                        "chat.completion.chunk/choice",
                        "alternative choice (n > 1)",
                    );
                    continue;
                }
                if let Some(d) = choice.get("delta") {
                    let before = c.size();
                    c.delta(d, pos, out);
                    late |= c.finished && c.size() != before;
                }
                if let Some(reason) = ne(choice, "finish_reason") {
                    c.finish(reason, pos, turns, out);
                }
            }
        }
        if late {
            // Kept (flushed with the next completion or at the end), and
            // flagged: a chunk after finish_reason is out of protocol.
            diag(
                out,
                K::Malformed,
                pos,
                "chat.completion.chunk",
                "content after finish_reason (kept)",
            );
        }
        if let Some(usage) = v.get("usage").filter(|x| x.is_object()) {
            turns.set_usage(chat_usage(usage));
        }
    }

    /// A chunk of a new completion id: the previous completion is flushed, a new message opens.
    fn start_completion(
        &mut self,
        id: &str,
        v: &Value,
        pos: Position,
        turns: &mut Turns,
        out: &mut Vec<Output>,
    ) {
        if let Some(prev) = self.chunks.take() {
            if !prev.finished {
                diag(
                    out,
                    K::Incomplete,
                    prev.pos,
                    "chat.completion.chunk",
                    "completion ended without finish_reason",
                );
            }
            // Also content that arrived after finish_reason (flagged
            // where it arrived).
            flush_chunks(prev, turns, out);
        }
        turns.message((!id.is_empty()).then_some(id), ne(v, "model"), out);
        turns.expect(CHUNK_TERMINAL);
        self.chunks = Some(Chunks {
            id: id.to_owned(),
            pos,
            ..Chunks::default()
        });
    }
}

/// One chunk's parts of the completion being collected.
impl Chunks {
    /// A choice's `delta`: reasoning, text, refusal and tool-call fragments, in that order.
    fn delta(&mut self, d: &Value, pos: Position, out: &mut Vec<Output>) {
        if let Some(t) = s(d, "reasoning_content").or_else(|| s(d, "reasoning")) {
            self.push(Segment::Reasoning(t.to_owned()));
        }
        let text = text_of(d, "content", pos, "chat.completion.chunk", out);
        self.push(Segment::Text(text.into_owned()));
        if let Some(t) = s(d, "refusal") {
            self.push(Segment::Refusal(t.to_owned()));
        }
        if let Some(Value::Array(calls)) = d.get("tool_calls") {
            for call in calls {
                let index = u(call, "index").unwrap_or(0);
                if !self.tools.contains_key(&index) {
                    self.segments.push(Segment::Tool(index));
                }
                let entry = self.tools.entry(index).or_default();
                if let Some(id) = ne(call, "id") {
                    entry.0 = id.to_owned();
                }
                if let Some(f) = call.get("function") {
                    if let Some(n) = ne(f, "name") {
                        entry.1.push_str(n);
                    }
                    if let Some(a) = s(f, "arguments") {
                        entry.2.push_str(a);
                    }
                }
            }
        }
    }

    /// A choice's `finish_reason`: the completion is flushed (again, when content arrived after
    /// an earlier finish).
    fn finish(&mut self, reason: &str, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        turns.terminal();
        match reason {
            "length" => diag(
                out,
                K::Incomplete,
                pos,
                "chat.completion.chunk",
                "finish_reason length",
            ),
            "content_filter" => diag(
                out,
                K::Refusal,
                pos,
                "chat.completion.chunk",
                "finish_reason content_filter",
            ),
            _ => {}
        }
        if !self.finished || self.has_content() {
            self.finished = true;
            let done = std::mem::replace(
                self,
                Chunks {
                    id: self.id.clone(),
                    pos: self.pos,
                    finished: true,
                    ..Chunks::default()
                },
            );
            flush_chunks(done, turns, out);
        }
    }
}

impl Chunks {
    /// Whether deltas are waiting to be flushed.
    fn has_content(&self) -> bool {
        self.size() > 0
    }

    /// Appends a delta: to the last segment when it is of the same kind.
    fn push(&mut self, seg: Segment) {
        match (self.segments.last_mut(), seg) {
            (_, Segment::Text(t) | Segment::Reasoning(t)) if t.is_empty() => {}
            (Some(Segment::Text(a)), Segment::Text(b))
            | (Some(Segment::Reasoning(a)), Segment::Reasoning(b))
            | (Some(Segment::Refusal(a)), Segment::Refusal(b)) => a.push_str(&b),
            (_, seg) => self.segments.push(seg),
        }
    }

    /// How much was accumulated (grows with every delta that carries content).
    fn size(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Reasoning(t) | Segment::Text(t) => t.len(),
                Segment::Refusal(t) => t.len() + 1,
                Segment::Tool(_) => 0,
            })
            .sum::<usize>()
            + self
                .tools
                .values()
                .map(|(id, name, args)| 1 + id.len() + name.len() + args.len())
                .sum::<usize>()
    }
}

fn flush_chunks(mut c: Chunks, turns: &mut Turns, out: &mut Vec<Output>) {
    for seg in std::mem::take(&mut c.segments) {
        match seg {
            Segment::Reasoning(t) => turns.thinking(t, out),
            Segment::Text(t) => turns.text(t, out),
            Segment::Refusal(r) if r.is_empty() => {}
            Segment::Refusal(r) => {
                diag(
                    out,
                    K::Refusal,
                    c.pos,
                    "chat.completion.chunk/refusal",
                    r.clone(),
                );
                turns.text(r, out);
            }
            Segment::Tool(index) => {
                if let Some(tool) = c.tools.remove(&index) {
                    flush_tool(&c.id, c.pos, index, tool, turns, out);
                }
            }
        }
    }
}

fn flush_tool(
    completion: &str,
    pos: Position,
    index: u64,
    (id, name, args): (String, String, String),
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    {
        let id = if id.is_empty() {
            synth(format_args!("{completion}#tool{index}"))
        } else {
            id
        };
        let input = match serde_json::from_str::<Value>(&args) {
            Ok(v) => raw_of(v),
            Err(_) if args.is_empty() => raw_of(Value::object([])),
            Err(e) => {
                diag(
                    out,
                    K::Incomplete,
                    pos,
                    "chat.completion.chunk/tool_calls",
                    format!("arguments are not JSON ({e}); kept as a string"),
                );
                RawJson::string(&args)
            }
        };
        turns.tool_use(
            if name.is_empty() { "unknown" } else { &name },
            &id,
            input,
            out,
        );
    }
}

/// Chat Completions usage: `prompt_tokens` includes cached tokens.
fn chat_usage(v: &Value) -> Usage {
    let cached = v
        .get("prompt_tokens_details")
        .and_then(|d| u(d, "cached_tokens"));
    Usage {
        input_tokens: minus(u(v, "prompt_tokens"), cached),
        output_tokens: u(v, "completion_tokens"),
        cache_read_tokens: cached,
        cache_write_tokens: None,
        reasoning_tokens: v
            .get("completion_tokens_details")
            .and_then(|d| u(d, "reasoning_tokens")),
        cost_usd: None,
        ..Default::default()
    }
}

fn completion(v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    turns.message(ne(v, "id"), ne(v, "model"), out);
    if let Some(Value::Array(choices)) = v.get("choices") {
        for (i, choice) in choices.iter().enumerate() {
            if i > 0 {
                diag(
                    out,
                    K::Extra,
                    pos,
                    "chat.completion/choice",
                    "alternative choice (n > 1)",
                );
                continue;
            }
            match choice.get("message") {
                Some(m) => assistant_message(m, pos, turns, out),
                None => diag(
                    out,
                    K::Malformed,
                    pos,
                    "chat.completion/choice",
                    "choice without message",
                ),
            }
            if s(choice, "finish_reason") == Some("length") {
                diag(
                    out,
                    K::Incomplete,
                    pos,
                    "chat.completion",
                    "finish_reason length",
                );
            }
        }
    }
    if let Some(usage) = v.get("usage").filter(|x| x.is_object()) {
        turns.set_usage(chat_usage(usage));
    }
}

fn assistant_message(m: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    if let Some(r) = ne(m, "reasoning_content") {
        turns.thinking(r, out);
    }
    match m.get("content") {
        Some(Value::String(t)) if !t.is_empty() => turns.text(t.as_str(), out),
        Some(Value::String(_) | Value::Null) | None => {}
        Some(Value::Array(parts)) => {
            for p in parts {
                match (rtype(p), s(p, "text")) {
                    ("text" | "output_text", Some(t)) => turns.text(t, out),
                    ("refusal", _) => {
                        let r = s(p, "refusal").unwrap_or_default();
                        diag(out, K::Refusal, pos, "message/refusal", r);
                        turns.text(r, out);
                    }
                    (t, _) => diag(out, K::Extra, pos, format!("message/{t}"), ""),
                }
            }
        }
        Some(_) => {
            let text = text_of(m, "content", pos, "message/content", out);
            turns.text(text, out);
        }
    }
    if let Some(r) = ne(m, "refusal") {
        diag(out, K::Refusal, pos, "message/refusal", r);
        turns.text(r, out);
    }
    if let Some(Value::Array(calls)) = m.get("tool_calls") {
        for (i, call) in calls.iter().enumerate() {
            let f = call.get("function").unwrap_or(call);
            let id = ne(call, "id")
                .map(str::to_owned)
                .unwrap_or_else(|| synth(format_args!("call@line{}#{i}", pos.line)));
            turns.tool_use(
                ne(f, "name").unwrap_or("unknown"),
                &id,
                json_arguments(f.get("arguments")),
                out,
            );
        }
    }
}

fn chat_message(
    m: &Value,
    pos: Position,
    system: &mut Option<String>,
    turns: &mut Turns,
    out: &mut Vec<Output>,
) {
    let role = s(m, "role").unwrap_or("-");
    match role {
        "assistant" => {
            turns.message(None, None, out);
            assistant_message(m, pos, turns, out);
        }
        "tool" | "function" => {
            let id = ne(m, "tool_call_id")
                .or_else(|| ne(m, "name"))
                .map(str::to_owned)
                .unwrap_or_else(|| synth(format_args!("call@line{}", pos.line)));
            turns.tool_result(&id, m.raw("content"), None, pos, "message/tool", out);
        }
        "system" | "developer" if turns.collecting() => {
            match crate::anthropic::prompt_text(m.get("content")) {
                Some(text) => *system = Some(text),
                None => diag(out, K::Extra, pos, format!("message/{role}"), "empty"),
            }
        }
        "user" if crate::anthropic::prompt_text(m.get("content")).is_some() => {
            let text = crate::anthropic::prompt_text(m.get("content")).unwrap_or_default();
            turns.prompt(text, system.take(), pos, "message/user", out);
        }
        "user" | "system" | "developer" => diag(
            out,
            K::Extra,
            pos,
            format!("message/{role}"),
            "prompt message",
        ),
        _ => diag(out, K::Unknown, pos, format!("message/{role}"), ""),
    }
}
