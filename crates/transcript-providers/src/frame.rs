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
//! The framer is a byte-at-a-time state machine, so its output does not
//! depend on how the input is chunked (tested by the chunking-invariance
//! tests).

use crate::json::Value;

use crate::output::{Diagnostic, DiagnosticKind, Position};

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
    sse: SseEvent,
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
}

impl Default for Framer {
    fn default() -> Self {
        Self::new()
    }
}

impl Framer {
    /// A framer that decides between JSON and SSE from the first non-blank line.
    pub fn new() -> Self {
        Self {
            mode: Mode::Undecided,
            offset: 0,
            line: 1,
            at_line_start: true,
            json: JsonScan::default(),
            line_buf: Vec::new(),
            line_start: Position::default(),
            line_active: false,
            sse: SseEvent::default(),
        }
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
            match self.mode {
                Mode::Json => {
                    // Fast path: a whole single-line record inside this
                    // chunk that serde accepts as is. The scanner below
                    // would frame exactly the same record (a valid
                    // single-line value triggers none of its repair rules),
                    // so chunking cannot change the output.
                    if !self.json.active
                        && matches!(bytes[i], b'{' | b'[')
                        && let Some(nl) = find_newline(&bytes[i..])
                        && let Ok(value) =
                            crate::json::parse_record(bytes[i..i + nl].trim_ascii_end())
                    {
                        emit_value(value, self.here(), None, out);
                        self.offset += nl as u64 + 1;
                        self.line += 1;
                        self.at_line_start = true;
                        i += nl + 1;
                        continue;
                    }
                    // Copy runs of plain string bytes at once.
                    if self.json.active && self.json.in_str && !self.json.esc {
                        let rest = &bytes[i..];
                        let run = rest
                            .iter()
                            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                            .unwrap_or(rest.len());
                        if run > 0 {
                            self.json.buf.extend_from_slice(&rest[..run]);
                            self.offset += run as u64;
                            self.at_line_start = false;
                            i += run;
                            continue;
                        }
                    }
                    // Same outside strings: only quotes, brackets and
                    // newlines change the state.
                    if self.json.active && !self.json.in_str && !self.json.garbage {
                        let rest = &bytes[i..];
                        let run = rest
                            .iter()
                            .position(|&b| matches!(b, b'"' | b'{' | b'[' | b'}' | b']' | b'\n'))
                            .unwrap_or(rest.len());
                        if run > 0 {
                            self.json.buf.extend_from_slice(&rest[..run]);
                            self.offset += run as u64;
                            self.at_line_start = false;
                            i += run;
                            continue;
                        }
                    }
                    self.json_byte(bytes[i], out)
                }
                Mode::Sse => {
                    // Whole lines at once.
                    let rest = &bytes[i..];
                    if !self.line_active {
                        self.line_active = true;
                        self.line_start = self.here();
                        self.line_buf.clear();
                    }
                    match find_newline(rest) {
                        Some(nl) => {
                            self.line_buf.extend_from_slice(&rest[..nl]);
                            self.offset += nl as u64 + 1;
                            self.line += 1;
                            self.at_line_start = true;
                            self.end_line(out);
                            i += nl + 1;
                        }
                        None => {
                            self.line_buf.extend_from_slice(rest);
                            self.offset += rest.len() as u64;
                            self.at_line_start = false;
                            i = bytes.len();
                        }
                    }
                    continue;
                }
                Mode::Undecided => self.line_byte(bytes[i], out),
            }
            i += 1;
        }
    }

    /// Flushes whatever is pending at the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        match self.mode {
            Mode::Json => {
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

    // ---- undecided / SSE: line oriented --------------------------------

    fn line_byte(&mut self, b: u8, out: &mut Vec<Frame>) {
        if self.mode == Mode::Undecided && !self.line_active {
            if b.is_ascii_whitespace() {
                self.advance(b);
                return;
            }
            if b == b'{' || b == b'[' {
                self.mode = Mode::Json;
                self.json_byte(b, out);
                return;
            }
        }
        if !self.line_active {
            self.line_active = true;
            self.line_start = self.here();
            self.line_buf.clear();
        }
        self.advance(b);
        if b == b'\n' {
            self.end_line(out);
        } else {
            self.line_buf.push(b);
        }
    }

    fn end_line(&mut self, out: &mut Vec<Frame>) {
        self.line_active = false;
        let mut line = std::mem::take(&mut self.line_buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if self.mode == Mode::Undecided {
            if is_sse_field(&line) {
                self.mode = Mode::Sse;
            } else {
                malformed_line(&line, self.line_start, "not JSON", out);
                self.line_buf = line;
                return;
            }
        }
        self.sse_line(&line, out);
        self.line_buf = line;
    }

    fn sse_line(&mut self, line: &[u8], out: &mut Vec<Frame>) {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            self.dispatch_sse(out);
            return;
        }
        if line[0] == b':' {
            out.push(diag(
                DiagnosticKind::Metadata,
                self.line_start,
                "sse/comment",
                "",
            ));
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if self.sse.start.is_none() {
            self.sse.start = Some(self.line_start);
        }
        match field {
            b"event" => self.sse.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"data" => match &mut self.sse.data {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
                None => self.sse.data = Some(value.to_vec()),
            },
            b"id" | b"retry" => {}
            _ => out.push(diag(
                DiagnosticKind::Unknown,
                self.line_start,
                "sse/field",
                &snippet(line),
            )),
        }
    }

    fn dispatch_sse(&mut self, out: &mut Vec<Frame>) {
        let ev = std::mem::take(&mut self.sse);
        let Some(start) = ev.start else { return };
        let record = || format!("sse/{}", ev.event.as_deref().unwrap_or("message"));
        let Some(data) = ev.data else {
            out.push(diag(
                DiagnosticKind::Metadata,
                start,
                &record(),
                "event without data",
            ));
            return;
        };
        if data.trim_ascii() == b"[DONE]" {
            out.push(diag(DiagnosticKind::Metadata, start, "sse/[DONE]", ""));
            return;
        }
        // Valid JSON has no raw control bytes in strings, so the repair
        // pass only runs when a plain parse fails (same result, less work).
        let plain = crate::json::parse_record(&data).map(|v| (v, false));
        let (parsed, repaired) = match plain {
            Ok(v) => (Ok(v), false),
            Err(_) => {
                let (bytes, repaired) = sanitize(&data);
                (parse(&bytes), repaired)
            }
        };
        match parsed {
            Ok((value, lossy)) => {
                if repaired || lossy {
                    out.push(repaired_diag(start, repaired, lossy));
                }
                out.push(Frame::Record(Record {
                    position: start,
                    event: ev.event,
                    value,
                }));
            }
            Err(e) => out.push(diag(
                DiagnosticKind::Malformed,
                start,
                &record(),
                &format!("data is not JSON ({e}): {}", snippet(&data)),
            )),
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
        let s = &mut self.json;
        if s.garbage {
            self.advance(b);
            if b == b'\n' {
                let scan = std::mem::take(&mut self.json);
                let mut line = &scan.buf[..];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                malformed_line(line, scan.start, "not JSON", out);
                self.json.buf = scan.buf;
            } else {
                self.json.buf.push(b);
            }
            return;
        }
        if s.in_str {
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
            return;
        }
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

/// Re-splits a buffer that did not parse as one record into lines; each
/// line is parsed on its own (so valid lines survive), the rest reported.
fn fallback_lines(buf: &[u8], start: Position, out: &mut Vec<Frame>, why: &str) {
    let mut offset = start.offset;
    for (line_no, raw) in (start.line..).zip(buf.split(|&b| b == b'\n')) {
        let pos = Position {
            line: line_no,
            offset,
            element: None,
        };
        offset += raw.len() as u64 + 1;
        // Trailing whitespace trimmed as the scanner's records are, so the
        // eager/lazy parse choice (by size) sees the same bytes.
        let line = raw.trim_ascii_end();
        if line.is_empty() {
            continue;
        }
        let (bytes, repaired) = sanitize(line);
        match parse(&bytes) {
            Ok((value, lossy)) if matches!(value, Value::Object(_) | Value::Array(_)) => {
                if repaired || lossy {
                    out.push(repaired_diag(pos, repaired, lossy));
                }
                emit_value(value, pos, None, out);
            }
            _ => malformed_line(line, pos, why, out),
        }
    }
}

fn malformed_line(line: &[u8], pos: Position, why: &str, out: &mut Vec<Frame>) {
    out.push(diag(
        DiagnosticKind::Malformed,
        pos,
        "-",
        &format!("{why}: {}", snippet(line)),
    ));
}

fn repaired_diag(pos: Position, control: bool, lossy: bool) -> Frame {
    let detail = match (control, lossy) {
        (true, true) => "raw control bytes escaped; invalid UTF-8 replaced by U+FFFD",
        (true, false) => "raw control bytes inside a string escaped (U+0000 preserved)",
        _ => "invalid UTF-8 replaced by U+FFFD",
    };
    diag(DiagnosticKind::Repaired, pos, "-", detail)
}

fn diag(kind: DiagnosticKind, position: Position, record: &str, detail: &str) -> Frame {
    Frame::Diagnostic(Diagnostic {
        kind,
        position,
        record: record.to_owned(),
        detail: detail.to_owned(),
    })
}

/// Parses JSON; on invalid UTF-8 retries with lossy replacement.
fn parse(bytes: &[u8]) -> Result<(Value, bool), serde_json::Error> {
    match crate::json::parse_record(bytes) {
        Ok(v) => Ok((v, false)),
        Err(e) => match std::str::from_utf8(bytes) {
            Ok(_) => Err(e),
            Err(_) => {
                let text = String::from_utf8_lossy(bytes);
                crate::json::parse_record(text.as_bytes()).map(|v| (v, true))
            }
        },
    }
}

/// Escapes raw control bytes found inside JSON strings (the NUL pre-pass).
/// Returns the (possibly rewritten) bytes and whether anything changed.
pub fn sanitize(bytes: &[u8]) -> (std::borrow::Cow<'_, [u8]>, bool) {
    let mut in_str = false;
    let mut esc = false;
    let mut needs = false;
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
                if b < 0x20 {
                    needs = true;
                    break;
                }
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            } else if b < 0x20 {
                needs = true;
                break;
            }
        } else if b == b'"' {
            in_str = true;
        }
    }
    if !needs {
        return (std::borrow::Cow::Borrowed(bytes), false);
    }
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let (mut in_str, mut esc) = (false, false);
    for &b in bytes {
        if in_str {
            if esc {
                esc = false;
                if b < 0x20 {
                    // `\` followed by a raw control byte: escape the byte and
                    // keep the backslash as a literal one.
                    out.extend_from_slice(b"\\");
                    out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                    continue;
                }
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            } else if b < 0x20 {
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                continue;
            }
        } else if b == b'"' {
            in_str = true;
        }
        out.push(b);
    }
    (std::borrow::Cow::Owned(out), true)
}

/// Position of the first `\n`, eight bytes at a time (records are long;
/// this search is the framer's hottest loop).
fn find_newline(hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const NL: u64 = LO * b'\n' as u64;
    let mut chunks = hay.chunks_exact(8);
    let mut base = 0;
    for c in chunks.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        let x = u64::from_le_bytes(word) ^ NL;
        if (x.wrapping_sub(LO) & !x & HI) != 0 {
            return c.iter().position(|&b| b == b'\n').map(|p| base + p);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|p| base + p)
}

fn is_sse_field(line: &[u8]) -> bool {
    line.starts_with(b":")
        || [&b"event:"[..], b"data:", b"id:", b"retry:"]
            .iter()
            .any(|f| line.starts_with(f))
}

/// At most 80 characters of input, for diagnostics.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut s: String = text.chars().take(80).collect();
    if text.chars().count() > 80 {
        s.push('…');
    }
    s
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
}
