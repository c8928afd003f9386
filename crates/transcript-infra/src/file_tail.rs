//! The file side of a replaying subscription: the acknowledged lines of the transcript, read
//! with the reader's capped line loop ([`crate::lines`]) over the part of the file the writer
//! has acknowledged. Its reads block: the subscription makes them off the runtime's workers.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use transcript_domain::{ExchangeEvent, Seq, decode_line};

use crate::lines::{CappedLines, RawLine};
use crate::reader::prefix_seq;

/// What the file offers a replaying subscription next.
pub(crate) enum Stored {
    /// An acknowledged event with seq >= the requested one.
    Event(Arc<ExchangeEvent>),
    /// A stored line that cannot be rebuilt as an event (an unknown type
    /// from a newer writer, a damaged or oversized line), with the seq of
    /// its `{"seq":N,` prefix when it has one.
    Skipped(Option<Seq>),
    /// The acknowledged part of the file is exhausted (or could not be
    /// read; the subscription counts what it then misses).
    End,
}

/// Most stored items one blocking read hands over (the subscription
/// holds them until delivered).
const READ_AHEAD_ITEMS: usize = 64;
/// ... or fewer, once their lines add up to this many bytes.
const READ_AHEAD_BYTES: usize = 1 << 20;
/// The most one read of the file asks for.
const READ_CHUNK: usize = 256 * 1024;

/// The transcript up to the writer's acknowledged length, which grows: a read at that length
/// returns 0 bytes (the end for now), a later one what was acknowledged since. Bytes below it
/// are whole lines that are never rewritten. The file is opened at the first read.
struct Acknowledged {
    file: Option<File>,
    path: PathBuf,
    /// Absolute offset of the next byte `file` will read.
    pos: u64,
    committed: Arc<AtomicU64>,
}

impl Read for Acknowledged {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let limit = self.committed.load(Ordering::Acquire);
        let want = usize::try_from(limit.saturating_sub(self.pos))
            .unwrap_or(usize::MAX)
            .min(out.len());
        if want == 0 {
            return Ok(0);
        }
        crate::iohook::point(&self.path, crate::iohook::Site::Replay);
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let file = crate::fs::open_read(&self.path)
                    .map_err(|e| io::Error::other(format!("cannot open the transcript: {e}")))?;
                self.file.insert(file)
            }
        };
        let n = file.read(&mut out[..want])?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Reads acknowledged lines of the transcript for a replaying subscription,
/// holding at most one line (up to the shared line cap) in memory. Its
/// methods block (file I/O): the subscription calls them off the runtime's
/// workers ([`tokio::task::spawn_blocking`]).
pub(crate) struct FileTail {
    path: PathBuf,
    lines: CappedLines<BufReader<Acknowledged>>,
}

impl FileTail {
    pub(crate) fn new(path: PathBuf, committed: Arc<AtomicU64>) -> Self {
        let file = Acknowledged {
            file: None,
            path: path.clone(),
            pos: 0,
            committed,
        };
        Self {
            path,
            lines: CappedLines::new(
                BufReader::with_capacity(READ_CHUNK, file),
                transcript_domain::MAX_LINE_BYTES,
            ),
        }
    }

    /// The next stored items at or after seq `from`, up to the first
    /// [`Stored::End`] (included) or the read-ahead limits. Blocking.
    pub(crate) fn read_ahead(&mut self, from: Seq) -> Vec<Stored> {
        let mut items = Vec::new();
        let mut bytes = 0;
        while items.len() < READ_AHEAD_ITEMS && bytes < READ_AHEAD_BYTES {
            let before = self.lines.offset();
            let item = self.next_event(from);
            bytes += usize::try_from(self.lines.offset() - before).unwrap_or(usize::MAX);
            let end = matches!(item, Stored::End);
            items.push(item);
            if end {
                break;
            }
        }
        items
    }

    /// The next stored item at or after seq `from`.
    fn next_event(&mut self, from: Seq) -> Stored {
        loop {
            let RawLine { content, .. } = match self.lines.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => return Stored::End,
                Err(e) => {
                    // Counted as dropped by the gap it leaves.
                    tracing::warn!(path = %self.path.display(), "replay cannot read the transcript: {e}");
                    return Stored::End;
                }
            };
            let line = self.lines.line();
            let seq = prefix_seq(line);
            if content.is_err() {
                if seq.is_none_or(|s| s >= from) {
                    tracing::warn!(path = %self.path.display(), "replay skips a stored line over the line cap");
                    return Stored::Skipped(seq);
                }
                continue;
            }
            if seq.is_some_and(|s| s < from) {
                continue;
            }
            let cause = match decode_line(line).map(|d| d.event.to_event()) {
                Ok(Ok(ev)) if ev.seq >= from => return Stored::Event(Arc::new(ev)),
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            tracing::warn!(path = %self.path.display(), "replay skips a stored line it cannot rebuild: {cause}");
            return Stored::Skipped(seq);
        }
    }
}
