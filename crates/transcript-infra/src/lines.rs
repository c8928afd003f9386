//! The capped line loop every reader of a transcript file shares (the tolerant reader, the
//! replaying subscription's file tail): one line at a time from any [`BufRead`], at most the
//! line cap of it in memory; a longer line is measured and skipped, keeping only its head
//! (enough for its `{"seq":N,` prefix).

use std::io::{self, BufRead};

/// The head of an over-long line that [`CappedLines`] keeps: `{"seq":` (7 bytes), the 20 digits
/// of `u64::MAX` and the comma.
pub(crate) const LINE_HEAD_BYTES: usize = 28;

/// One raw line read by [`CappedLines::next_line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawLine {
    /// `Ok` when the line fit the cap (its bytes are [`CappedLines::line`]); `Err(length)` when it
    /// did not (then [`CappedLines::line`] holds only its first [`LINE_HEAD_BYTES`]; fewer only
    /// under a cap smaller than that).
    pub(crate) content: Result<(), u64>,
    /// Whether it ended with a newline (`false` only for the last bytes of the input).
    pub(crate) terminated: bool,
}

/// Lines of `inner`, each at most `max_line` bytes in memory.
pub(crate) struct CappedLines<R> {
    inner: R,
    max_line: usize,
    /// Bytes consumed so far.
    offset: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> CappedLines<R> {
    /// Lines of `inner` under a cap of `max_line` bytes (at least 1).
    pub(crate) fn new(inner: R, max_line: usize) -> Self {
        Self {
            inner,
            max_line: max_line.max(1),
            offset: 0,
            buf: Vec::new(),
        }
    }

    /// The cap.
    pub(crate) fn max_line(&self) -> usize {
        self.max_line
    }

    /// Sets the cap (at least 1).
    pub(crate) fn set_max_line(&mut self, max: usize) {
        self.max_line = max.max(1);
    }

    /// Bytes consumed so far (newlines included).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The bytes of the line last read, newline excluded (its head only when it was too long).
    pub(crate) fn line(&self) -> &[u8] {
        &self.buf
    }

    /// Reads the next line; `None` at the end of the input (a reader whose input grows, like a
    /// file being appended to, can be called again later). An I/O error other than
    /// `Interrupted` is returned as is.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<RawLine>> {
        self.buf.clear();
        let mut skipped: Option<u64> = None;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                return Ok(match skipped {
                    Some(n) => Some(RawLine {
                        content: Err(n),
                        terminated: false,
                    }),
                    None if self.buf.is_empty() => None,
                    None => Some(RawLine {
                        content: Ok(()),
                        terminated: false,
                    }),
                });
            }
            let (chunk, found) = match memchr::memchr(b'\n', avail) {
                Some(i) => (i, true),
                None => (avail.len(), false),
            };
            match &mut skipped {
                Some(n) => *n += chunk as u64,
                None if self.buf.len() + chunk > self.max_line => {
                    skipped = Some((self.buf.len() + chunk) as u64);
                    // Keep the head only: what a reader needs to name the line.
                    let room = LINE_HEAD_BYTES.saturating_sub(self.buf.len());
                    self.buf.extend_from_slice(&avail[..chunk.min(room)]);
                    self.buf.truncate(LINE_HEAD_BYTES);
                }
                None => self.buf.extend_from_slice(&avail[..chunk]),
            }
            let used = chunk + usize::from(found);
            self.inner.consume(used);
            self.offset += used as u64;
            if found {
                return Ok(Some(RawLine {
                    content: skipped.map_or(Ok(()), Err),
                    terminated: true,
                }));
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A line's bytes, or its length and head when it was over the cap.
    type Read = Result<Vec<u8>, (u64, Vec<u8>)>;

    /// Every line of `input`, read in chunks of `chunk` bytes.
    fn all(input: &[u8], cap: usize, chunk: usize) -> Vec<(Read, bool)> {
        let mut lines = CappedLines::new(io::BufReader::with_capacity(chunk, input), cap);
        let mut out = Vec::new();
        while let Some(raw) = lines.next_line().unwrap() {
            let bytes = lines.line().to_vec();
            out.push((
                raw.content.map(|()| bytes.clone()).map_err(|n| (n, bytes)),
                raw.terminated,
            ));
        }
        assert_eq!(lines.offset(), input.len() as u64);
        out
    }

    #[test]
    fn lines_over_the_cap_are_measured_and_keep_their_head_only() {
        let long = format!("{{\"seq\":12345678901234567890,{}", "x".repeat(100));
        let input = format!("short\n{long}\n\nlast");
        // Small chunks (the head is buffered before the cap is crossed) and one chunk for all
        // (the cap is crossed inside the chunk the line starts in).
        for chunk in [7, 4096] {
            let got = all(input.as_bytes(), 40, chunk);
            assert_eq!(got[0], (Ok(b"short".to_vec()), true));
            let head = long.as_bytes()[..LINE_HEAD_BYTES].to_vec();
            assert_eq!(got[1], (Err((long.len() as u64, head)), true), "{chunk}");
            assert_eq!(got[2], (Ok(Vec::new()), true));
            assert_eq!(got[3], (Ok(b"last".to_vec()), false));
            assert_eq!(got.len(), 4);
        }
    }

    #[test]
    fn a_line_of_exactly_the_cap_fits_and_an_unterminated_long_tail_is_measured() {
        let got = all(b"abcd\nabcdefgh", 4, 3);
        assert_eq!(got[0], (Ok(b"abcd".to_vec()), true));
        // Under a cap below the head's size, the head is what was read when the cap was crossed.
        let (Err((8, head)), false) = &got[1] else {
            panic!("{:?}", got[1]);
        };
        assert!(b"abcdefgh".starts_with(head) && head.len() > 4, "{head:?}");
    }
}
