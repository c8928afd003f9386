//! The JSONL recorder: leader/follower group commit over an append-only,
//! locked file, with write-then-broadcast fan-out.

use std::cell::RefCell;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use transcript_domain::{
    Clock, EncodedParts, EventDraft, EventMask, ExchangeEvent, InvalidDraft, MAX_LINE_BYTES,
    PreEncoded, RecordError, Recorder, RunId, Seq, Subscription, Timestamp, decode_line,
};

use crate::clock::SystemClock;
use crate::fanout::{DEFAULT_SUBSCRIBER_BUFFER, FanOut, FanOutStats, FileTail, JsonlSubscription};
use crate::fs::{self, storage_error};
use crate::resume::{ResumeInfo, scan_and_repair};
use crate::sink::{FileSink, Sink};

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
    /// A background thread calls `fdatasync` every interval (at least 1 ms)
    /// while there is unsynced data: a power loss loses at most about one
    /// interval.
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
    /// Records (and the close marker) carried by those batches.
    pub entries: u64,
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

    /// Opens (or resumes) `<storage_dir>/<run_id>.jsonl`.
    ///
    /// Blocking: creates the directory, opens and locks the file and scans
    /// an existing one. Fails with [`RecordError::Locked`] when another
    /// recorder holds the run, and [`RecordError::Storage`] for a symlink,
    /// a non-directory storage path or any I/O failure.
    pub fn open(self) -> Result<JsonlRecorder, RecordError> {
        self.open_with(|file| Box::new(file))
    }

    pub(crate) fn open_with(
        self,
        wrap: impl FnOnce(FileSink) -> Box<dyn Sink>,
    ) -> Result<JsonlRecorder, RecordError> {
        fs::ensure_storage_dir(&self.storage_dir)?;
        let path = self.storage_dir.join(self.run_id.file_name());
        let torn_path = self
            .storage_dir
            .join(format!("{}.torn", self.run_id.file_name()));
        let existed = path.exists();
        let file = fs::open_append(&path)?;
        fs::lock_exclusive(&path, &file)?;
        fs::force_file_mode(&path, &file)?;
        let read = fs::open_read(&path)?;
        if !fs::same_file(&file, &read)
            .map_err(|e| storage_error(&path, "cannot inspect file", Some(e)))?
        {
            return Err(storage_error(
                &path,
                "file was replaced while opening",
                None,
            ));
        }
        let scan = scan_and_repair(&path, &torn_path, read, &file)?;
        if !existed && self.durability != Durability::None {
            // The new name must survive a power loss too.
            fs::sync_dir(&self.storage_dir)
                .map_err(|e| storage_error(&self.storage_dir, "cannot sync directory", Some(e)))?;
        }
        for warning in &scan.info.warnings {
            tracing::warn!(path = %path.display(), "resuming transcript: {warning}");
        }
        let sink = wrap(FileSink { file });
        let committed = Arc::new(AtomicU64::new(scan.length));
        let flusher = match self.durability {
            Durability::Interval(every) => Some(Flusher::start(
                sink.syncer()
                    .map_err(|e| storage_error(&path, "cannot start interval sync", Some(e)))?,
                every,
                Arc::clone(&committed),
                path.clone(),
            )),
            _ => None,
        };
        let (closed_tx, _) = watch::channel(false);
        let writer = Writer {
            sink: Some(sink),
            next_seq: scan.next_seq,
            last_ms: scan.last_timestamp.map_or(i64::MIN, Timestamp::unix_millis),
            ts_sec: i64::MIN,
            ts_prefix: [0; 24],
            acked: scan.length,
            needs_repair: false,
            buf: Vec::with_capacity(64 * 1024),
            ends: Vec::new(),
            stamp: Timestamp::UNIX_EPOCH,
            fanout: FanOut::default(),
            flusher,
            closed: false,
        };
        Ok(JsonlRecorder {
            shared: Arc::new(Shared {
                run_id: self.run_id,
                parent_run_id: self.parent_run_id,
                path,
                clock: self.clock,
                mask: self.mask,
                durability: self.durability,
                subscriber_buffer: self.subscriber_buffer,
                queue: CachePadded(Mutex::new(Queue::default())),
                writer: CachePadded(Mutex::new(writer)),
                fanout_live: CachePadded(AtomicBool::new(false)),
                committed,
                closed_tx,
                resume: scan.info,
            }),
        })
    }
}

/// A [`Recorder`] writing `<storage>/<run_id>.jsonl` (see the crate docs for
/// the file properties, durability, failure and fan-out contracts).
///
/// Cheap to clone: clones share the same file and sequence.
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

    /// What opening found in an existing file (empty for a new one).
    pub fn resume_info(&self) -> &ResumeInfo {
        &self.shared.resume
    }

    /// The seq the next successful record will get.
    pub fn next_seq(&self) -> Seq {
        self.shared.lock_writer().next_seq
    }

    /// Acknowledged length of the file in bytes.
    pub fn acknowledged_len(&self) -> u64 {
        self.shared.committed.load(Ordering::Acquire)
    }

    /// Group-commit statistics: how many batches were written for how many
    /// queued records (their ratio is the average batch size).
    pub fn write_stats(&self) -> WriteStats {
        let q = self.shared.lock_queue();
        WriteStats {
            batches: q.batches,
            entries: q.batched_entries,
        }
    }

    /// Fan-out statistics: subscriber count and drops.
    pub fn fanout_stats(&self) -> FanOutStats {
        self.shared.lock_writer().fanout.stats()
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

/// Background `fdatasync` for [`Durability::Interval`].
struct Flusher {
    stop: Option<std_mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    fn start(
        mut sync: crate::sink::SyncFn,
        every: Duration,
        committed: Arc<AtomicU64>,
        path: PathBuf,
    ) -> Self {
        // A zero interval would spin; 1 ms is already far below what a disk syncs at.
        let every = every.max(Duration::from_millis(1));
        let (stop, stopped) = std_mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("transcript-flush".to_owned())
            .spawn({
                // Captured now, not when the thread first runs: records made
                // before it is scheduled are still unsynced.
                let mut synced = committed.load(Ordering::Acquire);
                move || {
                    // Wakes every interval; a dropped sender (close) ends the loop.
                    while let Err(std_mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
                    {
                        let now = committed.load(Ordering::Acquire);
                        if now != synced {
                            match sync() {
                                Ok(()) => synced = now,
                                Err(e) => tracing::error!(
                                    path = %path.display(),
                                    "interval fdatasync failed: {e}"
                                ),
                            }
                        }
                    }
                }
            })
            .ok();
        Self {
            stop: Some(stop),
            thread,
        }
    }

    fn stop(&mut self) {
        self.stop = None;
        if let Some(t) = self.thread.take() {
            // The thread holds a duplicate of the locked descriptor: join so
            // the lock is really released when close returns.
            let _ = t.join();
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Aligns (and so pads) a value to two cache lines, the unit adjacent-line
/// prefetchers pull in together.
#[repr(align(128))]
struct CachePadded<T>(T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

struct Shared {
    run_id: RunId,
    parent_run_id: Option<RunId>,
    path: PathBuf,
    clock: Arc<dyn Clock>,
    mask: Option<Arc<dyn EventMask>>,
    durability: Durability,
    subscriber_buffer: usize,
    /// Producers write the queue's line constantly; the writer's state and
    /// the flag every producer reads live on lines of their own.
    queue: CachePadded<Mutex<Queue>>,
    writer: CachePadded<Mutex<Writer>>,
    /// Someone may subscribe: producers hand their drafts to the writer to
    /// build broadcast events. Set under the writer lock; a stale `false`
    /// is harmless (the writer decodes the written line instead).
    fanout_live: CachePadded<AtomicBool>,
    /// Acknowledged file length, published before broadcast.
    committed: Arc<AtomicU64>,
    closed_tx: watch::Sender<bool>,
    resume: ResumeInfo,
}

#[derive(Default)]
struct Queue {
    entries: Vec<Entry>,
    /// The encoded parts of the queued records, back to back: producers
    /// copy them in from a reused per-thread buffer, so a record costs no
    /// allocation and the leader frees nothing on its critical path.
    bytes: Vec<u8>,
    spare: Vec<Entry>,
    spare_bytes: Vec<u8>,
    /// Someone is leading: the next records queue behind it.
    leader: bool,
    closed: bool,
    last_batch: usize,
    batches: u64,
    batched_entries: u64,
}

// One close per recorder; records are the common case.
#[allow(clippy::large_enum_variant)]
enum Work {
    Record {
        /// `bytes[start..split]` is the envelope middle, `bytes[split..end]`
        /// the payload (see [`PreEncoded::encode_into`]).
        start: usize,
        split: usize,
        end: usize,
        /// Carried only while someone subscribes, to build the broadcast
        /// event cheaply; otherwise it is dropped by its producer.
        draft: Option<EventDraft>,
    },
    Close,
}

struct Entry {
    work: Work,
    ticket: Arc<Ticket>,
}

struct Writer {
    /// `None` once closed.
    sink: Option<Box<dyn Sink>>,
    next_seq: Seq,
    last_ms: i64,
    ts_sec: i64,
    ts_prefix: [u8; 24],
    /// Acknowledged length: everything before is whole, acknowledged lines.
    acked: u64,
    /// A failed write could not be cut back yet: retry before writing.
    needs_repair: bool,
    buf: Vec<u8>,
    ends: Vec<usize>,
    /// The timestamp of the last batch (one clock read per batch).
    stamp: Timestamp,
    fanout: FanOut,
    flusher: Option<Flusher>,
    closed: bool,
}

impl Writer {
    /// The canonical timestamp bytes, reusing the formatted second.
    fn stamp(&mut self, ms: i64) -> [u8; 24] {
        let sec = ms.div_euclid(1000);
        if sec != self.ts_sec {
            self.ts_sec = sec;
            self.ts_prefix = Timestamp::saturating_from_unix_millis(sec * 1000).canonical_bytes();
        }
        let mut out = self.ts_prefix;
        let milli = ms.rem_euclid(1000);
        out[20] = b'0' + (milli / 100) as u8;
        out[21] = b'0' + (milli / 10 % 10) as u8;
        out[22] = b'0' + (milli % 10) as u8;
        out
    }
}

thread_local! {
    /// Tickets whose records finished, for this thread's next records: a
    /// record allocates none in the steady state.
    static TICKETS: RefCell<Vec<Arc<Ticket>>> = const { RefCell::new(Vec::new()) };
}

/// Tickets kept per thread.
const KEPT_TICKETS: usize = 16;

fn new_ticket() -> Arc<Ticket> {
    TICKETS
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| Arc::new(Ticket::default()))
}

/// Keeps `ticket` for reuse if nobody else holds it any more (the leader
/// usually dropped its handle before the waiter returns; if not, it is
/// simply freed).
fn recycle(mut ticket: Arc<Ticket>) {
    let Some(t) = Arc::get_mut(&mut ticket) else {
        return;
    };
    *t.state.get_mut().unwrap_or_else(|e| e.into_inner()) = TicketState::default();
    *t.signalled.get_mut() = false;
    TICKETS.with_borrow_mut(|kept| {
        if kept.len() < KEPT_TICKETS {
            kept.push(ticket);
        }
    });
}

/// Where a record stands: written (or failed), or handed the leadership.
#[derive(Default)]
struct TicketState {
    outcome: Option<Result<Seq, RecordError>>,
    lead: bool,
    abandoned: bool,
    waker: Option<Waker>,
}

// Aligned so two producers' tickets never share a cache line: waiters spin
// reading their own flag while the leader writes the others'.
#[derive(Default)]
#[repr(align(128))]
struct Ticket {
    state: Mutex<TicketState>,
    /// Set (under `state`'s lock, after updating it) once there is an
    /// outcome or a lead offer: a spinning waiter reads only this flag, so
    /// it never contends for the lock the leader takes to complete it.
    signalled: AtomicBool,
}

impl Ticket {
    fn lock(&self) -> MutexGuard<'_, TicketState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn complete(&self, outcome: Result<Seq, RecordError>) {
        let waker = {
            let mut s = self.lock();
            s.outcome = Some(outcome);
            self.signalled.store(true, Ordering::Release);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Makes this ticket's waiter the next leader, unless it gave up.
    fn offer_lead(&self) -> bool {
        let waker = {
            let mut s = self.lock();
            if s.abandoned || s.outcome.is_some() {
                return false;
            }
            s.lead = true;
            self.signalled.store(true, Ordering::Release);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    fn take_outcome(&self) -> Option<Result<Seq, RecordError>> {
        self.lock().outcome.take()
    }
}

enum Waited {
    Done(Result<Seq, RecordError>),
    Lead,
}

/// A follower waiting for its line. If dropped after being made leader it
/// leads synchronously, so leadership is never lost with a cancelled caller.
struct WaitTicket<'a> {
    shared: &'a Shared,
    ticket: &'a Ticket,
    finished: bool,
    spins: u32,
}

impl Future for WaitTicket<'_> {
    type Output = Waited;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Waited> {
        if self.spins < FOLLOWER_SPINS && !self.ticket.signalled.load(Ordering::Acquire) {
            // The batch is usually written within a few microseconds: stay
            // runnable for some scheduler rounds instead of letting the
            // worker park and be woken again (a syscall on each side, and
            // the woken task lands on the leader's worker).
            self.spins += 1;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let ready = {
            let mut s = self.ticket.lock();
            if let Some(outcome) = s.outcome.take() {
                Some(Waited::Done(outcome))
            } else if s.lead {
                s.lead = false;
                Some(Waited::Lead)
            } else {
                if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    s.waker = Some(cx.waker().clone());
                }
                None
            }
        };
        match ready {
            Some(r) => {
                self.finished = true;
                Poll::Ready(r)
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for WaitTicket<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let lead = {
            let mut s = self.ticket.lock();
            if s.lead {
                true
            } else {
                // Still queued: the line is written anyway, nobody waits.
                s.abandoned = true;
                false
            }
        };
        if lead {
            self.shared.lead_sync();
        }
    }
}

/// Held while leading; dropping it mid-lead finishes the work synchronously.
struct LeaderGuard<'a> {
    shared: &'a Shared,
    active: bool,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        if self.active {
            self.shared.lead_sync();
        }
    }
}

impl LeaderGuard<'_> {
    async fn lead(&mut self) {
        // A running leader is cheaper than waking a successor: keep writing
        // the batches that queue up meanwhile, up to a bound so its own
        // caller is not held forever.
        for led in 1.. {
            self.shared.adaptive_yield().await;
            if self.shared.run_batch(led < MAX_LEAD_BATCHES) != BatchEnd::Continue {
                self.active = false;
                return;
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum BatchEnd {
    /// Queue empty; leadership released.
    Released,
    /// Another waiter leads now.
    HandedOff,
    /// Records are queued and this leader writes them too.
    Continue,
}

/// Goes to the back of the scheduler's run queue once. Unlike
/// `tokio::task::yield_now` it does not make the worker poll the I/O driver
/// (an `epoll_wait` per yield), which matters at one yield per batch.
pub(crate) struct YieldOnce(pub(crate) bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Rounds of yielding a leader may spend letting concurrent producers
/// join its batch (see the performance notes in the crate docs).
const MAX_YIELD_ROUNDS: usize = 3;

/// Scheduler rounds a waiting record stays runnable before it parks
/// (measured with 8 producers on 2 workers: 16 → 100 rounds raised the
/// median from 0.78× to 0.86× of the one-write-per-line baseline; 300 did
/// not help further). A round is cheap: one atomic load, no lock.
const FOLLOWER_SPINS: u32 = 100;

/// Batches one leader writes before handing leadership to a waiter.
const MAX_LEAD_BATCHES: usize = 32;

/// Reused encode and batch buffers above this capacity are released after
/// use, so one huge event does not pin its memory for the recorder's life.
const MAX_KEPT_BUFFER: usize = 1 << 20;

thread_local! {
    /// Per-thread encode buffer: a record is serialized here, outside every
    /// lock, then copied into the queue.
    static ENCODE_BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(4096));
}

/// What one batch did.
struct Written {
    /// The seq of the batch's first record.
    first: Seq,
    /// How many leading records are acknowledged.
    good: usize,
    /// Why the rest were not.
    failure: Option<(String, std::io::Error)>,
    /// The close entry's outcome, if the batch held one.
    close: Option<Result<Seq, RecordError>>,
}

/// The broadcast event of a line this recorder just wrote, for a record
/// whose draft was not carried. The line is our own canonical encoding, so
/// decoding cannot fail short of a bug; if it did, the event is logged and
/// counted as dropped for every subscriber (a replaying one then reads the
/// line from the file and reports it).
fn rebuild_event(line: &[u8], path: &Path) -> Option<Arc<ExchangeEvent>> {
    let cause = match decode_line(line).map(|d| d.event.to_event()) {
        Ok(Ok(event)) => return Some(Arc::new(event)),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    tracing::error!(path = %path.display(), "cannot rebuild a written line for subscribers: {cause}");
    None
}

/// The longest line `encoded` bytes of parts can make: `{"seq":` plus up
/// to 20 digits, `,"timestamp":"`, 24 bytes of time, `","payload":` and `}`.
fn line_bound(encoded: usize) -> usize {
    encoded + 7 + 20 + 14 + 24 + 12 + 1
}

fn too_long(encoded: usize) -> RecordError {
    RecordError::Encode(format!(
        "event line of up to {} bytes exceeds the {MAX_LINE_BYTES}-byte line cap shared with the reader; nothing was written",
        line_bound(encoded)
    ))
}

fn invalid_draft(e: InvalidDraft) -> RecordError {
    RecordError::Encode(format!("invalid event: {e}"))
}

impl Shared {
    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn record(&self, mut draft: EventDraft) -> Result<Seq, RecordError> {
        if let Some(mask) = &self.mask {
            let before = draft.event_type();
            mask.mask(&mut draft.payload);
            if draft.event_type() != before {
                return Err(RecordError::Encode(format!(
                    "event mask changed the event type from {before} to {}",
                    draft.event_type()
                )));
            }
        }
        // Refused before it gets a seq: our own verify would reject it.
        draft.validate().map_err(invalid_draft)?;
        // What subscribers get from the draft then equals what the line
        // decodes to, however the event reaches them.
        draft.payload.canonicalize();
        let carry = self.fanout_live.load(Ordering::Acquire);
        let (ticket, lead, kept) = ENCODE_BUF.with_borrow_mut(|buf| {
            buf.clear();
            let queued = match PreEncoded::encode_into(self.run_id, self.parent_run_id, &draft, buf)
            {
                Err(e) => Err(RecordError::Encode(e.to_string())),
                Ok(_) if line_bound(buf.len()) > MAX_LINE_BYTES => Err(too_long(buf.len())),
                Ok(split) => {
                    let (kept, carried) = if carry {
                        (None, Some(draft))
                    } else {
                        (Some(draft), None)
                    };
                    self.enqueue_record(buf, split, carried)
                        .map(|(ticket, lead)| (ticket, lead, kept))
                }
            };
            // Whatever happened, one huge event does not pin this thread's
            // buffer.
            if buf.capacity() > MAX_KEPT_BUFFER {
                *buf = Vec::new();
            }
            queued
        })?;
        let seq = self.wait_or_lead(ticket, lead).await?;
        // Freed here, by its producer, after the ack: off the writer's path.
        drop(kept);
        // A lone producer's record never suspends; without this it would
        // monopolize its worker and starve subscribers woken onto it. Yields
        // only when the task's coop budget is spent (every ~128 records), and
        // only after the record is written, so a caller dropping the future
        // here loses nothing.
        tokio::task::coop::consume_budget().await;
        Ok(seq)
    }

    /// Queues an encoded record (`encoded[..split]` the envelope middle,
    /// `encoded[split..]` the payload) and says whether the caller must lead.
    fn enqueue_record(
        &self,
        encoded: &[u8],
        split: usize,
        draft: Option<EventDraft>,
    ) -> Result<(Arc<Ticket>, bool), RecordError> {
        self.enqueue(false, |q| {
            let start = q.bytes.len();
            q.bytes.extend_from_slice(encoded);
            Work::Record {
                start,
                split: start + split,
                end: q.bytes.len(),
                draft,
            }
        })
    }

    /// Queues the work `make` builds (under the queue lock) and says
    /// whether the caller must lead.
    fn enqueue(
        &self,
        close: bool,
        make: impl FnOnce(&mut Queue) -> Work,
    ) -> Result<(Arc<Ticket>, bool), RecordError> {
        let ticket = new_ticket();
        let mut q = self.lock_queue();
        if q.closed {
            return Err(RecordError::Closed);
        }
        q.closed |= close;
        let work = make(&mut q);
        q.entries.push(Entry {
            work,
            ticket: Arc::clone(&ticket),
        });
        let lead = !std::mem::replace(&mut q.leader, true);
        Ok((ticket, lead))
    }

    /// Waits for a queued entry, leading when nobody else does.
    async fn wait_or_lead(&self, ticket: Arc<Ticket>, lead: bool) -> Result<Seq, RecordError> {
        if !lead {
            let waited = WaitTicket {
                shared: self,
                ticket: &ticket,
                finished: false,
                spins: 0,
            }
            .await;
            match waited {
                Waited::Done(outcome) => {
                    recycle(ticket);
                    return outcome;
                }
                Waited::Lead => {}
            }
        }
        let mut guard = LeaderGuard {
            shared: self,
            active: true,
        };
        guard.lead().await;
        // A leader's own entry is always in its first batch.
        let outcome = ticket.take_outcome().unwrap_or_else(|| {
            Err(storage_error(
                &self.path,
                "internal error: record finished without an outcome",
                None,
            ))
        });
        recycle(ticket);
        outcome
    }

    /// Gives producers that were just woken a chance to join the next batch.
    /// Only after a batch of several lines, so a lone producer never yields.
    async fn adaptive_yield(&self) {
        let (last, mut seen) = {
            let q = self.lock_queue();
            (q.last_batch, q.entries.len())
        };
        if last <= 1 {
            return;
        }
        for _ in 0..MAX_YIELD_ROUNDS {
            YieldOnce(false).await;
            let now = self.lock_queue().entries.len();
            if now <= seen || now >= last {
                break;
            }
            seen = now;
        }
    }

    fn lead_sync(&self) {
        while self.run_batch(false) == BatchEnd::Continue {}
    }

    /// Takes every queued entry, writes them as one batch, acknowledges
    /// them, and passes leadership on.
    fn run_batch(&self, keep_leading: bool) -> BatchEnd {
        let (mut batch, mut bytes) = {
            let mut q = self.lock_queue();
            if q.entries.is_empty() {
                q.leader = false;
                return BatchEnd::Released;
            }
            let spare = std::mem::take(&mut q.spare);
            let batch = std::mem::replace(&mut q.entries, spare);
            let spare_bytes = std::mem::take(&mut q.spare_bytes);
            let bytes = std::mem::replace(&mut q.bytes, spare_bytes);
            q.last_batch = batch.len();
            q.batches += 1;
            q.batched_entries += batch.len() as u64;
            (batch, bytes)
        };
        let written = self.write_batch(&mut batch, &bytes);
        let mut close_result = written.close;
        for (i, entry) in batch.drain(..).enumerate() {
            let outcome = match entry.work {
                Work::Close => close_result.take().unwrap_or(Ok(0)),
                Work::Record { .. } if i < written.good => Ok(written.first + i as u64),
                Work::Record { .. } => Err(match &written.failure {
                    Some((message, e)) => storage_error(
                        &self.path,
                        message.clone(),
                        Some(std::io::Error::new(e.kind(), e.to_string())),
                    ),
                    None => RecordError::Closed,
                }),
            };
            entry.ticket.complete(outcome);
        }
        bytes.clear();
        if bytes.capacity() > MAX_KEPT_BUFFER {
            bytes = Vec::new();
        }
        let mut q = self.lock_queue();
        if q.spare.capacity() < batch.capacity() {
            q.spare = batch;
        }
        if q.spare_bytes.capacity() < bytes.capacity() {
            q.spare_bytes = bytes;
        }
        if q.entries.is_empty() {
            q.leader = false;
            return BatchEnd::Released;
        }
        if keep_leading {
            BatchEnd::Continue
        } else if q.entries.iter().any(|e| e.ticket.offer_lead()) {
            BatchEnd::HandedOff
        } else {
            BatchEnd::Continue
        }
    }

    /// The critical section: assigns seq and timestamp, writes, syncs per
    /// policy, publishes and broadcasts.
    ///
    /// A close is always the batch's last entry (`enqueue` refuses work
    /// after it), so entry `i` is record `i`: `good`, the seqs and `ends`
    /// index records and entries alike.
    fn write_batch(&self, batch: &mut [Entry], bytes: &[u8]) -> Written {
        debug_assert!(
            batch
                .iter()
                .position(|e| matches!(e.work, Work::Close))
                .is_none_or(|i| i + 1 == batch.len()),
            "a close is the last entry of its batch"
        );
        let mut w = self.lock_writer();
        let w = &mut *w;
        let mut written = Written {
            first: w.next_seq,
            good: 0,
            failure: None,
            close: None,
        };
        if w.sink.is_none() {
            // Closed: records fail with `Closed`, a late close succeeds.
            written.close = Some(Ok(0));
            return written;
        }
        if batch.iter().any(|e| matches!(e.work, Work::Record { .. })) {
            match self.write_records(w, batch, bytes) {
                Ok(n) => written.good = n,
                Err((n, message, e)) => {
                    written.good = n;
                    written.failure = Some((message, e));
                }
            }
        }
        let first = w.next_seq;
        w.next_seq += written.good as u64;
        self.committed.store(w.acked, Ordering::Release);
        if written.good > 0 && !w.fanout.is_empty() {
            self.broadcast(w, batch, first, written.good);
        }
        // The batch's lines are no longer needed: a huge one does not pin
        // the writer's buffer.
        if w.buf.capacity() > MAX_KEPT_BUFFER {
            w.buf = Vec::with_capacity(64 * 1024);
        }
        if w.ends.capacity() > MAX_KEPT_BUFFER / 8 {
            w.ends = Vec::new();
        }
        // Read first: every producer reads this flag, so an unconditional
        // store would pull its cache line away from them once per batch.
        if w.fanout.is_empty() && self.fanout_live.load(Ordering::Relaxed) {
            self.fanout_live.store(false, Ordering::Release);
        }
        if batch.iter().any(|e| matches!(e.work, Work::Close)) {
            written.close = Some(self.finish_close(w));
        }
        written
    }

    /// Hands the first `good` records of the batch to the subscribers, in
    /// seq order. A record whose producer did not carry its draft (it saw
    /// no subscriber) is rebuilt from the line just written.
    fn broadcast(&self, w: &mut Writer, batch: &mut [Entry], first: Seq, good: usize) {
        let (run_id, parent, stamp) = (self.run_id, self.parent_run_id, w.stamp);
        for (i, entry) in batch.iter_mut().take(good).enumerate() {
            let Work::Record { draft, .. } = &mut entry.work else {
                continue;
            };
            let seq = first + i as u64;
            let line_start = if i == 0 { 0 } else { w.ends[i - 1] };
            let line = &w.buf[line_start..w.ends[i]];
            let path = &self.path;
            w.fanout.broadcast_with(seq, || match draft.take() {
                Some(draft) => Some(Arc::new(draft.into_event(seq, run_id, parent, stamp))),
                None => rebuild_event(line, path),
            });
        }
    }

    /// Writes the batch's records with as few `write(2)` calls as the kernel
    /// allows. Returns how many leading records are acknowledged; on error
    /// also the failure, after cutting the file back to whole lines.
    fn write_records(
        &self,
        w: &mut Writer,
        batch: &[Entry],
        bytes: &[u8],
    ) -> Result<usize, (usize, String, std::io::Error)> {
        let Some(sink) = w.sink.as_mut() else {
            return Ok(0);
        };
        if w.needs_repair {
            sink.truncate(w.acked).map_err(|e| {
                (
                    0,
                    "cannot cut a failed write back to the last acknowledged line".to_owned(),
                    e,
                )
            })?;
            w.needs_repair = false;
        }
        w.buf.clear();
        w.ends.clear();
        // Assigned together, under the lock (decision 15); never backwards.
        // One clock read per batch: its lines reach the kernel in one write.
        let ms = self.clock.now().unix_millis().max(w.last_ms);
        w.last_ms = ms;
        let stamp_bytes = w.stamp(ms);
        w.stamp = Timestamp::saturating_from_unix_millis(ms);
        let mut seq = w.next_seq;
        for entry in batch {
            if let Work::Record {
                start, split, end, ..
            } = entry.work
            {
                EncodedParts {
                    middle: &bytes[start..split],
                    payload: &bytes[split..end],
                }
                .write_line_with(seq, &stamp_bytes, &mut w.buf);
                w.ends.push(w.buf.len());
                seq += 1;
            }
        }
        let Some(sink) = w.sink.as_mut() else {
            return Ok(0);
        };
        let mut written = 0usize;
        let mut error = None;
        while written < w.buf.len() {
            match sink.write(&w.buf[written..]) {
                Ok(0) => {
                    error = Some(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "write returned 0 bytes",
                    ));
                    break;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        let mut whole = w.ends.partition_point(|&end| end <= written);
        let mut whole_bytes = if whole == 0 { 0 } else { w.ends[whole - 1] };
        let mut message = "write failed";
        if error.is_some() && written > whole_bytes {
            // A partial line: cut it off now, or before the next write.
            if sink.truncate(w.acked + whole_bytes as u64).is_err() {
                w.needs_repair = true;
            }
        }
        if whole > 0
            && self.durability == Durability::Always
            && let Err(e) = sink.sync_data()
        {
            // Not durable, so not acknowledged: none of this batch stays.
            if sink.truncate(w.acked).is_err() {
                w.needs_repair = true;
            } else if let Err(e2) = sink.sync_data() {
                tracing::warn!(path = %self.path.display(), "sync after cut-back failed: {e2}");
            }
            whole = 0;
            whole_bytes = 0;
            message = "fdatasync failed";
            error = Some(e);
        }
        // With `needs_repair` set, bytes after this point are garbage that the
        // next batch (or the next open) cuts off before anything is appended.
        w.acked += whole_bytes as u64;
        match error {
            None => Ok(whole),
            Some(e) => Err((whole, message.to_owned(), e)),
        }
    }

    /// Close work: final sync, end subscriptions, release the file and lock.
    fn finish_close(&self, w: &mut Writer) -> Result<Seq, RecordError> {
        let mut result = Ok(0);
        if let Some(mut sink) = w.sink.take() {
            if w.needs_repair && sink.truncate(w.acked).is_err() {
                tracing::warn!(path = %self.path.display(), "closing with an unrepaired partial line; the next open moves it to .torn");
            }
            if let Err(e) = sink.sync_data() {
                result = Err(storage_error(
                    &self.path,
                    "fdatasync at close failed",
                    Some(e),
                ));
            }
        }
        if let Some(mut f) = w.flusher.take() {
            f.stop();
        }
        w.fanout.close_all();
        w.closed = true;
        self.closed_tx.send_replace(true);
        result
    }

    fn subscribe(&self, from: Option<Seq>) -> Result<JsonlSubscription, RecordError> {
        let mut w = self.lock_writer();
        if w.closed {
            return Err(RecordError::Closed);
        }
        // From now on producers carry their drafts (records already queued
        // are rebuilt from their lines).
        self.fanout_live.store(true, Ordering::Release);
        let last = w.next_seq - 1;
        match from {
            None => {
                let (rx, counters, id) = w.fanout.register(self.subscriber_buffer, false);
                Ok(JsonlSubscription::live(id, rx, counters))
            }
            Some(seq) if seq == 0 || seq > last + 1 => Err(RecordError::Replay {
                requested: seq,
                reason: if seq == 0 {
                    "seq starts at 1".to_owned()
                } else {
                    format!("the last written seq is {last}")
                },
            }),
            Some(seq) => {
                let file = fs::open_read(&self.path)?;
                let tail = FileTail::new(file, self.path.clone(), Arc::clone(&self.committed));
                let (rx, counters, id) = w.fanout.register(self.subscriber_buffer, true);
                Ok(JsonlSubscription::replaying(id, rx, counters, tail, seq))
            }
        }
    }

    async fn close(&self) -> Result<(), RecordError> {
        let mut done = self.closed_tx.subscribe();
        let queued = self.enqueue(true, |_| Work::Close);
        let outcome = match queued {
            Ok((ticket, lead)) => self.wait_or_lead(ticket, lead).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(_) => Ok(()),
            Err(RecordError::Closed) => {
                // Someone else is closing: wait until it is finished.
                let _ = done.wait_for(|closed| *closed).await;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Arc;
    use std::sync::Mutex;

    use transcript_domain::{
        EventDraft, ManualClock, Payload, RecordError, Recorder, RunIdGenerator, SequentialRunIds,
        StepPayload, Timestamp,
    };

    use super::*;
    use crate::sink::{FileSink, Sink, SyncFn};

    /// Failures to inject, consumed as they trigger.
    #[derive(Default)]
    struct Faults {
        /// Next write: write only this many bytes, then fail the call after.
        short_then_enospc: Option<usize>,
        /// Fail the next N writes outright.
        fail_writes: u32,
        /// Fail the next N syncs.
        fail_syncs: u32,
        /// Fail the next N truncates.
        fail_truncates: u32,
        pending_enospc: bool,
        /// Told about every background (interval) sync and whether it worked.
        on_background_sync: Option<std::sync::mpsc::Sender<bool>>,
    }

    struct FaultySink {
        inner: FileSink,
        faults: Arc<Mutex<Faults>>,
    }

    fn enospc() -> io::Error {
        io::Error::from_raw_os_error(28)
    }

    impl Sink for FaultySink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut f = self.faults.lock().unwrap();
            if f.pending_enospc {
                f.pending_enospc = false;
                return Err(enospc());
            }
            if f.fail_writes > 0 {
                f.fail_writes -= 1;
                return Err(enospc());
            }
            if let Some(n) = f.short_then_enospc.take() {
                f.pending_enospc = true;
                return self.inner.write(&buf[..n.min(buf.len())]);
            }
            self.inner.write(buf)
        }

        fn sync_data(&mut self) -> io::Result<()> {
            let mut f = self.faults.lock().unwrap();
            if f.fail_syncs > 0 {
                f.fail_syncs -= 1;
                return Err(io::Error::other("injected EIO"));
            }
            self.inner.sync_data()
        }

        fn truncate(&mut self, len: u64) -> io::Result<()> {
            let mut f = self.faults.lock().unwrap();
            if f.fail_truncates > 0 {
                f.fail_truncates -= 1;
                return Err(io::Error::other("injected truncate failure"));
            }
            self.inner.truncate(len)
        }

        fn syncer(&self) -> io::Result<SyncFn> {
            let mut inner = self.inner.syncer()?;
            let faults = Arc::clone(&self.faults);
            Ok(Box::new(move || {
                let mut f = faults.lock().unwrap();
                let result = if f.fail_syncs > 0 {
                    f.fail_syncs -= 1;
                    Err(io::Error::other("injected EIO"))
                } else {
                    inner()
                };
                if let Some(tx) = &f.on_background_sync {
                    let _ = tx.send(result.is_ok());
                }
                result
            }))
        }
    }

    fn open_faulty(
        dir: &std::path::Path,
        durability: Durability,
    ) -> (JsonlRecorder, Arc<Mutex<Faults>>) {
        let faults = Arc::new(Mutex::new(Faults::default()));
        let f2 = Arc::clone(&faults);
        let rec = JsonlRecorder::builder(dir, SequentialRunIds::new().next_run_id())
            .clock(Arc::new(ManualClock::stepping(Timestamp::UNIX_EPOCH, 1)))
            .durability(durability)
            .open_with(move |inner| Box::new(FaultySink { inner, faults: f2 }))
            .unwrap();
        (rec, faults)
    }

    fn draft(name: &str) -> EventDraft {
        EventDraft::new(
            name,
            0,
            Payload::StepStarted(StepPayload::new(name, "agent")),
        )
    }

    fn file_seqs(rec: &JsonlRecorder) -> Vec<u64> {
        crate::reader::TranscriptReader::open(rec.path())
            .unwrap()
            .map(|item| match item.unwrap() {
                crate::ReadItem::Event(e) => e.event.seq,
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn short_write_then_disk_full_is_cut_back_and_seq_stays_gapless() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, faults) = open_faulty(tmp.path(), Durability::None);
        assert_eq!(rec.record(draft("a")).await.unwrap(), 1);
        let acked = rec.acknowledged_len();
        faults.lock().unwrap().short_then_enospc = Some(10);
        let err = rec.record(draft("b")).await.unwrap_err();
        assert!(
            matches!(&err, RecordError::Storage { source: Some(e), .. } if e.raw_os_error() == Some(28) || e.kind() == io::ErrorKind::StorageFull),
            "{err:?}"
        );
        assert_eq!(std::fs::metadata(rec.path()).unwrap().len(), acked);
        assert_eq!(rec.record(draft("c")).await.unwrap(), 2);
        rec.close().await.unwrap();
        assert_eq!(file_seqs(&rec), [1, 2]);
    }

    #[tokio::test]
    async fn failed_write_and_failed_cut_back_are_repaired_before_the_next_record() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, faults) = open_faulty(tmp.path(), Durability::None);
        rec.record(draft("a")).await.unwrap();
        {
            let mut f = faults.lock().unwrap();
            f.short_then_enospc = Some(5);
            f.fail_truncates = 1;
        }
        assert!(rec.record(draft("b")).await.is_err());
        // The partial line is still there: the repair is pending.
        assert!(std::fs::metadata(rec.path()).unwrap().len() > rec.acknowledged_len());
        // The repair fails once more: the record fails, nothing is written.
        faults.lock().unwrap().fail_truncates = 1;
        let err = rec.record(draft("c")).await.unwrap_err();
        assert!(err.to_string().contains("cut"), "{err}");
        // Now it succeeds, at seq 2.
        assert_eq!(rec.record(draft("d")).await.unwrap(), 2);
        rec.close().await.unwrap();
        assert_eq!(file_seqs(&rec), [1, 2]);
    }

    #[tokio::test]
    async fn failed_sync_under_always_is_not_acknowledged() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, faults) = open_faulty(tmp.path(), Durability::Always);
        rec.record(draft("a")).await.unwrap();
        let mut sub = rec.subscribe_jsonl(None).unwrap();
        faults.lock().unwrap().fail_syncs = 1;
        let err = rec.record(draft("b")).await.unwrap_err();
        assert!(err.to_string().contains("fdatasync"), "{err}");
        assert_eq!(
            std::fs::metadata(rec.path()).unwrap().len(),
            rec.acknowledged_len()
        );
        assert_eq!(rec.record(draft("c")).await.unwrap(), 2);
        rec.close().await.unwrap();
        assert_eq!(file_seqs(&rec), [1, 2]);
        // The subscriber saw only the acknowledged event.
        let ev = transcript_domain::Subscription::next(&mut sub)
            .await
            .unwrap();
        assert_eq!((ev.seq, ev.path.as_str()), (2, "c"));
        assert!(
            transcript_domain::Subscription::next(&mut sub)
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_failed_batch_fails_every_record_in_it_and_consumes_no_seq() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, faults) = open_faulty(tmp.path(), Durability::None);
        faults.lock().unwrap().fail_writes = 1;
        assert!(rec.record(draft("a")).await.is_err());
        let rec2 = rec.clone();
        let results = futures_join(&rec, &rec2).await;
        assert_eq!(results, [1, 2]);
        rec.close().await.unwrap();
        assert_eq!(file_seqs(&rec), [1, 2]);
    }

    async fn futures_join(a: &JsonlRecorder, b: &JsonlRecorder) -> Vec<u64> {
        let (x, y) = tokio::join!(a.record(draft("x")), b.record(draft("y")));
        let mut v = vec![x.unwrap(), y.unwrap()];
        v.sort();
        v
    }

    #[tokio::test]
    async fn close_reports_a_failed_final_sync_and_still_closes() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, faults) = open_faulty(tmp.path(), Durability::None);
        rec.record(draft("a")).await.unwrap();
        faults.lock().unwrap().fail_syncs = 1;
        assert!(rec.close().await.is_err());
        assert!(matches!(
            rec.record(draft("b")).await,
            Err(RecordError::Closed)
        ));
        rec.close().await.unwrap();
    }

    #[tokio::test]
    async fn interval_policy_flushes_in_the_background_and_stops_on_close() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, _faults) =
            open_faulty(tmp.path(), Durability::Interval(Duration::from_millis(5)));
        for i in 0..10 {
            assert_eq!(rec.record(draft("a")).await.unwrap(), i + 1);
        }
        rec.close().await.unwrap();
        // The flusher's duplicate descriptor is gone: the run can be reopened.
        let again = JsonlRecorder::builder(tmp.path(), rec.run_id())
            .open()
            .unwrap();
        assert_eq!(again.next_seq(), 11);
    }

    #[tokio::test]
    async fn interval_policy_syncs_dirty_data_in_the_background_and_survives_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let (tx, synced) = std::sync::mpsc::channel();
        let faults = Arc::new(Mutex::new(Faults {
            on_background_sync: Some(tx),
            fail_syncs: 1,
            ..Faults::default()
        }));
        let f2 = Arc::clone(&faults);
        let rec = JsonlRecorder::builder(tmp.path(), SequentialRunIds::new().next_run_id())
            .durability(Durability::Interval(Duration::ZERO))
            .open_with(move |inner| Box::new(FaultySink { inner, faults: f2 }))
            .unwrap();
        rec.record(draft("a")).await.unwrap();
        // The first background sync fails (logged), the next one succeeds.
        assert!(!synced.recv().unwrap());
        assert!(synced.recv().unwrap());
        // Clean data: no further syncs until something new is written.
        assert!(synced.try_recv().is_err());
        rec.record(draft("b")).await.unwrap();
        assert!(synced.recv().unwrap());
        rec.close().await.unwrap();
        assert_eq!(file_seqs(&rec), [1, 2]);
    }

    #[tokio::test]
    async fn a_leader_dropped_while_yielding_still_writes_its_batch() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, _) = open_faulty(tmp.path(), Durability::None);
        assert_eq!(rec.record(draft("a")).await.unwrap(), 1);
        assert_eq!(rec.record(draft("b")).await.unwrap(), 2);
        // As after a batch of several lines: the next leader yields first.
        rec.shared.lock_queue().last_batch = 2;
        {
            let mut leader = std::pin::pin!(rec.record(draft("c")));
            let mut follower = std::pin::pin!(rec.record(draft("d")));
            let poll = |f: Pin<&mut dyn Future<Output = Result<Seq, RecordError>>>| {
                let waker = Waker::noop();
                let mut cx = Context::from_waker(waker);
                f.poll(&mut cx).is_pending()
            };
            assert!(poll(leader.as_mut()), "leader yields");
            assert!(poll(follower.as_mut()), "follower waits");
            assert_eq!(
                rec.acknowledged_len(),
                std::fs::metadata(rec.path()).unwrap().len()
            );
            // Both futures are dropped here, the leader mid-yield.
        }
        assert_eq!(file_seqs(&rec), [1, 2, 3, 4]);
        assert_eq!(rec.record(draft("e")).await.unwrap(), 5);
        rec.close().await.unwrap();
    }

    #[test]
    fn stamp_cache_matches_canonical_formatting() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, _) = open_faulty(tmp.path(), Durability::None);
        let mut w = rec.shared.lock_writer();
        for ms in [
            0i64,
            999,
            1000,
            1_780_000_123_456,
            1_780_000_123_999,
            -1,
            -1001,
        ] {
            assert_eq!(
                w.stamp(ms),
                Timestamp::saturating_from_unix_millis(ms).canonical_bytes(),
                "{ms}"
            );
        }
    }

    /// Queues a record the way `record` does, without leading or waiting.
    fn queue_record(shared: &Shared, draft: EventDraft, carry: bool) -> (Arc<Ticket>, bool) {
        let mut buf = Vec::new();
        let split =
            PreEncoded::encode_into(shared.run_id, shared.parent_run_id, &draft, &mut buf).unwrap();
        shared
            .enqueue_record(&buf, split, carry.then_some(draft))
            .unwrap()
    }

    #[tokio::test]
    async fn a_subscriber_arriving_after_a_record_was_queued_without_its_draft_still_gets_it() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = JsonlRecorder::builder(tmp.path(), SequentialRunIds::new().next_run_id())
            .clock(Arc::new(ManualClock::stepping(Timestamp::UNIX_EPOCH, 1)))
            .open()
            .unwrap();
        let shared = &rec.shared;
        // No subscriber yet: producers do not carry drafts.
        assert!(!shared.fanout_live.load(Ordering::Acquire));
        let (t1, lead) = queue_record(shared, draft("queued-before"), false);
        assert!(lead, "nobody leads yet");
        // The subscriber registers while that record waits in the queue;
        // a second record sees it and carries its draft.
        let mut sub = rec.subscribe_jsonl(None).unwrap();
        assert!(shared.fanout_live.load(Ordering::Acquire));
        let (t2, lead) = queue_record(shared, draft("queued-after"), true);
        assert!(!lead);
        assert_eq!(shared.run_batch(false), BatchEnd::Released);
        assert_eq!(t1.take_outcome().unwrap().unwrap(), 1);
        assert_eq!(t2.take_outcome().unwrap().unwrap(), 2);
        let rebuilt = sub.next().await.unwrap();
        let carried = sub.next().await.unwrap();
        assert_eq!((rebuilt.seq, carried.seq), (1, 2));
        // The rebuilt event is exactly the one the draft would have made,
        // and both share the batch's timestamp.
        let expected = draft("queued-before").into_event(1, rec.run_id(), None, carried.timestamp);
        assert_eq!(*rebuilt, expected);
        assert_eq!(carried.path, "queued-after");
        // Lines on disk and events delivered agree byte for byte.
        let text = std::fs::read_to_string(rec.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], rebuilt.to_line().unwrap().trim_end());
        assert_eq!(lines[1], carried.to_line().unwrap().trim_end());
        // With the last subscriber gone, producers stop carrying drafts
        // (noticed at the next batch).
        drop(sub);
        assert_eq!(rec.record(draft("after")).await.unwrap(), 3);
        assert!(!shared.fanout_live.load(Ordering::Acquire));
        rec.close().await.unwrap();
    }

    #[test]
    fn a_finished_records_ticket_is_reset_and_reused_by_the_next_record_on_its_thread() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = JsonlRecorder::builder(tmp.path(), SequentialRunIds::new().next_run_id())
            .open()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        TICKETS.with_borrow_mut(Vec::clear);
        assert_eq!(rt.block_on(rec.record(draft("a"))).unwrap(), 1);
        let kept = TICKETS.with_borrow(|k| k.iter().map(Arc::as_ptr).collect::<Vec<_>>());
        assert_eq!(kept.len(), 1, "the finished ticket is kept");
        let t = TICKETS.with_borrow(|k| Arc::clone(&k[0]));
        assert!(!t.signalled.load(Ordering::Acquire));
        assert!(t.lock().outcome.is_none() && !t.lock().lead && !t.lock().abandoned);
        drop(t);
        assert_eq!(rt.block_on(rec.record(draft("b"))).unwrap(), 2);
        let again = TICKETS.with_borrow(|k| k.iter().map(Arc::as_ptr).collect::<Vec<_>>());
        assert_eq!(again, kept, "the next record reused it");
        // A ticket someone still holds is not kept.
        let held = new_ticket();
        let other = Arc::clone(&held);
        recycle(held);
        assert!(TICKETS.with_borrow(Vec::is_empty));
        drop(other);
        rt.block_on(rec.close()).unwrap();
    }

    #[tokio::test]
    async fn subscribers_and_the_file_agree_on_a_non_canonical_draft() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = JsonlRecorder::builder(tmp.path(), SequentialRunIds::new().next_run_id())
            .open()
            .unwrap();
        let mut sub = rec.subscribe_jsonl(None).unwrap();
        let mut step = StepPayload::new("s", "agent");
        step.error = Some(String::new());
        rec.record(EventDraft::new("s", 0, Payload::StepCompleted(step)))
            .await
            .unwrap();
        let live = sub.next().await.unwrap();
        assert_eq!(live.payload.as_step().unwrap().error, None);
        let text = std::fs::read_to_string(rec.path()).unwrap();
        assert!(!text.contains("\"error\""), "{text}");
        let stored = transcript_domain::decode_str(&text)
            .unwrap()
            .event
            .to_event()
            .unwrap();
        assert_eq!(stored, *live);
        rec.close().await.unwrap();
    }
}
