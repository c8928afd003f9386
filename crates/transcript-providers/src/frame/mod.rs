//! Framing: bytes in arbitrary chunks → JSON records.
//!
//! One incremental [`Framer`] handles every container format the providers
//! use, decided from the first non-blank line:
//!
//! - **JSON records**: NDJSON lines, pretty-printed documents spanning many
//!   lines, concatenated documents, and top-level arrays (each element
//!   becomes its own record, with [`Position::element`] set).
//! - **SSE**: `event:` / `data:` lines, events dispatched on a blank line
//!   (or at the end of the stream), multi-line `data` joined with `\n`,
//!   `data: [DONE]` and `:` comments reported as metadata.
//!
//! Robustness rules (why they exist):
//! - A raw newline inside a JSON string cannot be valid JSON, so it ends the
//!   current record as malformed; the next line is parsed afresh. This keeps
//!   one truncated NDJSON line from swallowing the rest of the stream.
//! - A record spanning several lines that fails to parse is re-split into
//!   lines, each parsed on its own, so valid lines inside are not lost.
//! - A line starting at column 0 with `{` while a multi-line object is still
//!   open means the open object was truncated (pretty printers indent nested
//!   values): the open part is flushed as above and a new record starts.
//! - Raw control bytes inside strings (Codex has been seen emitting 0x00) are
//!   escaped as `\u00XX`, so U+0000 is preserved and the output stays valid
//!   JSON; invalid UTF-8 is replaced by U+FFFD. Both yield a
//!   [`DiagnosticKind::Repaired`] diagnostic.
//!
//! - A record, SSE line or SSE event's data longer than the cap
//!   ([`transcript_domain::MAX_LINE_BYTES`], the line cap shared with the
//!   transcript writer and reader; [`Framer::with_max_record`] for tests) is
//!   reported ([`DiagnosticKind::Malformed`]) and not buffered: a JSON
//!   record is skipped to the end of the line where it passed the cap, an
//!   SSE event to its blank line. Of a line that is not JSON only a snippet
//!   is kept. Memory therefore stays bounded whatever the input (a
//!   never-closed array, an event without its blank line).
//!
//! The framer is a byte-at-a-time state machine, so its output does not
//! depend on how the input is chunked (tested by the chunking-invariance
//! tests).

use transcript_domain::MAX_LINE_BYTES;

use crate::json::Value;
use crate::output::{Diagnostic, DiagnosticKind, Position};

mod sse;
mod text;

pub use text::sanitize;
use text::{diag, fallback_lines, find_newline, malformed_line, parse, repaired_diag, snippet};

/// Bytes kept of a line that is not JSON: enough for its snippet.
const GARBAGE_KEPT: usize = 512;

/// One framed JSON record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Where the record starts.
    pub position: Position,
    /// The SSE `event:` name, for records framed from SSE.
    pub event: Option<String>,
    /// The parsed JSON value (objects in practice; any value is passed on).
    pub value: Value,
}

/// What the framer produces.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A parsed record.
    Record(Record),
    /// Input that did not frame into a record, or was repaired.
    Diagnostic(Diagnostic),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Undecided,
    Json,
    Sse,
}

/// Incremental framer for JSON records and SSE events (see module docs).
#[derive(Debug)]
pub struct Framer {
    mode: Mode,
    /// Offset and line of the next byte.
    offset: u64,
    line: u64,
    at_line_start: bool,
    json: JsonScan,
    /// Current line in undecided / SSE mode.
    line_buf: Vec<u8>,
    line_start: Position,
    line_active: bool,
    /// The current line exceeded the cap; its tail was not kept.
    line_over: bool,
    sse: SseEvent,
    /// The largest record, SSE line or SSE event data kept, in bytes.
    max_record: usize,
    /// Discarding the rest of the line of an oversized JSON record.
    skipping: bool,
}

#[derive(Debug, Default)]
struct JsonScan {
    active: bool,
    garbage: bool,
    in_str: bool,
    esc: bool,
    depth: u32,
    multiline: bool,
    repaired: bool,
    object_doc: bool,
    start: Position,
    buf: Vec<u8>,
}

#[derive(Debug, Default)]
struct SseEvent {
    start: Option<Position>,
    event: Option<String>,
    data: Option<Vec<u8>>,
    /// Its data exceeded the cap: reported and skipped at dispatch.
    oversized: bool,
}

impl Default for Framer {
    fn default() -> Self {
        Self::new()
    }
}

impl Framer {
    /// A framer that decides between JSON and SSE from the first non-blank
    /// line, with the shared record cap [`MAX_LINE_BYTES`].
    pub fn new() -> Self {
        Self::with_max_record(MAX_LINE_BYTES)
    }

    /// A framer whose records (and SSE lines and event data) may be at most
    /// `max_record` bytes; larger ones are reported
    /// ([`DiagnosticKind::Malformed`]) and skipped without being buffered,
    /// so memory stays bounded by the cap whatever the input.
    pub fn with_max_record(max_record: usize) -> Self {
        Self {
            mode: Mode::Undecided,
            offset: 0,
            line: 1,
            at_line_start: true,
            json: JsonScan::default(),
            line_buf: Vec::new(),
            line_start: Position::default(),
            line_active: false,
            line_over: false,
            sse: SseEvent::default(),
            max_record: max_record.max(1),
            skipping: false,
        }
    }

    /// Bytes currently held for an unfinished record, line or event: at
    /// most twice the cap (an SSE event's data and the line being read);
    /// exposed so tests can check the bound.
    pub fn buffered(&self) -> usize {
        self.json.buf.len() + self.line_buf.len() + self.sse.data.as_ref().map_or(0, Vec::len)
    }

    /// Input bytes of the open JSON record once `more` further bytes are in.
    /// Appends the run of `bytes[i..]` before the first byte that `stops` to the open record.
    /// Returns where to go on (`i` itself when the run made the record oversized, which was
    /// reported and reset), or `None` when there is no run to copy at `i`.
    fn copy_run(
        &mut self,
        bytes: &[u8],
        i: usize,
        stops: impl Fn(u8) -> bool,
        out: &mut Vec<Frame>,
    ) -> Option<usize> {
        let rest = &bytes[i..];
        let run = rest.iter().position(|&b| stops(b)).unwrap_or(rest.len());
        if self.record_len(run) > self.max_record as u64 {
            self.oversized(out);
            return Some(i);
        }
        if run == 0 {
            return None;
        }
        self.json.buf.extend_from_slice(&rest[..run]);
        self.offset += run as u64;
        self.at_line_start = false;
        Some(i + run)
    }

    fn record_len(&self, more: usize) -> u64 {
        self.offset - self.json.start.offset + more as u64
    }

    /// The open JSON record passed the cap: report it, drop what was kept
    /// and skip to the end of the current line (a raw newline cannot be
    /// inside a JSON string, so framing restarts cleanly on the next line).
    fn oversized(&mut self, out: &mut Vec<Frame>) {
        let scan = std::mem::take(&mut self.json);
        out.push(diag(
            DiagnosticKind::Malformed,
            scan.start,
            "-",
            &format!(
                "record exceeds {} bytes: skipped to the end of its line: {}",
                self.max_record,
                snippet(&scan.buf)
            ),
        ));
        self.skipping = true;
    }

    /// Appends to the current line, keeping at most the cap.
    fn push_line(&mut self, bytes: &[u8]) {
        let room = self.max_record.saturating_sub(self.line_buf.len());
        if bytes.len() > room {
            self.line_over = true;
        }
        self.line_buf
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn here(&self) -> Position {
        Position {
            line: self.line,
            offset: self.offset,
            element: None,
        }
    }

    /// Frames the next chunk of input.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        let mut i = 0;
        while i < bytes.len() {
            i = match self.mode {
                Mode::Json if self.skipping => self.skip_line(bytes, i),
                Mode::Json => self.json_step(bytes, i, out),
                Mode::Sse => self.sse_step(bytes, i, out),
                Mode::Undecided => {
                    self.line_byte(bytes[i], out);
                    i + 1
                }
            };
        }
    }

    /// Skips the rest of a line being discarded; returns where feeding goes on.
    fn skip_line(&mut self, bytes: &[u8], i: usize) -> usize {
        let rest = &bytes[i..];
        match find_newline(rest) {
            Some(nl) => {
                self.offset += nl as u64 + 1;
                self.line += 1;
                self.at_line_start = true;
                self.skipping = false;
                i + nl + 1
            }
            None => {
                self.offset += rest.len() as u64;
                self.at_line_start = false;
                bytes.len()
            }
        }
    }

    /// JSON mode from `bytes[i]`: a whole record, a run of bytes, or one byte; returns where
    /// feeding goes on.
    fn json_step(&mut self, bytes: &[u8], i: usize, out: &mut Vec<Frame>) -> usize {
        if let Some(next) = self.whole_line_record(bytes, i, out) {
            return next;
        }
        // Copy runs of bytes that cannot change the state at once: inside a
        // string only quotes, escapes and controls matter; outside, only quotes,
        // brackets and newlines.
        if self.json.active
            && self.json.in_str
            && !self.json.esc
            && let Some(next) =
                self.copy_run(bytes, i, |b| b == b'"' || b == b'\\' || b < 0x20, out)
        {
            return next;
        }
        if self.json.active
            && !self.json.in_str
            && !self.json.garbage
            && let Some(next) = self.copy_run(
                bytes,
                i,
                |b| matches!(b, b'"' | b'{' | b'[' | b'}' | b']' | b'\n'),
                out,
            )
        {
            return next;
        }
        // The byte below would be the record's byte past the cap.
        if self.json.active && !self.json.garbage && self.record_len(1) > self.max_record as u64 {
            self.oversized(out);
            return i;
        }
        self.json_byte(bytes[i], out);
        i + 1
    }

    /// Fast path: a whole single-line record inside this chunk that serde accepts as is. The
    /// byte scanner would frame exactly the same record (a valid single-line value triggers
    /// none of its repair rules), so chunking cannot change the output.
    fn whole_line_record(&mut self, bytes: &[u8], i: usize, out: &mut Vec<Frame>) -> Option<usize> {
        if !self.json.active
            && matches!(bytes[i], b'{' | b'[')
            && let Some(nl) = find_newline(&bytes[i..])
            && let record = bytes[i..i + nl].trim_ascii_end()
            && record.len() <= self.max_record
            && let Ok(value) = crate::json::parse_record(record)
        {
            emit_value(value, self.here(), None, out);
            self.offset += nl as u64 + 1;
            self.line += 1;
            self.at_line_start = true;
            return Some(i + nl + 1);
        }
        None
    }

    /// SSE mode: whole lines at once; returns where feeding goes on.
    fn sse_step(&mut self, bytes: &[u8], i: usize, out: &mut Vec<Frame>) -> usize {
        let rest = &bytes[i..];
        if !self.line_active {
            self.line_active = true;
            self.line_start = self.here();
            self.line_buf.clear();
            self.line_over = false;
        }
        match find_newline(rest) {
            Some(nl) => {
                self.push_line(&rest[..nl]);
                self.offset += nl as u64 + 1;
                self.line += 1;
                self.at_line_start = true;
                self.end_line(out);
                i + nl + 1
            }
            None => {
                self.push_line(rest);
                self.offset += rest.len() as u64;
                self.at_line_start = false;
                bytes.len()
            }
        }
    }

    /// Flushes whatever is pending at the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        match self.mode {
            Mode::Json => {
                self.skipping = false;
                if self.json.active {
                    let scan = std::mem::take(&mut self.json);
                    if scan.garbage {
                        malformed_line(&scan.buf, scan.start, "not JSON", out);
                    } else {
                        // Unterminated record: salvage complete lines.
                        fallback_lines(&scan.buf, scan.start, out, "truncated at end of stream");
                    }
                }
            }
            Mode::Undecided | Mode::Sse => {
                if self.line_active {
                    self.end_line(out);
                }
                if self.mode == Mode::Sse {
                    self.dispatch_sse(out);
                }
            }
        }
    }

    fn advance(&mut self, b: u8) {
        self.offset += 1;
        if b == b'\n' {
            self.line += 1;
            self.at_line_start = true;
        } else {
            self.at_line_start = false;
        }
    }

    // ---- JSON records ----------------------------------------------------

    fn json_byte(&mut self, b: u8, out: &mut Vec<Frame>) {
        if !self.json.active {
            if b.is_ascii_whitespace() {
                self.advance(b);
                return;
            }
            self.json = JsonScan {
                active: true,
                garbage: !(b == b'{' || b == b'['),
                object_doc: b == b'{',
                start: self.here(),
                buf: std::mem::take(&mut self.json.buf),
                ..JsonScan::default()
            };
            self.json.buf.clear();
        }
        if self.json.garbage {
            return self.garbage_byte(b, out);
        }
        if self.json.in_str {
            return self.string_byte(b, out);
        }
        let s = &mut self.json;
        if b == b'{' && self.at_line_start && s.multiline && s.object_doc && s.depth > 0 {
            // Column-0 `{` inside an open multi-line object: the object was
            // truncated; salvage it and start a new record here.
            let scan = std::mem::take(&mut self.json);
            fallback_lines(&scan.buf, scan.start, out, "record truncated");
            self.json.buf = scan.buf;
            self.json_byte(b, out);
            return;
        }
        let s = &mut self.json;
        s.buf.push(b);
        match b {
            b'"' => s.in_str = true,
            b'{' | b'[' => s.depth += 1,
            b'}' | b']' => {
                s.depth = s.depth.saturating_sub(1);
                if s.depth == 0 {
                    self.advance(b);
                    let scan = std::mem::take(&mut self.json);
                    complete(&scan, out);
                    self.json.buf = scan.buf;
                    return;
                }
            }
            b'\n' => s.multiline = true,
            _ => {}
        }
        self.advance(b);
    }

    /// A byte of a line that is not JSON: kept as a snippet, reported at its newline.
    fn garbage_byte(&mut self, b: u8, out: &mut Vec<Frame>) {
        self.advance(b);
        if b == b'\n' {
            let scan = std::mem::take(&mut self.json);
            let mut line = &scan.buf[..];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            malformed_line(line, scan.start, "not JSON", out);
            self.json.buf = scan.buf;
        } else if self.json.buf.len() < GARBAGE_KEPT {
            // Only a snippet of a line that is not JSON is reported.
            self.json.buf.push(b);
        }
    }

    /// A byte inside a JSON string: escapes, the closing quote, controls (escaped), and a raw
    /// newline that ends the record.
    fn string_byte(&mut self, b: u8, out: &mut Vec<Frame>) {
        let s = &mut self.json;
        if s.esc {
            s.esc = false;
            push_str_byte(s, b);
        } else if b == b'\\' {
            s.esc = true;
            s.buf.push(b);
        } else if b == b'"' {
            s.in_str = false;
            s.buf.push(b);
        } else if b == b'\n' {
            // A raw newline cannot occur inside a JSON string.
            let scan = std::mem::take(&mut self.json);
            fallback_lines(&scan.buf, scan.start, out, "line ends inside a string");
            self.json.buf = scan.buf;
        } else {
            push_str_byte(s, b);
        }
        self.advance(b);
    }
}

fn push_str_byte(s: &mut JsonScan, b: u8) {
    if b < 0x20 {
        s.repaired = true;
        s.buf.extend_from_slice(format!("\\u{b:04x}").as_bytes());
    } else {
        s.buf.push(b);
    }
}

fn complete(scan: &JsonScan, out: &mut Vec<Frame>) {
    match parse(&scan.buf) {
        Ok((value, lossy)) => {
            if scan.repaired || lossy {
                out.push(repaired_diag(scan.start, scan.repaired, lossy));
            }
            emit_value(value, scan.start, None, out);
        }
        Err(e) => {
            if scan.multiline {
                fallback_lines(&scan.buf, scan.start, out, "document does not parse");
            } else {
                out.push(diag(
                    DiagnosticKind::Malformed,
                    scan.start,
                    "-",
                    &format!("invalid JSON ({e}): {}", snippet(&scan.buf)),
                ));
            }
        }
    }
}

fn emit_value(value: Value, start: Position, event: Option<String>, out: &mut Vec<Frame>) {
    match value {
        Value::Array(items) => {
            for (i, v) in items.into_iter().enumerate() {
                out.push(Frame::Record(Record {
                    position: Position {
                        element: Some(u32::try_from(i).unwrap_or(u32::MAX)),
                        ..start
                    },
                    event: event.clone(),
                    value: v.into_value(),
                }));
            }
        }
        v => out.push(Frame::Record(Record {
            position: start,
            event,
            value: v,
        })),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Frame> {
        let mut f = Framer::new();
        let mut out = Vec::new();
        f.feed(input, &mut out);
        f.finish(&mut out);
        out
    }

    fn kinds(fr: &[Frame]) -> Vec<String> {
        fr.iter()
            .map(|f| match f {
                Frame::Record(r) => format!("rec@{}", r.position.line),
                Frame::Diagnostic(d) => format!("{}@{}", d.kind.as_str(), d.position.line),
            })
            .collect()
    }

    #[test]
    fn ndjson_pretty_and_arrays() {
        let input = b"{\"a\":1}\n\n{\n  \"b\": {\n    \"c\": 2\n  }\n}\n[{\"x\":1},{\"y\":2}]";
        let fr = frames(input);
        assert_eq!(kinds(&fr), ["rec@1", "rec@3", "rec@8", "rec@8"]);
        let Frame::Record(r) = &fr[3] else { panic!() };
        assert_eq!(r.position.element, Some(1));
    }

    #[test]
    fn garbage_and_truncated_lines_do_not_swallow_following_lines() {
        let input = b"this is not json\n{\"a\":\"unterminated\n{\"b\":1}\n{\"c\":1,\n{\"d\":2}\n";
        let fr = frames(input);
        assert_eq!(
            kinds(&fr),
            [
                "malformed@1",
                "malformed@2",
                "rec@3",
                "malformed@4",
                "rec@5"
            ]
        );
    }

    #[test]
    fn nul_inside_string_is_preserved() {
        let fr = frames(b"{\"t\":\"a\x00b\"}\n");
        assert_eq!(kinds(&fr), ["repaired@1", "rec@1"]);
        let Frame::Record(r) = &fr[1] else { panic!() };
        assert_eq!(r.value.get("t").and_then(Value::as_str), Some("a\u{0}b"));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let fr = frames(b"{\"t\":\"a\xffb\"}\n");
        assert_eq!(kinds(&fr), ["repaired@1", "rec@1"]);
    }

    #[test]
    fn sse_events() {
        let input = b"event: a\ndata: {\"x\":1}   \n\n: comment\ndata: [DONE]\n\nevent: b\ndata: {\"y\":\ndata: 2}\nbogus: 1\n";
        let fr = frames(input);
        assert_eq!(
            kinds(&fr),
            ["rec@1", "metadata@4", "metadata@5", "unknown@10", "rec@7"]
        );
        let Frame::Record(r) = &fr[4] else { panic!() };
        assert_eq!(r.event.as_deref(), Some("b"));
        assert_eq!(r.value.get("y").and_then(Value::as_u64), Some(2));
    }

    #[test]
    fn find_newline_matches_naive_search() {
        for len in 0..40 {
            for at in 0..=len {
                let mut v = vec![b'x'; len];
                if at < len {
                    v[at] = b'\n';
                }
                let naive = v.iter().position(|&b| b == b'\n');
                assert_eq!(find_newline(&v), naive, "len {len} at {at}");
            }
        }
        assert_eq!(find_newline("é\u{80}\n".as_bytes()), Some(4));
    }

    #[test]
    fn eager_lazy_choice_does_not_depend_on_chunking() {
        for extra in 0..3 {
            let head = "{\"input\":{\"a\": 1},\"pad\":\"";
            let pad = crate::json::EAGER_LIMIT + extra - head.len() - 2;
            let record = format!("{head}{}\"}}", "x".repeat(pad));
            // After a first record, so that the whole-chunk feed takes the
            // single-line fast path while byte-by-byte feeding scans.
            let input = format!("{{}}\n{record}  \r\n");
            let whole = frames(input.as_bytes());
            let mut f = Framer::new();
            let mut bytewise = Vec::new();
            for b in input.as_bytes() {
                f.feed(std::slice::from_ref(b), &mut bytewise);
            }
            f.finish(&mut bytewise);
            let raw = |fr: &[Frame]| match &fr[1] {
                Frame::Record(r) => r.value.raw("input").get().to_owned(),
                Frame::Diagnostic(d) => panic!("{d}"),
            };
            assert_eq!(
                raw(&whole),
                raw(&bytewise),
                "record length {}",
                record.len()
            );
        }
    }

    #[test]
    fn sanitize_only_touches_strings() {
        let (b, changed) = sanitize(b"{\"a\":\"x\ty\"}\t");
        assert!(changed);
        assert_eq!(&*b, b"{\"a\":\"x\\u0009y\"}\t");
        assert!(!sanitize(b"{\"a\":1}").1);
    }

    /// Frames `input` with a cap, fed whole, byte by byte and in 7-byte
    /// chunks (all identical); asserts the buffers stay within the bound.
    fn capped(input: &[u8], cap: usize) -> Vec<Frame> {
        let mut results = Vec::new();
        for chunk in [input.len().max(1), 1, 7] {
            let mut f = Framer::with_max_record(cap);
            let mut out = Vec::new();
            for c in input.chunks(chunk) {
                f.feed(c, &mut out);
                assert!(f.buffered() <= 2 * cap, "{} > 2 x {cap}", f.buffered());
            }
            f.finish(&mut out);
            results.push(out);
        }
        assert_eq!(results[0], results[1], "byte by byte");
        assert_eq!(results[0], results[2], "7-byte chunks");
        results.swap_remove(0)
    }

    fn detail(f: &Frame) -> &str {
        match f {
            Frame::Diagnostic(d) => &d.detail,
            Frame::Record(_) => "",
        }
    }

    #[test]
    fn the_default_cap_is_the_shared_line_cap() {
        assert_eq!(Framer::new().max_record, MAX_LINE_BYTES);
        assert_eq!(Framer::default().max_record, MAX_LINE_BYTES);
    }

    #[test]
    fn a_never_closed_array_is_reported_and_framing_goes_on() {
        let mut input = b"[".to_vec();
        input.extend(b"{\"a\":1},".repeat(100));
        input.extend(b"\n{\"b\":2}\n");
        let fr = capped(&input, 64);
        assert_eq!(kinds(&fr), ["malformed@1", "rec@2"]);
        assert!(
            detail(&fr[0]).starts_with("record exceeds 64 bytes"),
            "{fr:?}"
        );
        // Pretty-printed: skipped to the end of the line past the cap, then
        // each further line is framed afresh (reported or salvaged).
        let mut input = b"[\n".to_vec();
        input.extend(b"  {\"a\": 1},\n".repeat(20));
        let fr = capped(&input, 64);
        assert!(
            detail(&fr[0]).starts_with("record exceeds 64 bytes"),
            "{fr:?}"
        );
        assert!(fr.len() > 2);
    }

    #[test]
    fn a_record_at_the_cap_passes_one_byte_more_does_not() {
        let at = format!("{{\"k\":\"{}\"}}", "x".repeat(56));
        assert_eq!(at.len(), 64);
        let over = format!("{{\"k\":\"{}\"}}", "x".repeat(57));
        let input = format!("{at}\n{over}\n{at}  \n");
        let fr = capped(input.as_bytes(), 64);
        assert_eq!(kinds(&fr), ["rec@1", "malformed@2", "rec@3"]);
    }

    #[test]
    fn a_long_line_that_is_not_json_keeps_only_its_snippet() {
        let mut input = b"{}\n".to_vec();
        input.extend(vec![b'x'; 10_000]);
        input.extend(b"\n{}\n");
        let mut f = Framer::with_max_record(1 << 20);
        let mut out = Vec::new();
        for c in input.chunks(100) {
            f.feed(c, &mut out);
            assert!(f.buffered() <= GARBAGE_KEPT);
        }
        f.finish(&mut out);
        assert_eq!(kinds(&out), ["rec@1", "malformed@2", "rec@3"]);
    }

    #[test]
    fn an_sse_event_without_a_blank_line_is_reported_at_its_end() {
        let mut input = b"event: a\n".to_vec();
        input.extend(b"data: {\"x\":1}\n".repeat(50));
        input.extend(b"\ndata: {\"y\":2}\n\n");
        let fr = capped(&input, 64);
        assert_eq!(kinds(&fr), ["malformed@1", "rec@53"]);
        assert!(detail(&fr[0]).starts_with("event data exceeds 64 bytes"));
        // A single data line over the cap, never ended by a blank line.
        let mut input = b"data: ".to_vec();
        input.extend(vec![b'x'; 1000]);
        let fr = capped(&input, 64);
        assert_eq!(kinds(&fr), ["malformed@1"]);
    }

    #[test]
    fn seventeen_mib_of_sse_data_keep_the_default_cap() {
        let mut f = Framer::new();
        let mut out = Vec::new();
        f.feed(b"data: ", &mut out);
        let block = vec![b'x'; 1 << 20];
        for _ in 0..17 {
            f.feed(&block, &mut out);
            assert!(f.buffered() <= 2 * MAX_LINE_BYTES);
        }
        f.feed(b"\n\ndata: {}\n\n", &mut out);
        f.finish(&mut out);
        assert_eq!(kinds(&out), ["malformed@1", "rec@3"]);
    }
}
