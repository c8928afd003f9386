//! The JSONL recorder: its API and options, and its concurrency design.
//!
//! # Concurrency design
//!
//! Each recorder owns one **writer thread** (a plain OS thread, named
//! `transcript-writer`), the only code that touches the file. It opens the
//! run itself (`open.rs`: directory, file, lock, mode, resume scan,
//! directory sync), hands the recorder to the caller (which `open` waits
//! for on its thread and `open_async` awaits), then writes:
//!
//! 1. `record` runs on the caller's task: it masks, validates and
//!    canonicalizes the draft, encodes it ([`PreEncoded::encode_into`]:
//!    everything but `seq` and `timestamp`) and refuses a line that could
//!    exceed [`MAX_LINE_BYTES`]. Nothing of this takes a lock.
//! 2. It sends the encoded parts, the draft and a one-shot acknowledgement
//!    sender over a `std::sync::mpsc` channel, then awaits the one-shot:
//!    the async task is suspended, never blocked, whatever the disk does.
//!    Before it sends, it takes room for the line in the bounded queue
//!    (a `tokio::sync::Semaphore` of bytes, see
//!    [`JsonlRecorderBuilder::max_queued_bytes`]); without room it waits,
//!    suspended, in arrival order, and is not queued if dropped meanwhile.
//!    The writer thread gives the room back once per batch.
//!    It first polls the one-shot for at most 20 µs, yielding to the
//!    runtime between polls (never under `Always`, whose answer waits for a
//!    sync; and only with one of the process-wide polling slots, one per
//!    CPU, see `polling.rs`): no I/O and no worker held, and on a virtual machine a parked
//!    worker's wake-up costs more than the whole record (1 producer: 16k →
//!    ~350k records/s, 8 producers 107k → ~300k on this project's 2-vCPU
//!    machines). The answer carries the record's buffers back, so they are
//!    freed on the thread that allocated them (freeing them on the writer
//!    thread cost more than the hand-off: 8 producers ~300k → ~650k).
//! 3. The writer thread polls the channel for at most 20 µs (with a
//!    polling slot), then blocks on it (a producer recording again right after its answer finds the
//!    thread awake), then drains *everything*
//!    queued (group commit). It reads the clock once, assigns the batch's
//!    seqs and that timestamp in file order (decision 15), writes all lines
//!    with one `write(2)` and, under [`Durability::Always`], runs one
//!    `fdatasync`. A failure cuts the file back to its last acknowledged
//!    line; the records not whole on disk fail and consume no seq. Under
//!    `Always`, a batch smaller than the previous one first waits (at most
//!    as long as the previous sync took, capped at 500 µs) for the
//!    producers that batch acknowledged to come back: otherwise they split
//!    into a small batch and a large one, two syncs where one does.
//! 4. Under the lock that subscribing takes (so a subscription starts at an
//!    exact seq) it publishes the new seq and acknowledged length and
//!    broadcasts the batch (write-then-broadcast), building each event from
//!    its moved draft, without re-decoding. A subscriber's buffer is a
//!    bounded buffer with coalesced wake-ups (`chan.rs`): a full one drops
//!    the event for that subscriber only, the writer never waits. Then it sends the acknowledgements, so
//!    when `record` returns every subscriber has been offered the event.
//! 5. Under [`Durability::Interval`] the same thread syncs when the oldest
//!    unsynced write is one interval old (it waits for work with a
//!    timeout). A failed background sync fails the next batch with a
//!    storage error and is counted in [`WriteStats::sync_failures`]: after
//!    an I/O error Linux may report later syncs as successful although the
//!    data is gone.
//!
//! `close` sends a close message behind everything queued and awaits its
//! answer: the thread writes what came before, syncs, ends the
//! subscriptions, closes the file (releasing the lock) and answers; records
//! that raced past the close fail with [`RecordError::Closed`]. When the
//! last handle is dropped without `close`, the channel disconnects; the
//! thread writes everything queued by then, releases the file without a
//! sync (as dropping a file does) and ends. `Drop` does not wait for it
//! (that would block whichever thread drops, often an async worker, on a
//! write or sync in progress); it lists the run in `release.rs`, and an
//! open of the same run in this process waits for the release instead of
//! failing as locked. No file I/O ever runs on the caller's thread.
//!
//! The thread's body runs under `catch_unwind` (`Writer::run_to_end`):
//! however it ends (close, last handle dropped, panic), it then marks the
//! recorder closed (with the panic's message, if any), ends the
//! subscriptions, closes the queue's semaphore and, last, signals `ended`.
//! A record whose answer never came, or that cannot queue, waits for that
//! signal and reports how the thread ended: `Closed`, or a storage error
//! naming the panic.
//!
//! A cancelled `record` future loses nothing once polled: its entry is
//! queued and written; only its acknowledgement goes unread.
//!
//! Why this shape: one thread serializes the file with no lock held across
//! I/O, concurrent producers share writes and syncs automatically (whatever
//! arrives during a write or sync is the next batch), and a slow disk only
//! delays acknowledgements, never a runtime worker.

mod open;
mod polling;
mod queue;
mod shared;
mod writer_thread;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use transcript_domain::{
    Clock, EventDraft, EventMask, MAX_LINE_BYTES, RecordError, Recorder, RunId, Seq, Subscription,
};

use crate::clock::SystemClock;
use crate::fanout::{DEFAULT_SUBSCRIBER_BUFFER, FanOutStats};
use crate::resume::ResumeInfo;
use crate::subscription::JsonlSubscription;
pub(crate) use open::{RunFile, open_run_file, refuse_existing_path};
use queue::lock;
use shared::Shared;
pub(crate) use shared::encode_draft;

/// Default bound of the record queue: encoded lines waiting for the writer
/// thread or being written, in bytes (see
/// [`JsonlRecorderBuilder::max_queued_bytes`]). One line at the line cap
/// fits.
pub const DEFAULT_MAX_QUEUED_BYTES: usize = MAX_LINE_BYTES;

/// When an acknowledged event is forced to stable storage.
///
/// Every policy acknowledges a record only after its line was handed to the
/// kernel in full, so every acknowledged event survives a process kill.
/// They differ in what survives a power loss or kernel crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// No `fdatasync` except at `close`: a power loss can lose events the
    /// kernel had not written back yet (typically up to ~30 s).
    #[default]
    None,
    /// The writer thread calls `fdatasync` once unsynced data is this old
    /// (at least 1 ms): a power loss loses at most about one interval. A
    /// failed sync fails the next record (and `close`) with a storage error.
    Interval(Duration),
    /// `fdatasync` before acknowledging: an acknowledged event survives a
    /// power loss. Concurrent records share one write and one sync.
    Always,
}

/// Group-commit counters of one recorder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WriteStats {
    /// Batches written (each one `write(2)` in the common case, and one
    /// `fdatasync` under [`Durability::Always`]).
    pub batches: u64,
    /// Records carried by those batches.
    pub entries: u64,
    /// Background (`Interval`) syncs that failed.
    pub sync_failures: u64,
}

/// Configures and opens a [`JsonlRecorder`].
#[must_use = "call .open() to create the recorder"]
pub struct JsonlRecorderBuilder {
    storage_dir: PathBuf,
    run_id: RunId,
    parent_run_id: Option<RunId>,
    clock: Arc<dyn Clock>,
    durability: Durability,
    subscriber_buffer: usize,
    mask: Option<Arc<dyn EventMask>>,
    max_queued_bytes: u32,
}

impl std::fmt::Debug for JsonlRecorderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlRecorderBuilder")
            .field("storage_dir", &self.storage_dir)
            .field("run_id", &self.run_id)
            .field("parent_run_id", &self.parent_run_id)
            .field("durability", &self.durability)
            .field("subscriber_buffer", &self.subscriber_buffer)
            .field("mask", &self.mask.is_some())
            .field("max_queued_bytes", &self.max_queued_bytes)
            .finish_non_exhaustive()
    }
}

impl JsonlRecorderBuilder {
    /// Sets the invoking run (for a child run's recorder).
    pub fn parent_run_id(mut self, parent: Option<RunId>) -> Self {
        self.parent_run_id = parent;
        self
    }

    /// Sets the clock (default [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the durability policy (default [`Durability::None`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets the per-subscriber buffer in events (default 256, at least 1).
    pub fn subscriber_buffer(mut self, events: usize) -> Self {
        self.subscriber_buffer = events.max(1);
        self
    }

    /// Sets a masking stage applied to every draft's payload before it is
    /// encoded, written and broadcast.
    pub fn mask(mut self, mask: Arc<dyn EventMask>) -> Self {
        self.mask = Some(mask);
        self
    }

    /// Bounds the record queue: at most this many bytes of encoded lines
    /// wait for the writer thread or are being written (default
    /// [`DEFAULT_MAX_QUEUED_BYTES`]; at least 1, at most `u32::MAX`).
    ///
    /// Backpressure rule: a `record` whose line would take the queue over
    /// the bound waits, suspended (never blocking its thread), until the
    /// writer thread has written enough; waiting records get in in arrival
    /// order, and a line longer than the bound waits for an empty queue. A
    /// record whose future is dropped while it waits was never queued: it
    /// is not written and uses no seq. So callers that give up on `record`
    /// during a disk stall (a timeout) cannot grow the queue.
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.max_queued_bytes = u32::try_from(bytes.max(1)).unwrap_or(u32::MAX);
        self
    }

    /// Starts a new run: creates `<storage_dir>/<run_id>.jsonl` and its
    /// writer thread.
    ///
    /// Blocking: the writer thread creates the directory, opens and locks
    /// the file while the calling thread waits (from async code, use
    /// [`JsonlRecorderBuilder::open_async`]). A run id
    /// whose file already holds anything is refused with
    /// [`RecordError::Storage`] "run already exists (resume it
    /// explicitly)" whose source has the kind
    /// [`std::io::ErrorKind::AlreadyExists`] (what callers match on), and the file is left untouched: appending a second
    /// run to a finished one (the same deterministic id twice) would make
    /// a file that no longer describes one run. Use
    /// [`JsonlRecorderBuilder::resume`] to continue a run. An existing
    /// empty file is taken as new. Also fails with [`RecordError::Locked`]
    /// when another recorder holds the run, and [`RecordError::Storage`]
    /// for a symlink, a non-directory storage path, a writer thread that
    /// cannot be started, or any I/O failure (the OS cause as its source).
    pub fn open(self) -> Result<JsonlRecorder, RecordError> {
        self.open_with(OpenMode::New, |file| Box::new(file))
    }

    /// Continues the run in `<storage_dir>/<run_id>.jsonl` (after a crash,
    /// or to append to it deliberately), or starts it if there is no file.
    ///
    /// Scans the existing file: the next record gets the highest seq found
    /// plus one, a torn tail is moved to `<run_id>.jsonl.torn`, and what
    /// was found is in [`JsonlRecorder::resume_info`] (see the crate docs,
    /// "Failure and resume"). Fails like [`JsonlRecorderBuilder::open`],
    /// and for a file whose highest seq is `u64::MAX`. Blocking like `open`
    /// (from async code, use [`JsonlRecorderBuilder::resume_async`]).
    pub fn resume(self) -> Result<JsonlRecorder, RecordError> {
        self.open_with(OpenMode::Resume, |file| Box::new(file))
    }

    /// [`JsonlRecorderBuilder::open`] without blocking the caller: the
    /// directory, the file, its lock, the resume scan and the syncs are
    /// done on the recorder's own writer thread while the calling task is
    /// suspended. This is what [`JsonlRecorderFactory`](crate::JsonlRecorderFactory)'s
    /// `create` uses: async tasks never run file I/O.
    pub async fn open_async(self) -> Result<JsonlRecorder, RecordError> {
        self.open_async_with(OpenMode::New, |file| Box::new(file))
            .await
    }

    /// [`JsonlRecorderBuilder::resume`] without blocking the caller (see
    /// [`JsonlRecorderBuilder::open_async`]).
    pub async fn resume_async(self) -> Result<JsonlRecorder, RecordError> {
        self.open_async_with(OpenMode::Resume, |file| Box::new(file))
            .await
    }
}

/// Whether opening may continue an existing run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenMode {
    /// A new run: an existing non-empty file is refused.
    New,
    /// Continue whatever the file holds.
    Resume,
}

/// A [`Recorder`] writing `<storage>/<run_id>.jsonl` (see the crate docs for
/// the file properties, durability, failure and fan-out contracts).
///
/// Cheap to clone: clones share the same file, sequence and writer thread.
#[derive(Clone)]
pub struct JsonlRecorder {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for JsonlRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlRecorder")
            .field("path", &self.shared.path)
            .field("run_id", &self.shared.run_id)
            .field("durability", &self.shared.durability)
            .finish_non_exhaustive()
    }
}

impl JsonlRecorder {
    /// Starts configuring the recorder of `run_id` in `storage_dir`.
    pub fn builder(storage_dir: impl Into<PathBuf>, run_id: RunId) -> JsonlRecorderBuilder {
        JsonlRecorderBuilder {
            storage_dir: storage_dir.into(),
            run_id,
            parent_run_id: None,
            clock: Arc::new(SystemClock),
            durability: Durability::None,
            subscriber_buffer: DEFAULT_SUBSCRIBER_BUFFER,
            mask: None,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES as u32,
        }
    }

    /// The transcript's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The durability policy.
    pub fn durability(&self) -> Durability {
        self.shared.durability
    }

    /// What [`JsonlRecorderBuilder::resume`] found in an existing file
    /// (empty for a new one).
    pub fn resume_info(&self) -> &ResumeInfo {
        &self.shared.resume
    }

    /// The seq the next successful record will get.
    pub fn next_seq(&self) -> Seq {
        lock(&self.shared.published).next_seq
    }

    /// Acknowledged length of the file in bytes.
    pub fn acknowledged_len(&self) -> u64 {
        self.shared.committed.load(Ordering::Acquire)
    }

    /// Group-commit statistics: how many batches were written for how many
    /// records (their ratio is the average batch size), and failed
    /// background syncs.
    pub fn write_stats(&self) -> WriteStats {
        lock(&self.shared.published).stats
    }

    /// Fan-out statistics: subscriber count and drops.
    pub fn fanout_stats(&self) -> FanOutStats {
        lock(&self.shared.published).fanout.stats()
    }

    /// [`Recorder::record`] without the trait's boxed future: callers that
    /// hold the concrete type (method resolution prefers this inherent
    /// method) save an allocation per record.
    pub async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        self.shared.record(draft).await
    }

    /// [`Recorder::subscribe`] with the concrete subscription type.
    pub fn subscribe_jsonl(&self, from: Option<Seq>) -> Result<JsonlSubscription, RecordError> {
        self.shared.subscribe(from)
    }
}

#[async_trait]
impl Recorder for JsonlRecorder {
    fn run_id(&self) -> RunId {
        self.shared.run_id
    }

    fn parent_run_id(&self) -> Option<RunId> {
        self.shared.parent_run_id
    }

    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        self.shared.record(draft).await
    }

    async fn subscribe(&self, from: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Ok(Box::new(self.shared.subscribe(from)?))
    }

    async fn close(&self) -> Result<(), RecordError> {
        self.shared.close().await
    }
}

#[cfg(test)]
mod runtime_tests;
#[cfg(test)]
mod tests;
