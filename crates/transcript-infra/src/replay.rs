//! The file side of a replaying subscription: reading the acknowledged
//! part of the transcript, off the runtime's workers.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use transcript_domain::{ExchangeEvent, Seq, decode_line};

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

/// Reads acknowledged lines of the transcript for a replaying subscription,
/// holding at most one line (up to the shared line cap) in memory. Its
/// methods block (file I/O): the subscription calls them off the runtime's
/// workers ([`tokio::task::spawn_blocking`]).
pub(crate) struct FileTail {
    /// Opened at the first read.
    file: Option<File>,
    path: PathBuf,
    /// Absolute offset of the next byte `file` will read.
    file_pos: u64,
    buf: Vec<u8>,
    start: usize,
    /// Inside a line over the cap: its bytes are discarded up to its
    /// newline; it had this prefix seq.
    oversized: Option<Option<Seq>>,
    /// The writer's acknowledged length: bytes below it are whole lines
    /// that are never rewritten.
    committed: Arc<AtomicU64>,
}

impl FileTail {
    pub(crate) fn new(path: PathBuf, committed: Arc<AtomicU64>) -> Self {
        Self {
            file: None,
            path,
            file_pos: 0,
            buf: Vec::new(),
            start: 0,
            oversized: None,
            committed,
        }
    }

    /// The next stored items at or after seq `from`, up to the first
    /// [`Stored::End`] (included) or the read-ahead limits. Blocking.
    pub(crate) fn read_ahead(&mut self, from: Seq) -> Vec<Stored> {
        let mut items = Vec::new();
        let mut bytes = 0;
        while items.len() < READ_AHEAD_ITEMS && bytes < READ_AHEAD_BYTES {
            let before = self.file_pos;
            let item = self.next_event(from);
            bytes += usize::try_from(self.file_pos - before).unwrap_or(usize::MAX);
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
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.start..]) {
                let line = &self.buf[self.start..self.start + i];
                self.start += i + 1;
                if let Some(seq) = self.oversized.take() {
                    if seq.is_none_or(|s| s >= from) {
                        tracing::warn!(path = %self.path.display(), "replay skips a stored line over the line cap");
                        return Stored::Skipped(seq);
                    }
                    continue;
                }
                let seq = prefix_seq(line);
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
            if self.buf.len() - self.start > transcript_domain::MAX_LINE_BYTES {
                // No newline within the cap: skip the rest of this line.
                if self.oversized.is_none() {
                    self.oversized = Some(prefix_seq(&self.buf[self.start..]));
                }
                self.buf.clear();
                self.start = 0;
            }
            let limit = self.committed.load(Ordering::Acquire);
            if self.file_pos >= limit {
                return Stored::End;
            }
            self.buf.drain(..self.start);
            self.start = 0;
            let want = usize::try_from(limit - self.file_pos)
                .unwrap_or(usize::MAX)
                .min(256 * 1024);
            crate::iohook::point(&self.path, crate::iohook::Site::Replay);
            let file = match &mut self.file {
                Some(file) => file,
                None => match crate::fs::open_read(&self.path) {
                    Ok(file) => self.file.insert(file),
                    Err(e) => {
                        // Counted as dropped by the gap it leaves.
                        tracing::warn!(path = %self.path.display(), "replay cannot open the transcript: {e}");
                        return Stored::End;
                    }
                },
            };
            let old = self.buf.len();
            self.buf.resize(old + want, 0);
            match file.read(&mut self.buf[old..]) {
                Ok(n) if n > 0 => {
                    self.buf.truncate(old + n);
                    self.file_pos += n as u64;
                }
                result => {
                    self.buf.truncate(old);
                    if let Err(e) = result {
                        tracing::warn!(path = %self.path.display(), "replay cannot read the transcript: {e}");
                    }
                    return Stored::End;
                }
            }
        }
    }
}

/// Where a replaying subscription's file reader is.
pub(crate) enum Tail {
    /// Idle, between reads.
    Idle(Box<FileTail>),
    /// Reading on the blocking pool. Kept across a cancelled `next()`, so
    /// the next call picks up the same read.
    Reading(tokio::task::JoinHandle<(Box<FileTail>, Vec<Stored>)>),
    /// The read task failed (the runtime is shutting down): nothing more
    /// comes from the file.
    Gone,
}

pub(crate) struct Replay {
    pub(crate) tail: Tail,
    /// Items read from the file, not yet delivered.
    pub(crate) ready: VecDeque<Stored>,
    /// Next seq this subscription delivers.
    pub(crate) wanted: Seq,
    pub(crate) catching_up: bool,
}

impl Replay {
    /// The next stored item at or after `wanted`, read off the runtime's
    /// workers (inline when polled outside a Tokio runtime: there is no
    /// worker to block then).
    pub(crate) async fn next_stored(&mut self) -> Stored {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return item;
            }
            match &mut self.tail {
                Tail::Idle(_) => {
                    let Tail::Idle(mut tail) = std::mem::replace(&mut self.tail, Tail::Gone) else {
                        unreachable!("matched above")
                    };
                    let from = self.wanted;
                    match tokio::runtime::Handle::try_current() {
                        Ok(runtime) => {
                            self.tail = Tail::Reading(runtime.spawn_blocking(move || {
                                let items = tail.read_ahead(from);
                                (tail, items)
                            }));
                        }
                        Err(_) => {
                            self.ready.extend(tail.read_ahead(from));
                            self.tail = Tail::Idle(tail);
                        }
                    }
                }
                Tail::Reading(read) => match read.await {
                    Ok((tail, items)) => {
                        self.ready.extend(items);
                        self.tail = Tail::Idle(tail);
                    }
                    Err(e) => {
                        tracing::warn!("replay cannot read the transcript: {e}");
                        self.tail = Tail::Gone;
                    }
                },
                Tail::Gone => return Stored::End,
            }
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
