//! Anthropic Messages API: a `message` response, its SSE stream
//! (`message_start`, `content_block_start` / `_delta` / `_stop`,
//! `message_delta`, `message_stop`), and recorded HTTP exchanges (an array
//! of `{request, response}` where each request's trailing `tool_result`
//! blocks answer the previous response's `tool_use` blocks; a response body
//! may be a JSON message or the raw SSE text).

use std::collections::BTreeMap;

use crate::json::Value;
use transcript_domain::{RawJson, Usage};

use crate::claude::{assistant_content, content_error};
use crate::frame::{Frame, Framer, Record};
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{
    Mapper, anthropic_usage, diag, error_text, ne, raw_of, rtype, s, synth, text_of, u,
};

#[derive(Debug, Default)]
pub(crate) struct Anthropic {
    open: BTreeMap<u64, (Position, Open)>,
    usage: Usage,
    /// Position of the last record, for diagnostics raised at the end.
    last: Position,
    stop_reason: Option<String>,
    /// Whether a recorded exchange's response body is being read: an
    /// exchange found there is reported, not walked (bounds the recursion
    /// through nested bodies; issue #23).
    in_body: bool,
}

#[derive(Debug)]
enum Open {
    Text(String),
    Thinking {
        text: String,
        signed: bool,
    },
    Tool {
        name: String,
        id: String,
        json: String,
        initial: Value,
    },
    Result {
        id: String,
        content: Value,
        error: Option<String>,
    },
    Skip,
}

impl Mapper for Anthropic {
    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        let v = &rec.value;
        let pos = rec.position;
        self.last = pos;
        if v.get("request").is_some() && v.get("response").is_some() {
            return self.recorded_exchange(v, pos, turns, out);
        }
        let t = rtype(v);
        match t {
            "message" => {
                self.close_all(pos, turns, out);
                message(v, pos, turns, out);
            }
            "message_start" => self.message_start(v, pos, turns, out),
            "content_block_start" => self.block_start(v, pos, turns, out),
            "content_block_delta" => self.block_delta(v, pos, out),
            "content_block_stop" => {
                let index = u(v, "index").unwrap_or(0);
                match self.open.remove(&index) {
                    Some((_, b)) => self.close(b, false, pos, turns, out),
                    None => diag(out, K::Orphan, pos, t, format!("no open block {index}")),
                }
            }
            "message_delta" => self.message_delta(v, pos, turns, out),
            "message_stop" => {
                turns.terminal();
                self.close_all(pos, turns, out)
            }
            "ping" => diag(out, K::Progress, pos, t, ""),
            "error" => diag(
                out,
                K::ProviderError,
                pos,
                t,
                v.get("error").map(error_text).unwrap_or_default(),
            ),
            _ => diag(out, K::Unknown, pos, t, ""),
        }
    }

    fn finish(&mut self, turns: &mut Turns, out: &mut Vec<Output>) {
        let pos = self.last;
        if !self.open.is_empty() {
            diag(
                out,
                K::Incomplete,
                pos,
                "stream",
                "stream ended before message_stop",
            );
        }
        self.close_all(pos, turns, out);
    }
}

/// The stream events' handlers, one per event kind that carries state.
impl Anthropic {
    /// A recorded `{request, response}` exchange; one found inside a response body is reported,
    /// not walked.
    fn recorded_exchange(
        &mut self,
        v: &Value,
        pos: Position,
        turns: &mut Turns,
        out: &mut Vec<Output>,
    ) {
        if self.in_body {
            return diag(
                out,
                K::Malformed,
                pos,
                "response/body",
                "a recorded exchange nested inside a response body (not read)",
            );
        }
        self.in_body = true;
        self.exchange(v, pos, turns, out);
        self.in_body = false;
    }

    /// `message_start`: a new message whose usage later `message_delta`s update.
    fn message_start(
        &mut self,
        v: &Value,
        pos: Position,
        turns: &mut Turns,
        out: &mut Vec<Output>,
    ) {
        self.close_all(pos, turns, out);
        let null = Value::Null;
        let m = v.get("message").unwrap_or(&null);
        turns.message(ne(m, "id"), ne(m, "model"), out);
        turns.expect("`message_stop`");
        self.usage = m.get("usage").map(anthropic_usage).unwrap_or_default();
        self.stop_reason = None;
        turns.set_usage(self.usage.clone());
    }

    /// `content_block_start`: opens the block at its index.
    fn block_start(&mut self, v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        let t = "content_block_start";
        let index = u(v, "index").unwrap_or(0);
        let null = Value::Null;
        let b = v.get("content_block").unwrap_or(&null);
        let open = open_block(b, index, pos, out);
        // A second start on an open index: the first block is kept
        // (closed as never stopped), not overwritten (issue #23).
        if let Some((start, first)) = self.open.insert(index, (pos, open)) {
            diag(
                out,
                K::Incomplete,
                pos,
                t,
                format!("block {index} started again before its content_block_stop"),
            );
            self.close(first, true, start, turns, out);
        }
    }

    /// `content_block_delta`: appends to the open block at its index.
    fn block_delta(&mut self, v: &Value, pos: Position, out: &mut Vec<Output>) {
        let t = "content_block_delta";
        let index = u(v, "index").unwrap_or(0);
        let null = Value::Null;
        let d = v.get("delta").unwrap_or(&null);
        let dt = rtype(d);
        match (self.open.get_mut(&index).map(|(_, o)| o), dt) {
            (Some(Open::Text(text)), "text_delta") => {
                text.push_str(&text_of(d, "text", pos, t, out))
            }
            (Some(Open::Thinking { text, .. }), "thinking_delta") => {
                text.push_str(&text_of(d, "thinking", pos, t, out))
            }
            (Some(Open::Thinking { signed, .. }), "signature_delta") => *signed = true,
            (Some(Open::Tool { json, .. }), "input_json_delta") => {
                json.push_str(&text_of(d, "partial_json", pos, t, out))
            }
            (Some(Open::Skip), _) => {}
            (_, "citations_delta") => diag(
                out,
                K::Extra,
                pos,
                "content_block_delta/citations_delta",
                "",
            ),
            (None, _) => diag(
                out,
                K::Orphan,
                pos,
                format!("content_block_delta/{dt}"),
                format!("no open block {index}"),
            ),
            _ => diag(
                out,
                K::Unknown,
                pos,
                format!("content_block_delta/{dt}"),
                "",
            ),
        }
    }

    /// `message_delta`: the stop reason and the cumulative usage (later fields win).
    fn message_delta(
        &mut self,
        v: &Value,
        pos: Position,
        turns: &mut Turns,
        out: &mut Vec<Output>,
    ) {
        if let Some(reason) = v.get("delta").and_then(|d| ne(d, "stop_reason")) {
            self.stop_reason = Some(reason.to_owned());
            if reason == "refusal" {
                diag(out, K::Refusal, pos, "message_delta/stop_reason", reason);
            }
        }
        if let Some(usage) = v.get("usage") {
            // message_delta usage is cumulative: later fields win.
            let d = anthropic_usage(usage);
            let cur = &mut self.usage;
            for (dst, src) in [
                (&mut cur.input_tokens, d.input_tokens),
                (&mut cur.output_tokens, d.output_tokens),
                (&mut cur.cache_read_tokens, d.cache_read_tokens),
                (&mut cur.cache_write_tokens, d.cache_write_tokens),
                (&mut cur.reasoning_tokens, d.reasoning_tokens),
            ] {
                if src.is_some() {
                    *dst = src;
                }
            }
            turns.set_usage(self.usage.clone());
        }
    }
}

/// The block a `content_block_start` opens, by its type.
fn open_block(b: &Value, index: u64, pos: Position, out: &mut Vec<Output>) -> Open {
    let t = "content_block_start";
    let bt = rtype(b);
    match bt {
        "text" => Open::Text(text_of(b, "text", pos, t, out).into_owned()),
        "thinking" => Open::Thinking {
            text: text_of(b, "thinking", pos, t, out).into_owned(),
            signed: ne(b, "signature").is_some(),
        },
        "tool_use" | "server_tool_use" | "mcp_tool_use" => Open::Tool {
            name: ne(b, "name").unwrap_or("unknown").to_owned(),
            id: ne(b, "id")
                .map(str::to_owned)
                .unwrap_or_else(|| synth(format_args!("line{}#{index}", pos.line))),
            json: String::new(),
            initial: b.get("input").cloned().unwrap_or(Value::Null),
        },
        _ if bt.ends_with("tool_result") => {
            let content = b.get("content").cloned().unwrap_or(Value::Null);
            let failed = b.get("is_error").and_then(Value::as_bool) == Some(true)
                || s(&content, "type").is_some_and(|t| t.ends_with("_error"));
            Open::Result {
                id: ne(b, "tool_use_id").unwrap_or_default().to_owned(),
                error: failed.then(|| content_error(Some(&content))),
                content,
            }
        }
        "redacted_thinking" => {
            diag(out, K::Extra, pos, bt, "encrypted thinking");
            Open::Skip
        }
        _ => {
            diag(
                out,
                K::Unknown,
                pos,
                format!("content_block_start/{bt}"),
                "",
            );
            Open::Skip
        }
    }
}

impl Anthropic {
    /// Closes blocks that never got `content_block_stop`; each diagnostic
    /// points at the block's `content_block_start`.
    fn close_all(&mut self, _pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        for (_, (start, b)) in std::mem::take(&mut self.open) {
            self.close(b, true, start, turns, out);
        }
    }

    fn close(
        &mut self,
        b: Open,
        unterminated: bool,
        pos: Position,
        turns: &mut Turns,
        out: &mut Vec<Output>,
    ) {
        let why = || match &self.stop_reason {
            Some(r) => format!("block never stopped (stop_reason {r})"),
            None => "block never stopped".to_owned(),
        };
        match b {
            Open::Text(text) => {
                if unterminated {
                    diag(out, K::Incomplete, pos, "content_block/text", why());
                }
                turns.text(text, out);
            }
            Open::Thinking { text, signed } => {
                if unterminated {
                    diag(out, K::Incomplete, pos, "content_block/thinking", why());
                }
                turns.thinking(text, out);
                if signed {
                    diag(
                        out,
                        K::Extra,
                        pos,
                        "thinking/signature",
                        "thinking signature not carried by blocks",
                    );
                }
            }
            Open::Tool {
                name,
                id,
                json,
                initial,
            } => {
                let input = if json.trim().is_empty() {
                    if unterminated {
                        diag(out, K::Incomplete, pos, "content_block/tool_use", why());
                    }
                    raw_of(initial)
                } else {
                    match serde_json::from_str::<Value>(&json) {
                        Ok(v) => {
                            if unterminated {
                                diag(out, K::Incomplete, pos, "content_block/tool_use", why());
                            }
                            raw_of(v)
                        }
                        Err(e) => {
                            diag(
                                out,
                                K::Incomplete,
                                pos,
                                "content_block/tool_use",
                                format!("{}; input JSON incomplete ({e}), kept as a string", why()),
                            );
                            RawJson::string(&json)
                        }
                    }
                };
                turns.tool_use(&name, &id, input, out);
            }
            Open::Result { id, content, error } => {
                turns.server_tool_result(
                    &id,
                    raw_of(content),
                    error,
                    pos,
                    "content_block/tool_result",
                    out,
                );
            }
            Open::Skip => {}
        }
    }

    fn exchange(&mut self, v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        let null = Value::Null;
        let req = v
            .get("request")
            .and_then(|r| r.get("body"))
            .unwrap_or(&null);
        request(req, pos, turns, out);
        let resp = v.get("response").unwrap_or(&null);
        if let Some(code) = resp.get("status_code").and_then(Value::as_u64)
            && code >= 400
        {
            diag(
                out,
                K::ProviderError,
                pos,
                "response",
                format!("HTTP {code}"),
            );
        }
        match resp.get("body") {
            Some(Value::String(sse)) => self.sse_body(sse, pos, turns, out),
            Some(body @ Value::Object(_)) => {
                let r = Record {
                    position: pos,
                    event: None,
                    value: body.clone(),
                };
                self.record(r, turns, out);
            }
            _ => diag(out, K::Malformed, pos, "response", "no response body"),
        }
    }

    /// A response body holding the raw SSE text: its events, all at the exchange's position.
    fn sse_body(&mut self, sse: &str, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        let mut framer = Framer::new();
        let mut frames = Vec::new();
        framer.feed(sse.as_bytes(), &mut frames);
        framer.finish(&mut frames);
        for f in frames {
            match f {
                Frame::Record(mut r) => {
                    r.position = pos;
                    self.record(r, turns, out);
                }
                Frame::Diagnostic(mut d) => {
                    d.position = pos;
                    out.push(Output::Diagnostic(d));
                }
            }
        }
        if !self.open.is_empty() {
            diag(
                out,
                K::Incomplete,
                pos,
                "response",
                "SSE body ended before message_stop",
            );
            self.close_all(pos, turns, out);
        }
    }
}

/// A recorded request body: its last user message either answers the previous response's tool
/// calls or holds the prompt.
fn request(req: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let last = req
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .filter(|m| s(m, "role") == Some("user"));
    let mut answered = false;
    if let Some(Value::Array(blocks)) = last.and_then(|m| m.get("content")) {
        for b in blocks.iter().filter(|b| rtype(b) == "tool_result") {
            answered = true;
            let id = ne(b, "tool_use_id").unwrap_or_default();
            let error = (b.get("is_error").and_then(Value::as_bool) == Some(true))
                .then(|| content_error(b.get("content")));
            turns.tool_result(id, b.raw("content"), error, pos, "request/tool_result", out);
        }
    }
    let prompt = if answered {
        None
    } else {
        last.and_then(|m| prompt_text(m.get("content")))
    };
    if let Some(text) = prompt {
        let system = prompt_text(req.get("system"));
        turns.prompt(text, system, pos, "request/prompt", out);
    } else if !answered {
        diag(
            out,
            K::Extra,
            pos,
            "request",
            "request body (prompt, history, tool definitions)",
        );
    }
}

/// The text of a prompt or system field: a string, or its text blocks joined.
pub(crate) fn prompt_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(t) if !t.is_empty() => Some(t.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| rtype(b) == "text")
                .filter_map(|b| s(b, "text"))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

fn message(v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let fallback = format!("line{}", pos.line);
    let id = ne(v, "id").unwrap_or(&fallback);
    turns.message(Some(id), ne(v, "model"), out);
    if let Some(content) = v.get("content") {
        assistant_content(content, id, pos, turns, out);
    }
    if let Some(usage) = v.get("usage") {
        turns.set_usage(anthropic_usage(usage));
    }
    if s(v, "stop_reason") == Some("refusal") {
        diag(out, K::Refusal, pos, "message/stop_reason", "refusal");
    }
}
