//! The line-oriented half of the framer: undecided first lines and SSE
//! (`event:` / `data:` lines, events dispatched on a blank line), with
//! lines and event data bounded by the record cap.

use super::text::{diag, is_sse_field, malformed_line, parse, repaired_diag, sanitize, snippet};
use super::{Frame, Record};
use super::{Framer, Mode};
use crate::output::DiagnosticKind;

impl Framer {
    pub(super) fn line_byte(&mut self, b: u8, out: &mut Vec<Frame>) {
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
            self.line_over = false;
        }
        self.advance(b);
        if b == b'\n' {
            self.end_line(out);
        } else {
            self.push_line(&[b]);
        }
    }

    pub(super) fn end_line(&mut self, out: &mut Vec<Frame>) {
        self.line_active = false;
        let over = std::mem::take(&mut self.line_over);
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
        self.sse_line(&line, over, out);
        self.line_buf = line;
    }

    /// One SSE line; `over` when it was longer than the cap (cut there).
    fn sse_line(&mut self, line: &[u8], over: bool, out: &mut Vec<Frame>) {
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
            b"data" => {
                let joined = self.sse.data.as_ref().map_or(0, |d| d.len() + 1) + value.len();
                if over || self.sse.oversized || joined > self.max_record {
                    // Reported at dispatch; nothing more is kept.
                    self.sse.oversized = true;
                    self.sse.data = None;
                    return;
                }
                match &mut self.sse.data {
                    Some(d) => {
                        d.push(b'\n');
                        d.extend_from_slice(value);
                    }
                    None => self.sse.data = Some(value.to_vec()),
                }
            }
            b"id" | b"retry" => {}
            _ => out.push(diag(
                DiagnosticKind::Unknown,
                self.line_start,
                "sse/field",
                &snippet(line),
            )),
        }
    }

    pub(super) fn dispatch_sse(&mut self, out: &mut Vec<Frame>) {
        let ev = std::mem::take(&mut self.sse);
        let Some(start) = ev.start else { return };
        let record = || format!("sse/{}", ev.event.as_deref().unwrap_or("message"));
        if ev.oversized {
            out.push(diag(
                DiagnosticKind::Malformed,
                start,
                &record(),
                &format!(
                    "event data exceeds {} bytes: skipped to the end of the event",
                    self.max_record
                ),
            ));
            return;
        }
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
}
