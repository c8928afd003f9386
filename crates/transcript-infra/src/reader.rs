//! The tolerant streaming reader: one item per line, constant memory in the
//! file size, never stops at a bad line.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use transcript_domain::{DecodeError, DecodeWarning, DecodedEvent, Seq, decode_line};

use crate::lines::{CappedLines, RawLine};

/// Default per-line size cap: the domain's [`transcript_domain::MAX_LINE_BYTES`] (16 MiB), the
/// same cap the writer enforces. Longer lines are reported and skipped without being buffered
/// whole.
pub const DEFAULT_MAX_LINE_BYTES: usize = transcript_domain::MAX_LINE_BYTES;

const READ_BUFFER: usize = 64 * 1024;

/// The seq in the `{"seq":N,` prefix every line of our writer starts with,
/// read without decoding the line (which may be too long or damaged).
pub(crate) fn prefix_seq(line: &[u8]) -> Option<Seq> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    // u64::MAX has 20 digits; a longer number is not a seq of ours.
    if end == 0 || end > 20 || rest[end] != b',' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// One decoded event and where it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadEvent {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// The event.
    pub event: DecodedEvent,
    /// Forward-compatibility warnings (unknown event or block types,
    /// payloads that did not fit their type). The event is complete.
    pub warnings: Vec<DecodeWarning>,
}

/// A condition the reader reports without treating the file as corrupt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadWarningKind {
    /// Bytes after the last newline: a writer stopped mid-line and the line
    /// was never acknowledged (decision 13). If the fragment happens to be a
    /// whole event it is also yielded as an event.
    #[error("unterminated final line ({length} bytes)")]
    UnterminatedFinalLine {
        /// Fragment length in bytes.
        length: u64,
    },
    /// A line holding only whitespace.
    #[error("empty line")]
    EmptyLine,
}

/// A warning with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} (byte {offset}): {kind}")]
pub struct ReadWarning {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// What was found.
    pub kind: ReadWarningKind,
}

/// What a reader yields for a line that is fine or only worth a warning.
// Events are the common case; boxing them would cost an allocation per line.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ReadItem {
    /// An event.
    Event(ReadEvent),
    /// A warning.
    Warning(ReadWarning),
}

/// Why a line is not an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MalformedCause {
    /// The decoder rejected it (not UTF-8, not JSON, not an envelope…).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Longer than the reader's cap; skipped without being buffered.
    #[error("line of {length} bytes exceeds the {limit}-byte cap")]
    TooLong {
        /// The line length (without its newline).
        length: u64,
        /// The cap.
        limit: usize,
    },
}

/// A line that is not an event. The reader continues after it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}line {line} (byte {offset}): malformed: {cause}", path_prefix(.path))]
pub struct MalformedLine {
    /// The file, when the reader was opened on a path.
    pub path: Option<PathBuf>,
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Why.
    pub cause: MalformedCause,
}

fn path_prefix(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default()
}

/// A reader error: a malformed line (iteration continues) or an I/O error
/// (iteration ends).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A line that is not an event; the next call continues after it.
    #[error(transparent)]
    Malformed(#[from] MalformedLine),
    /// Reading failed; the iterator yields nothing more.
    #[error("{}read error at byte {offset}: {source}", path_prefix(.path))]
    Io {
        /// The file, when known.
        path: Option<PathBuf>,
        /// Bytes successfully read before the error.
        offset: u64,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Streaming, tolerant transcript reader over any [`BufRead`].
///
/// Iterates `Result<ReadItem, ReadError>`: events (with their decode
/// warnings), reader warnings, and malformed lines as errors after which
/// iteration continues. Memory is bounded by the line cap plus the read
/// buffer, whatever the file size.
pub struct TranscriptReader<R> {
    lines: CappedLines<R>,
    path: Option<PathBuf>,
    line: u64,
    queued: Option<ReadItem>,
    done: bool,
}

impl TranscriptReader<BufReader<File>> {
    /// Opens a transcript file (refusing a symlink at the path).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let file = crate::fs::open_read(path).map_err(|e| ReadError::Io {
            path: Some(path.to_path_buf()),
            offset: 0,
            source: io::Error::other(e.to_string()),
        })?;
        let mut reader = Self::new(BufReader::with_capacity(READ_BUFFER, file));
        reader.path = Some(path.to_path_buf());
        Ok(reader)
    }
}

impl<R: BufRead> TranscriptReader<R> {
    /// Reads from `inner` with the default 16 MiB line cap.
    pub fn new(inner: R) -> Self {
        Self {
            lines: CappedLines::new(inner, DEFAULT_MAX_LINE_BYTES),
            path: None,
            line: 0,
            queued: None,
            done: false,
        }
    }

    /// Sets the per-line cap in bytes (at least 1).
    pub fn with_max_line_bytes(mut self, max: usize) -> Self {
        self.lines.set_max_line(max);
        self
    }

    /// Names the source in error messages.
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.lines.offset()
    }
}

impl<R: BufRead> Iterator for TranscriptReader<R> {
    type Item = Result<ReadItem, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(item) = self.queued.take() {
            return Some(Ok(item));
        }
        if self.done {
            return None;
        }
        let start = self.lines.offset();
        let RawLine {
            content,
            terminated,
        } = match self.lines.next_line() {
            Ok(Some(r)) => r,
            Ok(None) => {
                self.done = true;
                return None;
            }
            Err(source) => {
                self.done = true;
                return Some(Err(ReadError::Io {
                    path: self.path.clone(),
                    offset: self.lines.offset(),
                    source,
                }));
            }
        };
        self.line += 1;
        if !terminated {
            self.done = true;
            return Some(Ok(self.final_unterminated(content, start)));
        }
        Some(self.complete_line(content, start))
    }
}

/// What one line read becomes.
impl<R: BufRead> TranscriptReader<R> {
    /// A final line with no newline: a warning, after its event when it decodes (the warning is
    /// queued for the next call).
    fn final_unterminated(&mut self, content: Result<(), u64>, start: u64) -> ReadItem {
        let line = self.line;
        let length = match content {
            Ok(()) => self.lines.line().len() as u64,
            Err(n) => n,
        };
        let warning = ReadItem::Warning(ReadWarning {
            line,
            offset: start,
            kind: ReadWarningKind::UnterminatedFinalLine { length },
        });
        if content.is_ok()
            && let Ok(decoded) = decode_line(self.lines.line())
        {
            self.queued = Some(warning);
            return ReadItem::Event(ReadEvent {
                line,
                offset: start,
                event: decoded.event,
                warnings: decoded.warnings,
            });
        }
        warning
    }

    /// A newline-terminated line: an event, an empty-line warning, or a malformed line.
    fn complete_line(
        &mut self,
        content: Result<(), u64>,
        start: u64,
    ) -> Result<ReadItem, ReadError> {
        let line = self.line;
        let malformed = |path: &Option<PathBuf>, cause| {
            Err(ReadError::Malformed(MalformedLine {
                path: path.clone(),
                line,
                offset: start,
                cause,
            }))
        };
        if let Err(length) = content {
            return malformed(
                &self.path,
                MalformedCause::TooLong {
                    length,
                    limit: self.lines.max_line(),
                },
            );
        }
        match decode_line(self.lines.line()) {
            Ok(decoded) => Ok(ReadItem::Event(ReadEvent {
                line,
                offset: start,
                event: decoded.event,
                warnings: decoded.warnings,
            })),
            Err(DecodeError::Empty) => Ok(ReadItem::Warning(ReadWarning {
                line,
                offset: start,
                kind: ReadWarningKind::EmptyLine,
            })),
            Err(e) => malformed(&self.path, MalformedCause::Decode(e)),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::prefix_seq;

    #[test]
    fn prefix_seq_reads_our_prefix_only() {
        assert_eq!(prefix_seq(b"{\"seq\":42,\"run_id\":1}"), Some(42));
        assert_eq!(prefix_seq(b"{\"seq\":,"), None);
        assert_eq!(prefix_seq(b"{ \"seq\":4,"), None);
        assert_eq!(prefix_seq(b"{\"seq\":4}"), None);
        assert_eq!(
            prefix_seq(b"{\"seq\":18446744073709551615,"),
            Some(u64::MAX)
        );
        assert_eq!(prefix_seq(b"{\"seq\":18446744073709551616,"), None);
        assert_eq!(prefix_seq(b"{\"seq\":99999999999999999999,"), None);
    }
}
