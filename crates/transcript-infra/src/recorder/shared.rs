//! The state every handle of a recorder shares, and the producer side of
//! the concurrency design (see the parent module): `record`, `subscribe`,
//! `close`, and the drop of the last handle.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, TryAcquireError, oneshot, watch};
use transcript_domain::{
    EventDraft, EventMask, MAX_LINE_BYTES, PreEncoded, RecordError, RunId, Seq,
};

use super::queue::{Entry, Msg, Published, lock};
use super::{Durability, polling};
use crate::file_tail::FileTail;
use crate::fs::storage_error;
use crate::resume::ResumeInfo;
use crate::subscription::JsonlSubscription;

/// What every handle of one recorder shares.
pub(super) struct Shared {
    pub(super) run_id: RunId,
    pub(super) parent_run_id: Option<RunId>,
    pub(super) path: PathBuf,
    pub(super) mask: Option<Arc<dyn EventMask>>,
    pub(super) durability: Durability,
    pub(super) subscriber_buffer: usize,
    /// `None` only while dropping (disconnects the writer thread).
    pub(super) tx: Option<std_mpsc::Sender<Msg>>,
    pub(super) published: Arc<Mutex<Published>>,
    /// Acknowledged file length, published before acknowledgement.
    pub(super) committed: Arc<AtomicU64>,
    pub(super) resume: ResumeInfo,
    /// Room in the record queue, in bytes of encoded lines: taken by
    /// `record`, given back by the writer thread once the line is written.
    pub(super) room: Arc<Semaphore>,
    pub(super) max_queued_bytes: u32,
    /// Set by the writer thread as its very last act (after a close, the
    /// last handle's drop, or a panic), when `Published` says how it ended.
    pub(super) ended: watch::Receiver<bool>,
}

/// The longest line `encoded` bytes of parts can make: `{"seq":` plus up
/// to 20 digits, `,"timestamp":"`, 24 bytes of time, `","payload":` and `}`.
fn line_bound(encoded: usize) -> usize {
    encoded + 7 + 20 + 14 + 24 + 12 + 1
}

/// Masks, validates and encodes `draft` into `bytes` (replacing what they held) for the run `(run_id,
/// parent_run_id)`; returns where the payload starts (see
/// [`PreEncoded::encode_into`]). Shared by the recorder and
/// [`BulkWriter`](crate::BulkWriter), so both write the same bytes and refuse the same drafts.
pub(crate) fn encode_draft(
    (run_id, parent_run_id): (RunId, Option<RunId>),
    mask: Option<&dyn EventMask>,
    draft: &mut EventDraft,
    bytes: &mut Vec<u8>,
) -> Result<usize, RecordError> {
    if let Some(mask) = mask {
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
    draft.validate()?;
    // What subscribers get from the draft then equals what the line
    // decodes to.
    draft.payload.canonicalize();
    bytes.clear();
    let split = PreEncoded::encode_into(run_id, parent_run_id, draft, bytes)
        .map_err(|e| RecordError::Encode(e.to_string()))?;
    // The reader refuses longer lines: never write one (the caller
    // truncates big values before).
    let length = line_bound(bytes.len());
    if length > MAX_LINE_BYTES {
        return Err(RecordError::TooLarge {
            length,
            limit: MAX_LINE_BYTES,
        });
    }
    Ok(split)
}

impl Shared {
    fn send(&self, msg: Msg) -> Result<(), RecordError> {
        match &self.tx {
            Some(tx) => tx.send(msg).map_err(|_| RecordError::Closed),
            None => Err(RecordError::Closed),
        }
    }

    /// Masks, validates and encodes `draft` on the caller's task.
    fn prepare(&self, mut draft: EventDraft) -> Result<(Vec<u8>, usize, EventDraft), RecordError> {
        let mut bytes = Vec::with_capacity(512);
        let split = encode_draft(
            (self.run_id, self.parent_run_id),
            self.mask.as_deref(),
            &mut draft,
            &mut bytes,
        )?;
        Ok((bytes, split, draft))
    }

    pub(super) async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        let (bytes, split, draft) = self.prepare(draft)?;
        // The backpressure rule (see `max_queued_bytes`). A future dropped
        // while it waits here has queued nothing.
        let permits = u32::try_from(bytes.len())
            .unwrap_or(u32::MAX)
            .clamp(1, self.max_queued_bytes);
        match self.room.try_acquire_many(permits) {
            Ok(permit) => permit.forget(),
            Err(TryAcquireError::NoPermits) => match self.room.acquire_many(permits).await {
                Ok(permit) => permit.forget(),
                Err(_) => return Err(self.ended_error().await),
            },
            Err(TryAcquireError::Closed) => return Err(self.ended_error().await),
        }
        let (ack, mut acked) = oneshot::channel();
        // From here on nothing awaits before the entry is queued.
        if self
            .send(Msg::Record(Entry {
                bytes,
                split,
                draft,
                permits,
                ack,
            }))
            .is_err()
        {
            return Err(self.ended_error().await);
        }
        // Poll for the answer (at most 20 µs, none on a single CPU, and only
        // with one of the process-wide polling slots, see `polling.rs`),
        // yielding between polls so other tasks on this worker run, before
        // suspending: the writer thread answers within a microsecond or two
        // unless it syncs, and a parked worker's wake-up costs far more.
        // Under Always the answer waits for a sync: suspend at once.
        if self.durability != Durability::Always
            && let Some(_slot) = polling::PollSlot::take()
        {
            let polling = std::time::Instant::now();
            while polling.elapsed() < polling::poll_budget() {
                match acked.try_recv() {
                    Ok(answer) => return answer.outcome,
                    Err(oneshot::error::TryRecvError::Closed) => {
                        return Err(self.ended_error().await);
                    }
                    Err(oneshot::error::TryRecvError::Empty) => tokio::task::yield_now().await,
                }
            }
        }
        // A dropped sender means the thread ended without answering: a
        // close raced past it, or the thread panicked (the line may be on
        // disk or not).
        match acked.await {
            Ok(answer) => answer.outcome,
            Err(_) => Err(self.ended_error().await),
        }
    }

    /// Why the writer thread ended, once it has: [`RecordError::Closed`]
    /// after a close, or a storage error naming its panic.
    async fn ended_error(&self) -> RecordError {
        let mut ended = self.ended.clone();
        // An error means the thread is gone, so it ended as well.
        let _ = ended.wait_for(|ended| *ended).await;
        self.end_state(&lock(&self.published))
    }

    fn end_state(&self, p: &Published) -> RecordError {
        match &p.panicked {
            Some(message) => storage_error(
                &self.path,
                "the writer thread panicked; events in flight may or may not be on disk",
                Some(std::io::Error::other(message.clone())),
            ),
            None => RecordError::Closed,
        }
    }

    pub(super) fn subscribe(&self, from: Option<Seq>) -> Result<JsonlSubscription, RecordError> {
        let mut p = lock(&self.published);
        if p.closed {
            return Err(self.end_state(&p));
        }
        let next = p.next_seq;
        match from {
            None => {
                let (rx, counters, id) = p.fanout.register(self.subscriber_buffer, false);
                Ok(JsonlSubscription::live(id, rx, counters))
            }
            Some(seq) if seq == 0 || seq > next => Err(RecordError::Replay {
                requested: seq,
                reason: if seq == 0 {
                    "seq starts at 1".to_owned()
                } else {
                    format!("the last written seq is {}", next - 1)
                },
            }),
            Some(seq) => {
                // No file access here: the subscription opens and reads the
                // file off the runtime's workers, and without this lock.
                let tail = FileTail::new(self.path.clone(), Arc::clone(&self.committed));
                let (rx, counters, id) = p.fanout.register(self.subscriber_buffer, true);
                Ok(JsonlSubscription::replaying(id, rx, counters, tail, seq))
            }
        }
    }

    pub(super) async fn close(&self) -> Result<(), RecordError> {
        let (ack, done) = oneshot::channel();
        if self.send(Msg::Close(ack)).is_ok()
            && let Ok(result) = done.await
        {
            return result;
        }
        // The thread is gone: closed by an earlier close, or it panicked.
        match self.ended_error().await {
            RecordError::Closed => Ok(()),
            panicked => Err(panicked),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Never waits for the writer thread (this may be an async worker,
        // and the thread may be inside a write or a sync): the thread
        // finishes what is queued and releases the file on its own. Until it
        // has, an open of this run in this process waits for it.
        {
            let p = lock(&self.published);
            if !p.closed {
                crate::release::begin(&self.path);
            }
        }
        // Disconnect.
        self.tx = None;
    }
}
