//! Byte-level helpers of the framer: the control-byte repair pass, the
//! lossy-UTF-8 retry, the newline search, per-line salvage and diagnostics.

use super::{Frame, emit_value};
use crate::json::Value;
use crate::output::{Diagnostic, DiagnosticKind, Position};

/// Re-splits a buffer that did not parse as one record into lines; each
/// line is parsed on its own (so valid lines survive), the rest reported.
pub(super) fn fallback_lines(buf: &[u8], start: Position, out: &mut Vec<Frame>, why: &str) {
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

pub(super) fn malformed_line(line: &[u8], pos: Position, why: &str, out: &mut Vec<Frame>) {
    out.push(diag(
        DiagnosticKind::Malformed,
        pos,
        "-",
        &format!("{why}: {}", snippet(line)),
    ));
}

pub(super) fn repaired_diag(pos: Position, control: bool, lossy: bool) -> Frame {
    let detail = match (control, lossy) {
        (true, true) => "raw control bytes escaped; invalid UTF-8 replaced by U+FFFD",
        (true, false) => "raw control bytes inside a string escaped (U+0000 preserved)",
        _ => "invalid UTF-8 replaced by U+FFFD",
    };
    diag(DiagnosticKind::Repaired, pos, "-", detail)
}

pub(super) fn diag(kind: DiagnosticKind, position: Position, record: &str, detail: &str) -> Frame {
    Frame::Diagnostic(Diagnostic {
        kind,
        position,
        record: record.to_owned(),
        detail: detail.to_owned(),
    })
}

/// Parses JSON; on invalid UTF-8 retries with lossy replacement.
pub(super) fn parse(bytes: &[u8]) -> Result<(Value, bool), serde_json::Error> {
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

/// Position of the first `\n` (memchr: SIMD where the CPU has it; records are long and this
/// search is the framer's hottest loop).
pub(super) fn find_newline(hay: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', hay)
}

pub(super) fn is_sse_field(line: &[u8]) -> bool {
    line.starts_with(b":")
        || [&b"event:"[..], b"data:", b"id:", b"retry:"]
            .iter()
            .any(|f| line.starts_with(f))
}

/// At most 80 characters of input, for diagnostics.
pub(super) fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut s: String = text.chars().take(80).collect();
    if text.chars().count() > 80 {
        s.push('…');
    }
    s
}
