//! The search's streaming scan: a run's bytes read in chunks of [`CHUNK`], each searched for
//! the query as it is written inside a JSON string, case ignored by Unicode's simple case
//! folding (`É` finds `é`, `Σ` finds `σ` and `ς`, `k` finds the Kelvin sign; `ß` and `ss` are
//! not one), with the `regex` crate's case-insensitive literal search (its SIMD prefilters
//! over the raw bytes, no lowercased copy); each line that holds it is handed on once. Memory
//! is one chunk plus the line being completed (a line longer than the cap is skipped, never
//! buffered), whatever the store's size.

use std::io::Read;
use std::ops::ControlFlow;

/// Bytes read at a time.
pub const CHUNK: usize = 1 << 20;

/// The longest query, in bytes.
pub const MAX_QUERY: usize = 1000;

/// A query, ready to scan for.
pub struct Needle {
    /// The query as a case-insensitive literal, to find it in a decoded string (its matches
    /// are on character boundaries, whatever lengths folding relates).
    pub text: regex::Regex,
    /// The same as it appears inside a JSON string of a line (quotes, backslashes and control
    /// characters escaped as serde_json writes them).
    raw: regex::bytes::Regex,
}

impl Needle {
    /// The needle of `query`: `Ok(None)` for an empty one, an error (what to tell the user)
    /// for one past [`MAX_QUERY`] bytes.
    pub fn new(query: &str) -> Result<Option<Needle>, String> {
        if query.is_empty() {
            return Ok(None);
        }
        if query.len() > MAX_QUERY {
            return Err(format!("a query has at most {MAX_QUERY} bytes"));
        }
        let quoted = serde_json::to_string(query).map_err(|e| e.to_string())?;
        let inner = quoted.get(1..quoted.len() - 1).unwrap_or(query);
        let raw = regex::bytes::RegexBuilder::new(&regex::escape(inner))
            .case_insensitive(true)
            .build()
            .map_err(|e| format!("cannot search for this query: {e}"))?;
        let text = regex::RegexBuilder::new(&regex::escape(query))
            .case_insensitive(true)
            .build()
            .map_err(|e| format!("cannot search for this query: {e}"))?;
        Ok(Some(Needle { text, raw }))
    }

    /// Where the query is in `text` (case folded), as a byte range on character boundaries.
    pub fn find(&self, text: &str) -> Option<std::ops::Range<usize>> {
        self.text.find(text).map(|m| m.range())
    }
}

/// What a scan read.
#[derive(Debug, Default, Clone, Copy)]
pub struct Scanned {
    /// Bytes read.
    pub bytes: u64,
    /// Lines skipped for being longer than the cap.
    pub skipped: u64,
}

/// Hands `hit` every line of `reader` (without `\n`) that holds `needle`, case folded; lines
/// over `cap` bytes are skipped. `hit` may stop the scan.
pub fn scan(
    mut reader: impl Read,
    needle: &Needle,
    cap: usize,
    hit: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
) -> std::io::Result<Scanned> {
    let mut scanned = Scanned::default();
    let mut buf = Vec::with_capacity(CHUNK * 2);
    let mut skipping = false;
    loop {
        let had = buf.len();
        buf.resize(had + CHUNK, 0);
        let n = reader.read(&mut buf[had..])?;
        buf.truncate(had + n);
        scanned.bytes += n as u64;
        let eof = n == 0;
        if skipping {
            match memchr::memchr(b'\n', &buf) {
                Some(i) => {
                    buf.drain(..=i);
                    skipping = false;
                }
                None => {
                    buf.clear();
                    if eof {
                        break;
                    }
                    continue;
                }
            }
        }
        let end = if eof {
            buf.len()
        } else {
            memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1)
        };
        if end == 0 && !eof {
            if buf.len() > cap {
                scanned.skipped += 1;
                buf.clear();
                skipping = true;
            }
            continue;
        }
        if lines_with(&buf[..end], needle, hit).is_break() {
            break;
        }
        buf.drain(..end);
        if eof {
            break;
        }
    }
    Ok(scanned)
}

/// Each line of `region` that holds the needle, once.
fn lines_with(
    region: &[u8],
    needle: &Needle,
    hit: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let mut pos = 0;
    while pos < region.len() {
        let Some(found) = needle.raw.find(&region[pos..]) else {
            break;
        };
        let at = pos + found.start();
        let start = memchr::memrchr(b'\n', &region[..at]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &region[at..]).map_or(region.len(), |i| at + i);
        hit(&region[start..end])?;
        pos = end + 1;
    }
    ControlFlow::Continue(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8], query: &str, cap: usize) -> Vec<String> {
        let needle = Needle::new(query)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("no needle"));
        let mut out = Vec::new();
        let _ = scan(text, &needle, cap, &mut |l| {
            out.push(String::from_utf8_lossy(l).into_owned());
            ControlFlow::Continue(())
        });
        out
    }

    #[test]
    fn finds_each_matching_line_once_ignoring_case_and_across_chunks() {
        let mut text = Vec::new();
        for i in 0..40_000 {
            text.extend_from_slice(format!("{{\"n\":{i},\"t\":\"filler text\"}}\n").as_bytes());
        }
        text.extend_from_slice(
            b"{\"t\":\"Needle and NEEDLE\"}\n{\"t\":\"a \\\"quoted\\\" needle\"}",
        );
        assert_eq!(lines(&text, "needle", 1 << 16).len(), 2);
        assert_eq!(lines(&text, "\"quoted\"", 1 << 16).len(), 1);
        assert!(text.len() > CHUNK, "the text spans chunks");
    }

    #[test]
    fn a_line_over_the_cap_is_skipped() {
        let mut text = b"{\"t\":\"needle ".to_vec();
        text.extend(std::iter::repeat_n(b'x', CHUNK * 3));
        text.extend_from_slice(b"\"}\n{\"t\":\"short needle\"}\n");
        assert_eq!(lines(&text, "needle", 1000), ["{\"t\":\"short needle\"}"]);
    }

    #[test]
    fn unicode_case_is_folded_across_chunks_and_bad_bytes_are_no_trouble() {
        let mut text = Vec::new();
        while text.len() < CHUNK - 7 {
            text.extend_from_slice("{\"t\":\"日本語 filler\"}\n".as_bytes());
        }
        // A match whose multi-byte characters straddle the first chunk's end.
        text.extend_from_slice("{\"t\":\"ÉCLAIR ΟΔΥΣΣΕΥΣ\"}\n".as_bytes());
        text.extend_from_slice(b"{\"t\":\"\xff\xfe broken \xc3\"}\n");
        text.extend_from_slice("{\"t\":\"un éclair, Οδυσσευς\"}\n".as_bytes());
        assert_eq!(lines(&text, "éclair", 1 << 16).len(), 2);
        assert_eq!(
            lines(&text, "οδυσσεύς", 1 << 16).len(),
            0,
            "accents are not case"
        );
        assert_eq!(lines(&text, "ΟΔΥΣΣΕΥΣ", 1 << 16).len(), 2);
        assert_eq!(lines(&text, "BROKEN", 1 << 16).len(), 1);
        // The Kelvin sign folds to k: the line with "broken".
        assert_eq!(lines(&text, "\u{212A}", 1 << 16).len(), 1);
        assert_eq!(lines(b"{\"t\":\"Kelvin\"}\n", "\u{212A}ELVIN", 99).len(), 1);
    }
}
