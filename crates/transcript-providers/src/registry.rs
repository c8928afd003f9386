//! The provider registry: lookup by name and auto-detection from the first
//! records of a stream.

use std::fmt;
use std::str::FromStr;

use crate::json::Value;

use crate::frame::{Frame, Framer};
use crate::output::{Diagnostic, DiagnosticKind, Output, Position};
use crate::util::{Framed, s};
use crate::{Normalizer, anthropic, claude, codex, copilot, gemini, openai};

/// A provider known to the registry. Its [`Provider::name`] is what
/// `message.assistant` payloads carry in `provider` (decision 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// Claude Code CLI (stream-json, json array, session JSONL).
    Claude,
    /// OpenAI Codex CLI (exec --json in its three forms, rollout files).
    Codex,
    /// Gemini CLI (stream-json, json).
    Gemini,
    /// GitHub Copilot CLI (`--output-format json`, session `events.jsonl`).
    Copilot,
    /// OpenAI HTTP APIs (Chat Completions, Responses; JSON and SSE).
    OpenAi,
    /// Anthropic Messages API (JSON, SSE, recorded HTTP exchanges).
    Anthropic,
}

/// A name the registry does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {0:?} (known: claude, codex, gemini, copilot, openai, anthropic)")]
pub struct UnknownProvider(pub String);

impl Provider {
    /// Every provider, in registry order.
    pub const ALL: &'static [Provider] = &[
        Provider::Claude,
        Provider::Codex,
        Provider::Gemini,
        Provider::Copilot,
        Provider::OpenAi,
        Provider::Anthropic,
    ];

    /// The registry name.
    pub const fn name(self) -> &'static str {
        match self {
            Provider::Claude => "claude",
            Provider::Codex => "codex",
            Provider::Gemini => "gemini",
            Provider::Copilot => "copilot",
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// Looks a provider up by registry name (case-insensitive; `claude-code`
    /// is accepted for `claude`).
    pub fn from_name(name: &str) -> Result<Self, UnknownProvider> {
        let lower = name.trim().to_ascii_lowercase();
        match lower.as_str() {
            "claude" | "claude-code" | "claude_code" => Ok(Provider::Claude),
            "codex" => Ok(Provider::Codex),
            "gemini" => Ok(Provider::Gemini),
            "copilot" => Ok(Provider::Copilot),
            "openai" => Ok(Provider::OpenAi),
            "anthropic" => Ok(Provider::Anthropic),
            _ => Err(UnknownProvider(name.to_owned())),
        }
    }

    /// A fresh normalizer for this provider.
    pub fn normalizer(self) -> Box<dyn Normalizer> {
        match self {
            Provider::Claude => Box::new(Framed::new(self, claude::Claude)),
            Provider::Codex => Box::new(Framed::new(self, codex::Codex)),
            Provider::Gemini => Box::new(Framed::new(self, gemini::Gemini)),
            Provider::Copilot => Box::new(Framed::new(self, copilot::Copilot)),
            Provider::OpenAi => Box::new(Framed::new(self, openai::OpenAi::default())),
            Provider::Anthropic => Box::new(Framed::new(self, anthropic::Anthropic::default())),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Provider {
    type Err = UnknownProvider;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Provider::from_name(s)
    }
}

/// Guesses the provider from the start of a stream; `None` when the first
/// records are not conclusive (or there are none yet).
pub fn detect(prefix: &[u8]) -> Option<Provider> {
    let mut framer = Framer::new();
    let mut frames = Vec::new();
    framer.feed(prefix, &mut frames);
    frames.iter().find_map(|f| match f {
        Frame::Record(r) => detect_record(r.event.as_deref(), &r.value),
        Frame::Diagnostic(_) => None,
    })
}

fn detect_record(event: Option<&str>, v: &Value) -> Option<Provider> {
    let t = s(v, "type").unwrap_or("");
    if let Some(ev) = event {
        if ev.starts_with("message_") || ev.starts_with("content_block") {
            return Some(Provider::Anthropic);
        }
        if ev.starts_with("response.") {
            return Some(Provider::OpenAi);
        }
    }
    if let Some(o) = s(v, "object")
        && (o.starts_with("chat.completion") || o == "response")
    {
        return Some(Provider::OpenAi);
    }
    if v.get("choices").is_some()
        || t.starts_with("response.")
        || v.get("messages").is_some_and(Value::is_array)
        || v.get("tool_call_id").is_some()
        || v.get("tool_calls").is_some()
    {
        return Some(Provider::OpenAi);
    }
    if v.get("msg").is_some() && v.get("id").is_some() {
        return Some(Provider::Codex);
    }
    if t.starts_with("thread.") || t.starts_with("turn.") || t.starts_with("item.") {
        return Some(Provider::Codex);
    }
    if matches!(
        t,
        "session_meta" | "response_item" | "event_msg" | "turn_context"
    ) {
        return Some(Provider::Codex);
    }
    if v.get("sandbox").is_some() && v.get("approval").is_some() {
        return Some(Provider::Codex);
    }
    if v.get("request").is_some() && v.get("response").is_some() {
        return Some(Provider::Anthropic);
    }
    if t.starts_with("message_") || t.starts_with("content_block") {
        return Some(Provider::Anthropic);
    }
    if t == "message" && v.get("content").is_some_and(Value::is_array) {
        return Some(Provider::Anthropic);
    }
    if v.get("data").is_some_and(Value::is_object) && t.contains('.') {
        return Some(Provider::Copilot);
    }
    if t == "init" && v.get("session_id").is_some() {
        return Some(Provider::Gemini);
    }
    if v.get("response").is_some() && v.get("stats").is_some() {
        return Some(Provider::Gemini);
    }
    if matches!(t, "tool_use" | "tool_result") && v.get("tool_id").is_some() {
        return Some(Provider::Gemini);
    }
    if matches!(t, "system" | "assistant" | "user" | "result")
        || v.get("sessionId").is_some()
        || v.get("parentUuid").is_some()
    {
        return Some(Provider::Claude);
    }
    None
}

/// Detects the provider from the first records, then delegates.
///
/// Input is buffered until a record identifies the provider (or the stream
/// ends). If no record is conclusive by the end of the stream, a single
/// [`DiagnosticKind::Unknown`] diagnostic reports it and the input is
/// normalized as Claude so its records are still counted.
pub struct AutoNormalizer {
    buffered: Vec<u8>,
    inner: Option<Box<dyn Normalizer>>,
}

impl Default for AutoNormalizer {
    fn default() -> Self {
        Self::new()
    }
}

impl AutoNormalizer {
    /// A normalizer that has not detected its provider yet.
    pub fn new() -> Self {
        Self {
            buffered: Vec::new(),
            inner: None,
        }
    }

    /// The detected provider, once known.
    pub fn detected(&self) -> Option<Provider> {
        self.inner.as_ref().map(|n| n.provider())
    }

    fn start(&mut self, p: Provider, out: &mut Vec<Output>) {
        let mut n = p.normalizer();
        n.feed(&std::mem::take(&mut self.buffered), out);
        self.inner = Some(n);
    }
}

impl Normalizer for AutoNormalizer {
    fn provider(&self) -> Provider {
        self.detected().unwrap_or(Provider::Claude)
    }

    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Output>) {
        if let Some(n) = &mut self.inner {
            return n.feed(bytes, out);
        }
        self.buffered.extend_from_slice(bytes);
        // Only re-detect when a record may have completed.
        if bytes.iter().any(|&b| b == b'\n' || b == b'}' || b == b']')
            && let Some(p) = detect(&self.buffered)
        {
            self.start(p, out);
        }
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        if self.inner.is_none() {
            let p = match detect_complete(&self.buffered) {
                Some(p) => p,
                None => {
                    if !self.buffered.iter().all(u8::is_ascii_whitespace) {
                        out.push(Output::Diagnostic(Diagnostic {
                            kind: DiagnosticKind::Unknown,
                            position: Position {
                                line: 1,
                                offset: 0,
                                element: None,
                            },
                            record: "-".to_owned(),
                            detail: "provider not detected; parsed as claude".to_owned(),
                        }));
                    }
                    Provider::Claude
                }
            };
            self.start(p, out);
        }
        if let Some(n) = &mut self.inner {
            n.finish(out);
        }
    }
}

fn detect_complete(input: &[u8]) -> Option<Provider> {
    let mut framer = Framer::new();
    let mut frames = Vec::new();
    framer.feed(input, &mut frames);
    framer.finish(&mut frames);
    frames.iter().find_map(|f| match f {
        Frame::Record(r) => detect_record(r.event.as_deref(), &r.value),
        Frame::Diagnostic(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_by_name() {
        for p in Provider::ALL {
            assert_eq!(Provider::from_name(p.name()), Ok(*p));
            assert_eq!(p.to_string().parse::<Provider>(), Ok(*p));
            assert_eq!(p.normalizer().provider(), *p);
        }
        assert_eq!(Provider::from_name(" Claude-Code "), Ok(Provider::Claude));
        let err = Provider::from_name("bard").unwrap_err();
        assert!(err.to_string().contains("\"bard\""), "{err}");
    }

    #[test]
    fn detection_from_first_records() {
        let cases: &[(&[u8], Option<Provider>)] = &[
            (
                b"{\"type\":\"system\",\"subtype\":\"init\"}\n",
                Some(Provider::Claude),
            ),
            (
                b"[{\"type\":\"assistant\",\"message\":{}}]",
                Some(Provider::Claude),
            ),
            (b"{\"type\":\"thread.started\"}\n", Some(Provider::Codex)),
            (
                b"{\"id\":\"1\",\"msg\":{\"type\":\"task_started\"}}\n",
                Some(Provider::Codex),
            ),
            (
                b"{\"sandbox\":\"x\",\"approval\":\"y\"}\n",
                Some(Provider::Codex),
            ),
            (
                b"{\"timestamp\":\"t\",\"type\":\"session_meta\"}\n",
                Some(Provider::Codex),
            ),
            (
                b"{\"type\":\"init\",\"session_id\":\"s\"}\n",
                Some(Provider::Gemini),
            ),
            (b"{\"response\":\"x\",\"stats\":{}}", Some(Provider::Gemini)),
            (
                b"{\"type\":\"tool_use\",\"tool_id\":\"t\"}\n",
                Some(Provider::Gemini),
            ),
            (
                b"{\"type\":\"session.start\",\"data\":{}}\n",
                Some(Provider::Copilot),
            ),
            (
                b"data: {\"object\":\"chat.completion.chunk\"}\n\n",
                Some(Provider::OpenAi),
            ),
            (
                b"event: response.created\ndata: {}\n\n",
                Some(Provider::OpenAi),
            ),
            (b"{\"messages\":[]}", Some(Provider::OpenAi)),
            (
                b"event: message_start\ndata: {}\n\n",
                Some(Provider::Anthropic),
            ),
            (
                b"{\"type\":\"message\",\"content\":[]}",
                Some(Provider::Anthropic),
            ),
            (
                b"[{\"request\":{},\"response\":{}}]",
                Some(Provider::Anthropic),
            ),
            (
                b"{\"type\":\"content_block_delta\"}\n",
                Some(Provider::Anthropic),
            ),
            (b"{\"hello\":1}\n", None),
            (b"", None),
        ];
        for (input, want) in cases {
            assert_eq!(detect(input), *want, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn undetectable_input_is_reported_not_dropped() {
        let mut auto = AutoNormalizer::new();
        let mut out = Vec::new();
        auto.feed(b"{\"hello\":1}\n", &mut out);
        assert!(out.is_empty());
        auto.finish(&mut out);
        let kinds: Vec<_> = out
            .iter()
            .filter_map(Output::as_diagnostic)
            .map(|d| d.kind)
            .collect();
        assert_eq!(kinds, [DiagnosticKind::Unknown, DiagnosticKind::Unknown]);
        assert_eq!(auto.provider(), Provider::Claude);

        let mut empty = AutoNormalizer::default();
        let mut out = Vec::new();
        empty.feed(b"  \n", &mut out);
        empty.finish(&mut out);
        assert!(out.is_empty());
        assert_eq!(empty.detected(), Some(Provider::Claude));
    }
}
