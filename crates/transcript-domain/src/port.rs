//! Ports: the [`Recorder`] the execution side emits through, its
//! [`Subscription`]s, the [`RecorderFactory`] for child runs, and the
//! [`Clock`] / [`RunIdGenerator`] that keep time and ids injectable.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use async_trait::async_trait;

use crate::event::{EventDraft, ExchangeEvent};
use crate::ids::{RunId, Seq};
use crate::payload::Payload;
use crate::timestamp::Timestamp;

/// Why a record, subscribe or close failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The recorder was closed; nothing was written.
    #[error("recorder is closed")]
    Closed,
    /// Another recorder (in this or another process) holds the run's file.
    #[error("transcript {path} is locked by another writer")]
    Locked {
        /// The transcript path.
        path: String,
    },
    /// The storage refused the operation (disk full, permissions, symlink…).
    /// For `record`, nothing of this event is on disk and its seq is unused.
    /// The message ends with the OS cause (e.g. `No space left on device (os error 28)`).
    #[error("transcript {path}: {message}{}", cause(source.as_ref()))]
    Storage {
        /// The transcript or storage path.
        path: String,
        /// What was being done.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The event could not be serialized.
    #[error("event could not be encoded: {0}")]
    Encode(String),
    /// The draft breaks a structural rule of the wire contract ([`crate::EventDraft::validate`]);
    /// nothing was written and no seq was used.
    #[error("invalid event: {0}")]
    Invalid(#[from] crate::InvalidDraft),
    /// The encoded line would be longer than [`crate::MAX_LINE_BYTES`], which readers refuse;
    /// nothing was written and no seq was used (callers truncate large values first).
    #[error("event line of {length} bytes exceeds the {limit}-byte line cap")]
    TooLarge {
        /// The encoded line's length, in bytes.
        length: usize,
        /// The cap.
        limit: usize,
    },
    /// `subscribe(Some(seq))` asked for a seq that is not valid here.
    #[error("cannot replay from seq {requested}: {reason}")]
    Replay {
        /// The requested seq.
        requested: Seq,
        /// Why.
        reason: String,
    },
}

/// `: <cause>` for a storage error's source, so every message names the OS cause.
fn cause(source: Option<&std::io::Error>) -> String {
    source.map(|e| format!(": {e}")).unwrap_or_default()
}

/// The domain port for emission and subscription (FR-011).
///
/// The recorder, not the caller, assigns `seq`, `timestamp`, `run_id` and
/// `parent_run_id`: callers submit an [`EventDraft`]. Implementations must
/// write in seq order with no gaps, broadcast to subscribers only after the
/// write, and make [`Recorder::close`] idempotent.
#[async_trait]
pub trait Recorder: Send + Sync {
    /// The run this recorder writes.
    fn run_id(&self) -> RunId;

    /// The invoking run, for a child run's recorder.
    fn parent_run_id(&self) -> Option<RunId>;

    /// Records one event and returns its seq once it is durable per the
    /// recorder's policy. After `close`, returns [`RecordError::Closed`].
    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError>;

    /// Subscribes to events. `None`: every event written after this call.
    /// `Some(seq)`: the stored events from `seq` on, then the live ones, with
    /// no gap and no duplicate at the seam.
    async fn subscribe(&self, from: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError>;

    /// Flushes, syncs and releases the run. Idempotent; ends every subscription.
    async fn close(&self) -> Result<(), RecordError>;
}

/// A live (or replay-then-live) view of a recorder's events.
#[async_trait]
pub trait Subscription: Send {
    /// The next event in seq order; `None` once the subscription or the
    /// recorder is closed and everything buffered was delivered.
    async fn next(&mut self) -> Option<Arc<ExchangeEvent>>;

    /// Stops delivery. Idempotent.
    fn close(&mut self);

    /// Events this subscriber missed because its buffer was full.
    fn dropped(&self) -> u64;
}

/// Creates recorders for runs: the root run and each child run of a
/// `call_workflow` step (decision 7: one file per run, each with its own seq).
#[async_trait]
pub trait RecorderFactory: Send + Sync {
    /// Opens the recorder of `run_id`, whose events carry `parent_run_id`.
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError>;
}

/// A masking stage applied to each draft before it is encoded, written or
/// broadcast (the opt-in redaction hook of the threat model).
pub trait EventMask: Send + Sync {
    /// Rewrites content in place. Must not change the event type.
    fn mask(&self, payload: &mut Payload);
}

/// The source of event timestamps.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The source of new run ids.
pub trait RunIdGenerator: Send + Sync {
    /// A fresh run id.
    fn next_run_id(&self) -> RunId;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

impl<G: RunIdGenerator + ?Sized> RunIdGenerator for Arc<G> {
    fn next_run_id(&self) -> RunId {
        (**self).next_run_id()
    }
}

/// A clock that moves only when told to, for byte-stable goldens.
///
/// Optionally advances by a fixed step on every read, which gives distinct,
/// increasing timestamps without a test having to move it.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
    step_ms: i64,
}

impl ManualClock {
    /// A clock frozen at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self {
            now_ms: AtomicI64::new(start.unix_millis()),
            step_ms: 0,
        }
    }

    /// A clock at `start` that advances `step_ms` after each read.
    pub fn stepping(start: Timestamp, step_ms: i64) -> Self {
        Self {
            now_ms: AtomicI64::new(start.unix_millis()),
            step_ms,
        }
    }

    /// Moves the clock forward (or back, with a negative value).
    pub fn advance(&self, ms: i64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, to: Timestamp) {
        self.now_ms.store(to.unix_millis(), Ordering::SeqCst);
    }

    /// The current reading without advancing.
    pub fn peek(&self) -> Timestamp {
        Timestamp::saturating_from_unix_millis(self.now_ms.load(Ordering::SeqCst))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::saturating_from_unix_millis(
            self.now_ms.fetch_add(self.step_ms, Ordering::SeqCst),
        )
    }
}

/// Run ids `00000000-0000-4000-8000-000000000001`, `…0002`, … (valid v4
/// layout), for deterministic tests and goldens.
#[derive(Debug)]
pub struct SequentialRunIds {
    next: AtomicU64,
    prefix: u32,
}

impl SequentialRunIds {
    /// Starts at 1 with prefix 0.
    pub fn new() -> Self {
        Self::with_prefix(0)
    }

    /// Starts at 1; the first eight hex digits are `prefix` (keeps
    /// generators of different tests apart).
    pub fn with_prefix(prefix: u32) -> Self {
        Self {
            next: AtomicU64::new(1),
            prefix,
        }
    }
}

impl Default for SequentialRunIds {
    fn default() -> Self {
        Self::new()
    }
}

impl RunIdGenerator for SequentialRunIds {
    fn next_run_id(&self) -> RunId {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let mut bytes = [0u8; 16];
        bytes[0..4].copy_from_slice(&self.prefix.to_be_bytes());
        bytes[6] = 0x40; // version 4
        bytes[8] = 0x80; // RFC 4122 variant
        bytes[10..16].copy_from_slice(&n.to_be_bytes()[2..8]);
        RunId::from_bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_are_valid_and_distinct() {
        let g = SequentialRunIds::new();
        let a = g.next_run_id();
        let b = g.next_run_id();
        assert_eq!(a.to_string(), "00000000-0000-4000-8000-000000000001");
        assert_eq!(b.to_string(), "00000000-0000-4000-8000-000000000002");
        assert_eq!(a.as_uuid().get_version_num(), 4);
        let p = SequentialRunIds::with_prefix(0xabcd).next_run_id();
        assert_eq!(p.to_string(), "0000abcd-0000-4000-8000-000000000001");
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Timestamp::UNIX_EPOCH);
        assert_eq!(c.now(), c.now());
        c.advance(1500);
        assert_eq!(c.now().to_string(), "1970-01-01T00:00:01.500Z");
        let s = ManualClock::stepping(Timestamp::UNIX_EPOCH, 10);
        assert_eq!(s.now().unix_millis(), 0);
        assert_eq!(s.now().unix_millis(), 10);
        assert_eq!(s.peek().unix_millis(), 20);
        s.set(Timestamp::UNIX_EPOCH);
        assert_eq!(s.peek().unix_millis(), 0);
    }
}
