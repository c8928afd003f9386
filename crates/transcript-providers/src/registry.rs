//! The provider registry: lookup by name and auto-detection from the first
//! records of a stream.

use std::fmt;
use std::str::FromStr;

use crate::json::Value;

use crate::frame::{Frame, Framer};
use crate::output::{Diagnostic, DiagnosticKind, Output, Position};
use crate::util::{Framed, s};
use crate::{Normalizer, anthropic, claude, codex, copilot, gemini_chats, openai};

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
            Provider::Codex => Box::new(Framed::new(self, codex::Codex::default())),
            Provider::Gemini => Box::new(Framed::new(self, gemini_chats::GeminiAny::default())),
            Provider::Copilot => Box::new(Framed::new(self, copilot::Copilot::default())),
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

/// Auto-detection reads at most this many bytes of a stream (1 MiB)…
pub const DETECT_MAX_BYTES: usize = 1 << 20;
/// …and at most this many records, whichever bound is reached first. Then
/// it falls back to Claude with a diagnostic, so detection is linear in the
/// input and buffers a bounded prefix (issue #23: it used to re-parse the
/// whole buffer on every chunk, without limit).
pub const DETECT_MAX_RECORDS: usize = 1000;

/// Guesses the provider from the start of a stream; `None` when the first
/// records are not conclusive (or there are none yet). Reads at most
/// [`DETECT_MAX_BYTES`] bytes and [`DETECT_MAX_RECORDS`] records.
pub fn detect(prefix: &[u8]) -> Option<Provider> {
    let mut d = Detector::default();
    match d.feed(&prefix[..prefix.len().min(DETECT_MAX_BYTES)]) {
        Verdict::Detected(p) => Some(p),
        Verdict::Undecided | Verdict::Exhausted => d.guess.map(|(p, _)| p),
    }
}

/// What the detector knows so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Detected(Provider),
    Undecided,
    /// The record bound was reached without a conclusive record.
    Exhausted,
}

/// Incremental detection: frames each byte once and looks at each record
/// once, so its work is linear in what it is fed (at most the bounds).
#[derive(Debug, Default)]
struct Detector {
    framer: Framer,
    frames: Vec<Frame>,
    records: usize,
    /// The first inconclusive guess and the record type it came from.
    guess: Option<(Provider, String)>,
}

impl Detector {
    fn feed(&mut self, bytes: &[u8]) -> Verdict {
        self.framer.feed(bytes, &mut self.frames);
        self.scan()
    }

    fn finish(&mut self) -> Verdict {
        self.framer.finish(&mut self.frames);
        self.scan()
    }

    fn scan(&mut self) -> Verdict {
        for f in self.frames.drain(..) {
            let Frame::Record(r) = f else { continue };
            self.records += 1;
            // A Gemini CLI saved session first: its metadata has a `sessionId` (Claude's
            // mark) and its older whole-document form a `messages` array (OpenAI's).
            let chats = gemini_chats::is_chat_record(&r.value).then_some(Provider::Gemini);
            if let Some(p) = chats.or_else(|| detect_record(r.event.as_deref(), &r.value)) {
                return Verdict::Detected(p);
            }
            if self.guess.is_none()
                && let Some(p) = guess_record(&r.value)
            {
                self.guess = Some((p, s(&r.value, "type").unwrap_or("-").to_owned()));
            }
            if self.records >= DETECT_MAX_RECORDS {
                return Verdict::Exhausted;
            }
        }
        Verdict::Undecided
    }
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
    // Gemini CLI records sharing Claude Code's type names: a `result` with
    // `stats` (Claude's has `subtype`), a `user` record or `message` with
    // the text at top level (Claude's sit in `message`).
    if t == "result" && v.get("stats").is_some() && v.get("subtype").is_none() {
        return Some(Provider::Gemini);
    }
    if matches!(t, "user" | "message")
        && v.get("message").is_none()
        && v.get("content").is_some_and(|c| c.as_str().is_some())
    {
        return Some(Provider::Gemini);
    }
    if v.get("sessionId").is_some()
        || v.get("parentUuid").is_some()
        || (matches!(t, "assistant" | "user") && v.get("message").is_some_and(Value::is_object))
        || (matches!(t, "system" | "result") && v.get("subtype").is_some())
    {
        return Some(Provider::Claude);
    }
    None
}

/// A guess from a record that names a Claude Code type without its shape
/// (`{"type":"result"}` alone): used only when no record is conclusive.
fn guess_record(v: &Value) -> Option<Provider> {
    matches!(
        s(v, "type"),
        Some("system" | "assistant" | "user" | "result")
    )
    .then_some(Provider::Claude)
}

/// Detects the provider from the first records, then delegates.
///
/// Input is buffered until a record identifies the provider, within the
/// first [`DETECT_MAX_RECORDS`] records and [`DETECT_MAX_BYTES`] bytes
/// (never more is buffered: [`AutoNormalizer::buffered`]). A record that
/// only names a Claude Code type (`{"type":"result"}` without its fields)
/// is a guess, used when no later record within the bounds is conclusive.
/// When no record is conclusive within those bounds, or by the end of a
/// shorter stream, a single [`DiagnosticKind::Unknown`] diagnostic says what
/// was guessed (or that nothing was, and the input is normalized as Claude
/// so its records are still counted) and suggests naming the provider. The decision
/// depends only on the records, never on how the input is chunked.
pub struct AutoNormalizer {
    buffered: Vec<u8>,
    detector: Detector,
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
            detector: Detector::default(),
            inner: None,
        }
    }

    /// The detected provider, once known.
    pub fn detected(&self) -> Option<Provider> {
        self.inner.as_ref().map(|n| n.provider())
    }

    /// Bytes held while detecting (at most [`DETECT_MAX_BYTES`]; 0 once
    /// the provider is known).
    pub fn buffered(&self) -> usize {
        self.buffered.len()
    }

    fn start(&mut self, p: Provider, out: &mut Vec<Output>) {
        let mut n = p.normalizer();
        n.feed(&std::mem::take(&mut self.buffered), out);
        self.buffered = Vec::new();
        self.detector = Detector::default();
        self.inner = Some(n);
    }

    /// Starts the guessed provider, else the fallback one, with a
    /// diagnostic saying what was guessed or why nothing was.
    fn fall_back(&mut self, why: &str, out: &mut Vec<Output>) {
        let (provider, detail) = match self.detector.guess.take() {
            Some((p, record)) => (
                p,
                format!(
                    "provider not conclusively detected{why}; guessed {p} from a `{record}` record (name the provider to be sure)"
                ),
            ),
            None => (
                Provider::Claude,
                format!("provider not detected{why}; parsed as claude (name the provider)"),
            ),
        };
        out.push(Output::Diagnostic(Diagnostic {
            kind: DiagnosticKind::Unknown,
            position: Position {
                line: 1,
                offset: 0,
                element: None,
            },
            record: "-".to_owned(),
            detail,
        }));
        self.start(provider, out);
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
        // Only the bytes up to the bound are looked at (and kept).
        let room = DETECT_MAX_BYTES - self.buffered.len();
        let (head, tail) = bytes.split_at(bytes.len().min(room));
        self.buffered.extend_from_slice(head);
        match self.detector.feed(head) {
            Verdict::Detected(p) => self.start(p, out),
            Verdict::Exhausted => {
                self.fall_back(&format!(" in the first {DETECT_MAX_RECORDS} records"), out)
            }
            Verdict::Undecided if self.buffered.len() >= DETECT_MAX_BYTES => {
                self.fall_back(&format!(" in the first {DETECT_MAX_BYTES} bytes"), out)
            }
            Verdict::Undecided => {}
        }
        if let Some(n) = &mut self.inner
            && !tail.is_empty()
        {
            n.feed(tail, out);
        }
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        if self.inner.is_none() {
            match self.detector.finish() {
                Verdict::Detected(p) => self.start(p, out),
                _ if self.buffered.iter().all(u8::is_ascii_whitespace) => {
                    self.start(Provider::Claude, out)
                }
                _ => self.fall_back("", out),
            }
        }
        if let Some(n) = &mut self.inner {
            n.finish(out);
        }
    }
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

    fn feed_all(auto: &mut AutoNormalizer, input: &[u8], chunk: usize) -> Vec<Output> {
        let mut out = Vec::new();
        for c in input.chunks(chunk) {
            auto.feed(c, &mut out);
            assert!(auto.buffered() <= DETECT_MAX_BYTES);
        }
        auto.finish(&mut out);
        out
    }

    fn fallbacks(out: &[Output]) -> Vec<&str> {
        out.iter()
            .filter_map(Output::as_diagnostic)
            .filter(|d| d.detail.starts_with("provider not detected"))
            .map(|d| d.detail.as_str())
            .collect()
    }

    #[test]
    fn detection_gives_up_after_the_record_bound_without_rereading() {
        // 16 000 inconclusive lines fed one by one took 69 s when every
        // chunk re-parsed the whole buffer; the decision now falls at the
        // 1000th record, and nothing is buffered after it.
        let line = b"{\"hello\":1}\n";
        let mut auto = AutoNormalizer::new();
        let mut out = Vec::new();
        for i in 1..=16_000 {
            auto.feed(line, &mut out);
            assert!(auto.buffered() <= DETECT_MAX_BYTES);
            assert_eq!(
                auto.detected().is_some(),
                i >= DETECT_MAX_RECORDS,
                "line {i}"
            );
            if auto.detected().is_some() {
                assert_eq!(auto.buffered(), 0);
            }
        }
        auto.finish(&mut out);
        assert_eq!(
            fallbacks(&out),
            [
                "provider not detected in the first 1000 records; parsed as claude (name the provider)"
            ]
        );
        // Every record is still reported (none lost by the fallback).
        let unknown = out
            .iter()
            .filter_map(Output::as_diagnostic)
            .filter(|d| d.kind == DiagnosticKind::Unknown && d.record == "-" && d.detail.is_empty())
            .count();
        assert_eq!(unknown, 16_000);
        // A conclusive record after the bound does not change the decision.
        let mut late = line.repeat(DETECT_MAX_RECORDS);
        late.extend_from_slice(b"{\"type\":\"thread.started\"}\n");
        let mut auto = AutoNormalizer::new();
        feed_all(&mut auto, &late, 64);
        assert_eq!(auto.detected(), Some(Provider::Claude));
        late.drain(..line.len());
        let mut auto = AutoNormalizer::new();
        feed_all(&mut auto, &late, 64);
        assert_eq!(auto.detected(), Some(Provider::Codex));
    }

    #[test]
    fn detection_gives_up_after_the_byte_bound_whatever_the_chunking() {
        // 4 KiB records: the byte bound (256 records) comes before the
        // record bound; a record straddles it.
        let record = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(4000));
        let input = record.repeat(400).into_bytes();
        let mut whole = None;
        for chunk in [input.len(), 1 << 16, 4099, 7] {
            let mut auto = AutoNormalizer::new();
            let out = feed_all(&mut auto, &input, chunk);
            assert_eq!(auto.detected(), Some(Provider::Claude));
            assert_eq!(
                fallbacks(&out),
                [
                    "provider not detected in the first 1048576 bytes; parsed as claude (name the provider)"
                ]
            );
            let records = out
                .iter()
                .filter_map(Output::as_diagnostic)
                .filter(|d| d.kind == DiagnosticKind::Unknown && d.record == "-")
                .count();
            assert_eq!(records, 401, "chunk {chunk}");
            match &whole {
                None => whole = Some(out),
                Some(w) => assert_eq!(w, &out, "chunk {chunk}"),
            }
        }
        assert_eq!(detect(&input), None);
    }

    #[test]
    fn gemini_records_named_like_claude_ones_are_gemini() {
        // Issue #18 item 5: both were read as Claude.
        let result =
            b"{\"type\":\"result\",\"status\":\"success\",\"stats\":{\"input_tokens\":5}}\n";
        assert_eq!(detect(result), Some(Provider::Gemini));
        let user = b"{\"type\":\"user\",\"role\":\"user\",\"content\":\"Hello\"}\n{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"Hi\"}\n";
        assert_eq!(detect(user), Some(Provider::Gemini));
        // Claude Code's own records of those types keep being Claude.
        for claude in [
            &b"{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"x\"}\n"[..],
            b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"Hello\"}}\n",
        ] {
            assert_eq!(detect(claude), Some(Provider::Claude));
        }
    }

    #[test]
    fn a_guess_from_a_bare_type_is_used_only_when_nothing_is_conclusive_and_is_said() {
        // A bare `result` guesses Claude, but a later conclusive record wins.
        let input = b"{\"type\":\"result\"}\n{\"type\":\"init\",\"session_id\":\"s\"}\n";
        let mut auto = AutoNormalizer::new();
        let out = feed_all(&mut auto, input, 3);
        assert_eq!(auto.detected(), Some(Provider::Gemini));
        assert!(fallbacks(&out).is_empty());
        let mut auto = AutoNormalizer::new();
        let out = feed_all(&mut auto, b"{\"hello\":1}\n{\"type\":\"result\"}\n", 3);
        assert_eq!(auto.detected(), Some(Provider::Claude));
        let said: Vec<_> = out
            .iter()
            .filter_map(Output::as_diagnostic)
            .filter(|d| d.detail.contains("guessed claude from a `result` record"))
            .collect();
        assert_eq!(said.len(), 1, "{out:?}");
        assert_eq!(detect(b"{\"type\":\"result\"}\n"), Some(Provider::Claude));
    }
}
