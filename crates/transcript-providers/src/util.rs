//! Small helpers shared by the provider mappers: JSON field access, usage
//! conversion, diagnostics, and the generic framed parser.

use crate::json::Value;
use transcript_domain::{RawJson, Timestamp, Usage};

use crate::facts::{Fact, Item};
use crate::frame::{Frame, Framer, Record};
use crate::output::{Diagnostic, DiagnosticKind, Output, Position};
use crate::turns::Turns;
use crate::{Normalizer, Provider};

/// Maps framed records of one provider format to outputs.
pub(crate) trait Mapper: Send {
    /// Handles one record.
    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>);
    /// Flushes provider state at the end of the stream (before the last
    /// turn is emitted).
    fn finish(&mut self, _turns: &mut Turns, _out: &mut Vec<Output>) {}
    /// The provider's time of a record: its RFC 3339 `timestamp` field by
    /// default (Claude Code session logs, Codex rollouts, Gemini, Copilot).
    fn time(&self, v: &Value) -> Option<Timestamp> {
        s(v, "timestamp").and_then(|t| Timestamp::parse(t).ok())
    }
    /// Sees a framing diagnostic (a line that is not JSON, …) before it is
    /// emitted: Copilot quotes an `Error: …` line in its failure.
    fn framing(&mut self, _d: &Diagnostic) {}
}

/// A framer, a turn assembler and a provider mapper: the shape of every parser.
pub(crate) struct Framed<M> {
    provider: Provider,
    framer: Framer,
    frames: Vec<Frame>,
    turns: Turns,
    mapper: M,
    /// The last provider time passed on (items mode): times never go back.
    last_time: Option<Timestamp>,
}

impl<M: Mapper> Framed<M> {
    pub(crate) fn new(provider: Provider, mapper: M) -> Self {
        Self {
            provider,
            framer: Framer::new(),
            frames: Vec::new(),
            turns: Turns::new(provider.name()),
            mapper,
            last_time: None,
        }
    }

    fn drain(&mut self, out: &mut Vec<Output>) {
        for f in self.frames.drain(..) {
            match f {
                Frame::Record(r) => {
                    if self.turns.collecting()
                        && let Some(t) = self.mapper.time(&r.value)
                    {
                        match self.last_time {
                            Some(last) if t < last => diag(
                                out,
                                DiagnosticKind::Warning,
                                r.position,
                                "timestamp",
                                format!(
                                    "time {t} is earlier than the previous record's {last}; the previous time is kept"
                                ),
                            ),
                            Some(last) if t == last => {}
                            _ => {
                                self.last_time = Some(t);
                                self.turns.fact(Fact::Time(t), out);
                            }
                        }
                    }
                    self.mapper.record(r, &mut self.turns, out)
                }
                Frame::Diagnostic(d) => {
                    self.mapper.framing(&d);
                    out.push(Output::Diagnostic(d))
                }
            }
        }
    }

    /// Interleaves the facts recorded while producing `outputs` with them.
    fn merge(&mut self, outputs: Vec<Output>, out: &mut Vec<Item>) {
        let mut facts = self.turns.take_facts().into_iter().peekable();
        for (i, o) in outputs.into_iter().enumerate() {
            while let Some((_, f)) = facts.next_if(|(at, _)| *at <= i) {
                out.push(Item::Fact(f));
            }
            out.push(Item::Output(o));
        }
        out.extend(facts.map(|(_, f)| Item::Fact(f)));
    }
}

impl<M: Mapper> Normalizer for Framed<M> {
    fn provider(&self) -> Provider {
        self.provider
    }

    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Output>) {
        self.framer.feed(bytes, &mut self.frames);
        self.drain(out);
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        self.framer.finish(&mut self.frames);
        if self.turns.collecting() {
            // What the framer flushes at the end is the torn last record.
            for f in &self.frames {
                if let Frame::Diagnostic(d) = f
                    && d.kind == DiagnosticKind::Malformed
                {
                    let torn = Fact::Torn(d.to_string());
                    self.turns.fact(torn, out);
                }
            }
        }
        self.drain(out);
        self.mapper.finish(&mut self.turns, out);
        self.turns.end_turn(out);
        if let Some(missing) = self.turns.unfinished() {
            self.turns.fact(Fact::Unfinished(missing), out);
        }
    }

    fn feed_items(&mut self, bytes: &[u8], out: &mut Vec<Item>) {
        self.turns.collect_facts();
        let mut outputs = Vec::new();
        self.feed(bytes, &mut outputs);
        self.merge(outputs, out);
    }

    fn finish_items(&mut self, out: &mut Vec<Item>) {
        self.turns.collect_facts();
        let mut outputs = Vec::new();
        self.finish(&mut outputs);
        self.merge(outputs, out);
    }
}

pub(crate) fn diag(
    out: &mut Vec<Output>,
    kind: DiagnosticKind,
    position: Position,
    record: impl Into<String>,
    detail: impl Into<String>,
) {
    out.push(Output::Diagnostic(Diagnostic {
        kind,
        position,
        record: record.into(),
        detail: detail.into(),
    }));
}

pub(crate) fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(crate) fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Non-empty string field.
pub(crate) fn ne<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    s(v, key).filter(|x| !x.is_empty())
}

pub(crate) fn raw(v: &Value) -> RawJson {
    v.to_raw()
}

/// The text of a field that should be a string (a text, thinking or
/// message field). Absent or `null` is empty text; a value of another type
/// is kept as its JSON text and flagged [`DiagnosticKind::Malformed`],
/// never turned into empty text (issue #23).
pub(crate) fn text_of<'a>(
    v: &'a Value,
    key: &str,
    pos: Position,
    record: &str,
    out: &mut Vec<Output>,
) -> std::borrow::Cow<'a, str> {
    match v.get(key) {
        Some(Value::String(t)) => std::borrow::Cow::Borrowed(t),
        None | Some(Value::Null) => std::borrow::Cow::Borrowed(""),
        Some(other) => {
            diag(
                out,
                DiagnosticKind::Malformed,
                pos,
                record,
                format!("`{key}` is not a string; kept as its JSON text"),
            );
            std::borrow::Cow::Owned(other.to_string())
        }
    }
}

/// Verbatim-order JSON text of an owned value.
pub(crate) fn raw_of(v: Value) -> RawJson {
    v.to_raw()
}

pub(crate) fn raw_opt(v: Option<&Value>) -> RawJson {
    v.map(raw).unwrap_or_default()
}

/// Tool arguments sent as a JSON-encoded string (OpenAI, Codex, Copilot):
/// the decoded value when the string is valid JSON, else the string itself.
pub(crate) fn json_arguments(v: Option<&Value>) -> RawJson {
    match v {
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(parsed) => raw_of(parsed),
            Err(_) => RawJson::string(text),
        },
        Some(other) => raw(other),
        None => raw_of(Value::Object(Default::default())),
    }
}

/// How many `error` objects nested in each other [`error_text`] looks
/// through before giving the rest as JSON text. Bounds both the walk and
/// the depth of the parsed tree it leaves behind (a lazy value is parsed one
/// level per lookup, and a tree built that way is dropped recursively).
pub(crate) const MAX_ERROR_DEPTH: usize = 16;

/// Short text for an error payload: a string as is, `message` of an object
/// (looking through nested `error` objects, at most [`MAX_ERROR_DEPTH`]
/// levels), else the JSON text of what is left.
pub(crate) fn error_text(v: &Value) -> String {
    let mut v = v;
    for _ in 0..MAX_ERROR_DEPTH {
        match v {
            Value::String(s) => return s.clone(),
            Value::Object(m) => match (s(v, "message"), m.entry("error")) {
                (Some(msg), _) => return msg.to_owned(),
                (None, Some(inner)) => v = inner.value(),
                (None, None) => return v.to_string(),
            },
            Value::Null => return String::new(),
            other => return other.to_string(),
        }
    }
    // Too deep to walk on: the rest verbatim (never walked, any depth).
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Anthropic-style usage (`input_tokens` excludes cache reads and writes). The cache writes'
/// 5-minute / 1-hour split (`cache_creation.ephemeral_{5m,1h}_input_tokens`) is kept when the
/// provider reports 1-hour writes.
pub(crate) fn anthropic_usage(v: &Value) -> Usage {
    let cache_write_tokens = u(v, "cache_creation_input_tokens");
    let split = v
        .get("cache_creation")
        .filter(|_| cache_write_tokens.is_some_and(|n| n > 0));
    let part = |key: &str| split.and_then(|s| u(s, key));
    // Kept when some writes are 1-hour ones (else every write is 5-minute, which is what no
    // split means): the 1-hour part as reported (never more than the total), the rest
    // 5-minute, so the two always add up to the total even when a log's split does not.
    let total = cache_write_tokens.unwrap_or(0);
    let (five, hour) = match part("ephemeral_1h_input_tokens").map(|h| h.min(total)) {
        Some(h) if h > 0 => (Some(total - h), Some(h)),
        _ => (None, None),
    };
    Usage {
        input_tokens: u(v, "input_tokens"),
        output_tokens: u(v, "output_tokens"),
        cache_read_tokens: u(v, "cache_read_input_tokens"),
        cache_write_tokens,
        cache_write_5m_tokens: five,
        cache_write_1h_tokens: hour,
        reasoning_tokens: v
            .get("output_tokens_details")
            .and_then(|d| u(d, "thinking_tokens")),
        cost_usd: None,
    }
}

/// Input tokens excluding cached ones, for providers whose input count
/// includes cache reads (OpenAI, Codex, Gemini).
pub(crate) fn minus(total: Option<u64>, cached: Option<u64>) -> Option<u64> {
    total.map(|t| t.saturating_sub(cached.unwrap_or(0)))
}

/// A synthesized id for a tool call the provider gave none: `synth:` and
/// where it came from (`synth:item@line2`, `synth:line3#0`). Positions are
/// unique within a file, and no provider's ids start with `synth:`, so a
/// synthesized id never equals a real one (issue #18).
pub(crate) fn synth(base: impl std::fmt::Display) -> String {
    format!("synth:{base}")
}

/// The record's `type` (or `-`).
pub(crate) fn rtype(v: &Value) -> &str {
    s(v, "type").unwrap_or("-")
}
