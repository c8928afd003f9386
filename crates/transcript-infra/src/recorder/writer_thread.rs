//! The recorder's writer thread: group commit of everything queued into one
//! `write(2)`, the sync policy, acknowledgements, then broadcast (see the
//! concurrency design in the parent module's docs).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, oneshot, watch};
use transcript_domain::{Clock, EncodedParts, RecordError, RunId, Seq, Timestamp};

use super::Durability;
use super::polling::{PollSlot, poll_budget};
use super::queue::{Answer, Entry, Msg, Published, lock};
use crate::fs::storage_error;
use crate::sink::Sink;

/// Longest a batch under `Always` waits for more producers (see
/// `Writer::gather`).
const GATHER_MAX: Duration = Duration::from_micros(500);

/// Reused buffers above this capacity are released after use, so one huge
/// event does not pin its memory for the recorder's life.
const MAX_KEPT_BUFFER: usize = 1 << 20;

/// The writer thread's state; it alone touches the sink.
pub(super) struct Writer {
    /// The run's lease and lock, released before the file is closed (first field: dropped
    /// first when the writer unwinds, too).
    lease: crate::lease::WriterLease,
    sink: Box<dyn Sink>,
    path: PathBuf,
    run_id: RunId,
    parent_run_id: Option<RunId>,
    clock: Arc<dyn Clock>,
    durability: Durability,
    next_seq: Seq,
    /// Timestamps never go backwards in file order.
    last_ms: i64,
    /// Acknowledged length: everything before is whole, acknowledged lines.
    acked: u64,
    /// A failed write could not be cut back yet: retry before writing.
    needs_repair: bool,
    /// Under `Interval`: when the oldest unsynced write must be synced.
    sync_due: Option<Instant>,
    /// A background sync failed; the next batch reports it (Linux may
    /// report later syncs as successful although the data is lost).
    sync_failed: Option<io::Error>,
    /// Records in the last batch, and how long its `Always` sync took:
    /// what `gather` waits for, and for how long at most.
    last_batch: usize,
    last_sync: Duration,
    buf: Vec<u8>,
    ends: Vec<usize>,
    published: Arc<Mutex<Published>>,
    committed: Arc<AtomicU64>,
    /// The record queue's room, given back as batches are written.
    room: Arc<Semaphore>,
}

/// What the opener hands a new writer: the file, the run it writes, and the state it shares
/// with the recorder's handles.
pub(super) struct WriterSetup {
    pub(super) lease: crate::lease::WriterLease,
    pub(super) sink: Box<dyn Sink>,
    pub(super) path: PathBuf,
    pub(super) run_id: RunId,
    pub(super) parent_run_id: Option<RunId>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) durability: Durability,
    pub(super) published: Arc<Mutex<Published>>,
    pub(super) committed: Arc<AtomicU64>,
    pub(super) room: Arc<Semaphore>,
}

/// Where the file stands when the writer takes it over (after the resume scan).
pub(super) struct Resumed {
    /// The seq the next record gets.
    pub(super) next_seq: Seq,
    /// The last record's timestamp: the next ones never go below it.
    pub(super) last_timestamp: Option<Timestamp>,
    /// The file's acknowledged length.
    pub(super) length: u64,
}

impl Writer {
    /// A writer that appends to the file after `at`, with nothing in flight.
    pub(super) fn new(setup: WriterSetup, at: Resumed) -> Writer {
        let WriterSetup {
            lease,
            sink,
            path,
            run_id,
            parent_run_id,
            clock,
            durability,
            published,
            committed,
            room,
        } = setup;
        Writer {
            lease,
            sink,
            path,
            run_id,
            parent_run_id,
            clock,
            durability,
            next_seq: at.next_seq,
            last_ms: at.last_timestamp.map_or(i64::MIN, Timestamp::unix_millis),
            acked: at.length,
            needs_repair: false,
            sync_due: None,
            sync_failed: None,
            last_batch: 0,
            last_sync: Duration::ZERO,
            buf: Vec::with_capacity(64 * 1024),
            ends: Vec::new(),
            published,
            committed,
            room,
        }
    }
}

/// The outcome of writing one batch's records.
struct Written {
    /// How many leading records are acknowledged.
    good: usize,
    /// Why the rest were not.
    failure: Option<(String, io::Error)>,
}

impl Writer {
    /// The thread's body around [`Writer::run`]: whatever way it ends (a
    /// close, the last handle dropped, a panic, e.g. in a user `Clock`),
    /// the file is closed, subscriptions end, records waiting for room or
    /// for an answer are told how it ended, and an open of this run in this
    /// process may proceed.
    pub(super) fn run_to_end(self, rx: Receiver<Msg>, ended: watch::Sender<bool>) {
        let published = Arc::clone(&self.published);
        let room = Arc::clone(&self.room);
        let path = self.path.clone();
        // Unwinding drops the writer (closing the file) and the channel
        // (with every queued record's acknowledgement) before this returns.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || self.run(rx)));
        {
            let mut p = lock(&published);
            if let Err(payload) = outcome {
                let message = panic_message(payload.as_ref());
                tracing::error!(path = %path.display(), "the transcript writer thread panicked: {message}");
                p.panicked = Some(message);
            }
            p.closed = true;
            p.fanout.close_all();
        }
        room.close();
        crate::release::end(&path);
        // Last: whoever waits for it reads `Published` next.
        ended.send_replace(true);
    }

    /// Runs until a close, or until every recorder handle is gone (then
    /// the file is released without a final sync, as dropping a file does).
    fn run(mut self, rx: Receiver<Msg>) {
        let mut batch: Vec<Entry> = Vec::new();
        loop {
            let Some(first) = self.next_message(&rx) else {
                self.release();
                return;
            };
            let mut close = None;
            for msg in std::iter::once(first).chain(rx.try_iter()) {
                take(msg, &mut batch, &mut close, &self.room);
            }
            self.gather(&rx, &mut batch, &mut close);
            if !batch.is_empty() {
                self.last_batch = batch.len();
                self.commit(&mut batch);
            }
            if let Some(ack) = close {
                let room = Arc::clone(&self.room);
                let result = self.finish_close();
                let _ = ack.send(result);
                // Whatever raced with the close: records fail, closes are done.
                for msg in rx.try_iter() {
                    match msg {
                        Msg::Record(entry) => entry.answer(Err(RecordError::Closed), &room),
                        Msg::Close(ack) => {
                            let _ = ack.send(Ok(()));
                        }
                    }
                }
                return;
            }
            self.sync_if_due();
        }
    }

    /// Under `Always`, when this batch is smaller than the last one, waits
    /// (at most as long as the last sync took, and never over
    /// [`GATHER_MAX`]) for the producers the last batch acknowledged to
    /// queue their next records. Without it, concurrent producers split
    /// into a small batch (the first to come back) and a large one (the
    /// rest, arriving during its sync): about two syncs where one does.
    fn gather(
        &self,
        rx: &Receiver<Msg>,
        batch: &mut Vec<Entry>,
        close: &mut Option<oneshot::Sender<Result<(), RecordError>>>,
    ) {
        if self.durability != Durability::Always || batch.is_empty() {
            return;
        }
        let deadline = Instant::now() + self.last_sync.min(GATHER_MAX);
        while batch.len() < self.last_batch && close.is_none() {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(msg) => {
                    take(msg, batch, close, &self.room);
                    for msg in rx.try_iter() {
                        take(msg, batch, close, &self.room);
                    }
                }
                // Disconnected: the handles are gone; the next wait sees it.
                Err(_) => return,
            }
        }
    }

    /// Waits for work; under `Interval` wakes up to sync unsynced data on
    /// time. `None` when every sender is gone.
    fn next_message(&mut self, rx: &Receiver<Msg>) -> Option<Msg> {
        // Poll briefly first: a producer that records again right after its
        // acknowledgement finds the thread awake.
        // Only while a polling slot is free: with many recorders busy at
        // once, the threads that poll would take the CPUs the others need.
        let slot = PollSlot::take();
        let polling = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(msg) => return Some(msg),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) if slot.is_some() && polling.elapsed() < poll_budget() => {
                    std::hint::spin_loop()
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        drop(slot);
        loop {
            let Some(due) = self.sync_due else {
                return rx.recv().ok();
            };
            match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(msg) => return Some(msg),
                Err(RecvTimeoutError::Timeout) => self.sync_if_due(),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The interval sync, when its time has come.
    fn sync_if_due(&mut self) {
        let Durability::Interval(every) = self.durability else {
            return;
        };
        if self.sync_due.is_none_or(|due| Instant::now() < due) {
            return;
        }
        match self.sink.sync_data() {
            Ok(()) => self.sync_due = None,
            Err(e) => {
                tracing::error!(path = %self.path.display(), "interval fdatasync failed: {e}");
                lock(&self.published).stats.sync_failures += 1;
                self.sync_failed = Some(e);
                // Still unsynced: retry at the next interval.
                self.sync_due = Some(Instant::now() + interval(every));
            }
        }
    }

    /// Writes a batch, broadcasts it, then acknowledges it.
    fn commit(&mut self, batch: &mut Vec<Entry>) {
        let first = self.next_seq;
        let stamp = {
            // Assigned together, in file order (decision 15); never
            // backwards. One clock read per batch: its lines reach the
            // kernel in one write.
            let ms = self.clock.now().unix_millis().max(self.last_ms);
            self.last_ms = ms;
            Timestamp::saturating_from_unix_millis(ms)
        };
        let written = match self.sync_failed.take() {
            Some(e) => Written {
                good: 0,
                failure: Some((
                    "an earlier background fdatasync failed; events acknowledged before it may not be durable"
                        .to_owned(),
                    e,
                )),
            },
            None => self.write_records(batch, stamp),
        };
        self.next_seq += written.good as u64;
        if written.good > 0
            && let Durability::Interval(every) = self.durability
        {
            self.sync_due
                .get_or_insert_with(|| Instant::now() + interval(every));
        }
        let mut outcomes = Vec::with_capacity(batch.len());
        let permits: usize = batch.iter().map(|entry| entry.permits as usize).sum();
        {
            // Published and broadcast under one lock hold: a subscription
            // registers either before the batch (and gets all of it) or
            // after (and gets none of it).
            let mut p = lock(&self.published);
            p.next_seq = self.next_seq;
            p.stats.batches += 1;
            p.stats.entries += batch.len() as u64;
            self.committed.store(self.acked, Ordering::Release);
            let (run, parent) = (self.run_id, self.parent_run_id);
            for (i, entry) in batch.drain(..).enumerate() {
                let seq = first + i as u64;
                if i < written.good {
                    let Entry {
                        bytes, draft, ack, ..
                    } = entry;
                    let unused = if p.fanout.is_empty() {
                        Some(draft)
                    } else {
                        p.fanout.broadcast_with(seq, || {
                            Arc::new(draft.into_event(seq, run, parent, stamp))
                        });
                        None
                    };
                    outcomes.push((ack, Ok(seq), bytes, unused));
                } else {
                    let error = match &written.failure {
                        Some((message, e)) => {
                            storage_error(&self.path, message.clone(), Some(copy_io_error(e)))
                        }
                        None => RecordError::Closed,
                    };
                    outcomes.push((entry.ack, Err(error), entry.bytes, Some(entry.draft)));
                }
            }
        }
        // Acknowledged after the broadcast: when `record` returns, every
        // subscriber has been offered the event.
        for (ack, outcome, bytes, draft) in outcomes {
            let _ = ack.send(Answer {
                outcome,
                _spent: (bytes, draft),
            });
        }
        // Written (or failed): their room in the queue is free again.
        self.room.add_permits(permits);
    }

    /// Writes the batch's lines with as few `write(2)` calls as the kernel
    /// allows, syncing under `Always`. Returns how many leading records are
    /// acknowledged; on error also the failure, after cutting the file back
    /// to whole lines.
    fn write_records(&mut self, batch: &[Entry], stamp: Timestamp) -> Written {
        let fail = |good, message: &str, e| Written {
            good,
            failure: Some((message.to_owned(), e)),
        };
        if let Err((message, e)) = self.ready_for(batch.len()) {
            return fail(0, message, e);
        }
        self.encode(batch, stamp);
        let (written, mut error) = self.write_buffer();
        let mut whole = self.ends.partition_point(|&end| end <= written);
        let mut whole_bytes = if whole == 0 { 0 } else { self.ends[whole - 1] };
        let mut message = "write failed";
        if error.is_some()
            && written > whole_bytes
            && self.sink.truncate(self.acked + whole_bytes as u64).is_err()
        {
            // A partial line: cut off before the next write (or the next
            // open moves it to .torn).
            self.needs_repair = true;
        }
        let synced_at = Instant::now();
        let synced = if whole > 0 && self.durability == Durability::Always {
            let result = self.sink.sync_data();
            self.last_sync = synced_at.elapsed();
            result
        } else {
            Ok(())
        };
        if let Err(e) = synced {
            // Not durable, so not acknowledged: none of this batch stays.
            if self.sink.truncate(self.acked).is_err() {
                self.needs_repair = true;
            } else if let Err(e2) = self.sink.sync_data() {
                tracing::warn!(path = %self.path.display(), "sync after cut-back failed: {e2}");
            }
            whole = 0;
            whole_bytes = 0;
            message = "fdatasync failed";
            error = Some(e);
        }
        self.acked += whole_bytes as u64;
        if self.buf.capacity() > MAX_KEPT_BUFFER {
            self.buf = Vec::new();
            self.ends = Vec::new();
        }
        match error {
            None => Written {
                good: whole,
                failure: None,
            },
            Some(e) => fail(whole, message, e),
        }
    }

    /// Before a batch: a failed write is cut back to the last acknowledged line, and there are
    /// seqs left for every record.
    fn ready_for(&mut self, records: usize) -> Result<(), (&'static str, io::Error)> {
        if self.needs_repair {
            self.sink.truncate(self.acked).map_err(|e| {
                (
                    "cannot cut a failed write back to the last acknowledged line",
                    e,
                )
            })?;
            self.needs_repair = false;
        }
        if u64::MAX
            .checked_sub(self.next_seq)
            .filter(|room| *room >= records as u64)
            .is_none()
        {
            let e = io::Error::other(format!("seq {} is the largest possible", self.next_seq));
            return Err(("seq space exhausted", e));
        }
        Ok(())
    }

    /// Encodes the batch's lines into the buffer, with their seqs and the batch's timestamp,
    /// noting where each line ends.
    fn encode(&mut self, batch: &[Entry], stamp: Timestamp) {
        self.buf.clear();
        self.ends.clear();
        let stamp = stamp.canonical_bytes();
        for (seq, entry) in (self.next_seq..).zip(batch) {
            EncodedParts {
                middle: &entry.bytes[..entry.split],
                payload: &entry.bytes[entry.split..],
            }
            .write_line_with(seq, &stamp, &mut self.buf);
            self.ends.push(self.buf.len());
        }
    }

    /// Writes the buffer; how many bytes reached the file, and the error that stopped it.
    fn write_buffer(&mut self) -> (usize, Option<io::Error>) {
        let mut written = 0usize;
        while written < self.buf.len() {
            match self.sink.write(&self.buf[written..]) {
                Ok(0) => {
                    let e = io::Error::new(io::ErrorKind::WriteZero, "write returned 0 bytes");
                    return (written, Some(e));
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (written, Some(e)),
            }
        }
        (written, None)
    }

    /// Close: final sync, end subscriptions, release the file and lock.
    fn finish_close(mut self) -> Result<(), RecordError> {
        let mut result = Ok(());
        if self.needs_repair && self.sink.truncate(self.acked).is_err() {
            tracing::warn!(path = %self.path.display(), "closing with an unrepaired partial line; the next open moves it to .torn");
        }
        if let Some(e) = self.sync_failed.take() {
            result = Err(storage_error(
                &self.path,
                "an earlier background fdatasync failed; events acknowledged before it may not be durable",
                Some(e),
            ));
        }
        if let Err(e) = self.sink.sync_data() {
            result = Err(storage_error(
                &self.path,
                "fdatasync at close failed",
                Some(e),
            ));
        }
        self.release();
        result
    }

    /// Ends every subscription and closes the file (releasing the lock)
    /// before anyone is told the recorder is closed.
    fn release(self) {
        let Writer {
            lease,
            sink,
            published,
            ..
        } = self;
        // Unlocked first, on the open file description: the run is free when `close`
        // returns, even while a child forked at this instant still holds a copy of the
        // descriptor (tests/recorder.rs::a_second_recorder_on_the_same_run_is_locked_out_and_writes_nothing
        // met that under load: another test was spawning `mkfifo`).
        drop(lease);
        drop(sink);
        let mut p = lock(&published);
        p.closed = true;
        p.fanout.close_all();
    }
}

/// The message a panic was raised with (`panic!` gives a `&str` or a
/// `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// A copy of `e` for each failed record of a batch (`io::Error` is not
/// `Clone`): keeps the OS error number, so the copy displays, and matches,
/// exactly like the original (`No space left on device (os error 28)`).
fn copy_io_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Adds one received message to the batch being formed.
fn take(
    msg: Msg,
    batch: &mut Vec<Entry>,
    close: &mut Option<oneshot::Sender<Result<(), RecordError>>>,
    room: &Semaphore,
) {
    match msg {
        Msg::Record(entry) if close.is_none() => batch.push(entry),
        Msg::Record(entry) => entry.answer(Err(RecordError::Closed), room),
        Msg::Close(ack) if close.is_none() => *close = Some(ack),
        // A second close waits for the first: answered after it.
        Msg::Close(ack) => {
            let _ = ack.send(Ok(()));
        }
    }
}

/// A zero interval would spin; 1 ms is already far below what a disk syncs at.
fn interval(every: Duration) -> Duration {
    every.max(Duration::from_millis(1))
}
