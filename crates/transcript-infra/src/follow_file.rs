//! Following a transcript file as its recorder appends to it (the read port's
//! [`transcript_domain::run_store::RunStore::follow`] on a directory, and `tail -f` on a file
//! named by its path).
//!
//! - A file that does not exist yet is waited for.
//! - A torn tail (bytes without a newline) is held until its line completes, or dropped when
//!   a recorder reopening the run truncates it away (the partial line starts over).
//! - A line longer than [`transcript_domain::MAX_LINE_BYTES`] is skipped, not buffered.
//! - Watching the lease: once no runner holds the file ([`crate::writer_holds`]) the file is
//!   read to its end once more (the runner writes `run.completed` before it releases the run),
//!   and a run still going then was abandoned.
//!
//! The file is polled (every 100 ms), which works on every file system; the caller hears
//! [`FollowItem::Idle`] at each empty poll.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use transcript_domain::run_store::{FollowEnd, FollowItem, StoreReadError};

/// How often a follower looks for new bytes.
const POLL: Duration = Duration::from_millis(100);

/// Follows the transcript at `path` (see the module docs).
pub fn follow_file(
    path: &Path,
    watch_lease: bool,
    each: &mut dyn FnMut(FollowItem<'_>) -> ControlFlow<()>,
) -> Result<FollowEnd, StoreReadError> {
    let io_err = |e: std::io::Error| StoreReadError::Unavailable {
        location: path.display().to_string(),
        message: e.to_string(),
    };
    let mut file = loop {
        match File::open(path) {
            Ok(f) => break f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if each(FollowItem::Idle).is_break() {
                    return Ok(FollowEnd::Stopped);
                }
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(io_err(e)),
        }
    };
    let mut offset: u64 = 0;
    let mut lines = Assembler::default();
    let mut chunk = vec![0u8; 64 * 1024];
    // Set once no runner held the run: the file is read to its end once more, and a run
    // still without its end then was abandoned.
    let mut unheld = false;
    loop {
        let n = file.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            if each(FollowItem::Idle).is_break() {
                return Ok(FollowEnd::Stopped);
            }
            if watch_lease && lines.delivered > 0 {
                if unheld {
                    return Ok(FollowEnd::Abandoned);
                }
                if !crate::writer_holds(path).unwrap_or(false) {
                    unheld = true;
                    continue;
                }
            }
            std::thread::sleep(POLL);
            // A recorder reopening the run truncates a torn tail away: start the partial line
            // over from the new end.
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(offset);
            if len < offset {
                lines.pending.clear();
                lines.skipping = None;
                offset = file.seek(SeekFrom::Start(len)).map_err(io_err)?;
            }
            continue;
        }
        offset += n as u64;
        if lines.feed(&chunk[..n], each).is_break() {
            return Ok(FollowEnd::Stopped);
        }
    }
}

/// Hands `each` the complete lines of `reader` as [`FollowItem::Line`] (a line over the cap as
/// [`FollowItem::Skipped`], never buffered) until its end or until `each` breaks; returns the
/// length of a torn final line (bytes after the last newline), 0 when there is none or when
/// `each` broke.
pub fn read_lines(
    mut reader: impl Read,
    each: &mut dyn FnMut(FollowItem<'_>) -> ControlFlow<()>,
) -> std::io::Result<u64> {
    let mut lines = Assembler::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(lines.skipping.unwrap_or(lines.pending.len() as u64)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if lines.feed(&chunk[..n], each).is_break() {
            return Ok(0);
        }
    }
}

/// Complete lines out of the bytes read so far, at most the line cap each.
#[derive(Default)]
struct Assembler {
    line_no: u64,
    /// The start of the current line when it spans reads; never more than the line cap.
    pending: Vec<u8>,
    /// Length so far of an over-long line being skipped (not buffered).
    skipping: Option<u64>,
    /// Lines handed over so far.
    delivered: u64,
}

impl Assembler {
    /// Hands over every line `data` completes.
    fn feed(
        &mut self,
        data: &[u8],
        each: &mut dyn FnMut(FollowItem<'_>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let cap = transcript_domain::MAX_LINE_BYTES;
        let mut start = 0;
        // Each byte is looked at once (memchr), so a 40 MB line costs what 40 MB of short
        // lines do.
        for newline in memchr::memchr_iter(b'\n', data) {
            let piece = &data[start..newline];
            start = newline + 1;
            self.line_no += 1;
            let item = if let Some(len) = self.skipping.take() {
                FollowItem::Skipped {
                    line: self.line_no,
                    len: len + piece.len() as u64,
                }
            } else {
                let body: &[u8] = if self.pending.is_empty() {
                    piece
                } else {
                    self.pending.extend_from_slice(piece);
                    &self.pending
                };
                if body.len() > cap {
                    FollowItem::Skipped {
                        line: self.line_no,
                        len: body.len() as u64,
                    }
                } else {
                    self.delivered += 1;
                    FollowItem::Line(body)
                }
            };
            let flow = each(item);
            self.pending.clear();
            flow?;
        }
        let rest = &data[start..];
        match self.skipping.as_mut() {
            Some(len) => *len += rest.len() as u64,
            None => {
                self.pending.extend_from_slice(rest);
                if self.pending.len() > cap {
                    self.skipping = Some(self.pending.len() as u64);
                    self.pending = Vec::new();
                }
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_assembled_across_reads_and_over_long_ones_skipped() {
        let mut a = Assembler::default();
        let mut got = Vec::new();
        let mut each = |item: FollowItem<'_>| {
            got.push(match item {
                FollowItem::Line(l) => String::from_utf8_lossy(l).into_owned(),
                FollowItem::Skipped { line, len } => format!("skipped {line} {len}"),
                FollowItem::Idle => "idle".to_owned(),
            });
            ControlFlow::Continue(())
        };
        assert!(a.feed(b"one\ntw", &mut each).is_continue());
        assert!(a.feed(b"o\n", &mut each).is_continue());
        let long = vec![b'x'; transcript_domain::MAX_LINE_BYTES + 1];
        assert!(a.feed(&long, &mut each).is_continue());
        assert!(a.feed(b"\nthree\n", &mut each).is_continue());
        let skipped = format!("skipped 3 {}", long.len());
        assert_eq!(got, ["one", "two", skipped.as_str(), "three"]);
        assert_eq!(a.delivered, 3);
    }

    #[test]
    fn a_follower_stops_when_told_and_waits_for_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("run.jsonl");
        let mut idle = 0;
        let end = follow_file(&path, false, &mut |item| {
            if item == FollowItem::Idle {
                idle += 1;
                if idle == 1 {
                    std::fs::write(&path, "a\nb\n").unwrap_or_else(|e| panic!("{e}"));
                }
            }
            if item == FollowItem::Line(b"b") {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(end, Ok(FollowEnd::Stopped));
        // Written by no recorder: nobody holds it, so watching the lease ends the follow.
        let end = follow_file(&path, true, &mut |_| ControlFlow::Continue(()));
        assert_eq!(end, Ok(FollowEnd::Abandoned));
    }
}
