//! The search's streaming scan: a run's bytes read in chunks of [`CHUNK`], each chunk
//! lowercased (ASCII) and searched with `memchr`'s `memmem` for the query as it is written
//! inside a JSON string; each line that holds it is handed on once. Memory is one chunk plus
//! the line being completed (a line longer than the cap is skipped, never buffered), whatever
//! the store's size.

use std::io::Read;
use std::ops::ControlFlow;

use memchr::memmem;

/// Bytes read at a time.
pub const CHUNK: usize = 1 << 20;

/// A query, ready to scan for.
pub struct Needle {
    /// The query, ASCII-lowercased (to find it in a decoded string).
    pub text: String,
    finder: memmem::Finder<'static>,
}

impl Needle {
    /// The needle of `query`; `None` for an empty one.
    pub fn new(query: &str) -> Option<Needle> {
        if query.is_empty() {
            return None;
        }
        let text = query.to_ascii_lowercase();
        // As the query appears inside a JSON string of a line (quotes, backslashes and control
        // characters escaped as serde_json writes them).
        let quoted = serde_json::to_string(&text).ok()?;
        let inner = quoted.get(1..quoted.len() - 1)?.as_bytes().to_vec();
        Some(Needle {
            text,
            finder: memmem::Finder::new(&inner).into_owned(),
        })
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

/// Hands `hit` every line of `reader` (without `\n`) that holds `needle`, ignoring ASCII
/// case; lines over `cap` bytes are skipped. `hit` may stop the scan.
pub fn scan(
    mut reader: impl Read,
    needle: &Needle,
    cap: usize,
    hit: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
) -> std::io::Result<Scanned> {
    let mut scanned = Scanned::default();
    let (mut buf, mut lower) = (Vec::with_capacity(CHUNK * 2), Vec::with_capacity(CHUNK * 2));
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
        lower.clear();
        lower.extend(buf[..end].iter().map(u8::to_ascii_lowercase));
        if lines_with(&buf[..end], &lower, needle, hit).is_break() {
            break;
        }
        buf.drain(..end);
        if eof {
            break;
        }
    }
    Ok(scanned)
}

/// Each line of `region` whose lowercased bytes hold the needle, once.
fn lines_with(
    region: &[u8],
    lower: &[u8],
    needle: &Needle,
    hit: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let mut pos = 0;
    while pos < region.len() {
        let Some(found) = needle.finder.find(&lower[pos..]) else {
            break;
        };
        let at = pos + found;
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
        let needle = Needle::new(query).unwrap_or_else(|| panic!("empty"));
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
}
