//! What the recorder's handles and its writer thread exchange: queued records and their
//! answers, the close request, and the state published under one lock.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::{Semaphore, oneshot};
use transcript_domain::{EventDraft, RecordError, Seq};

use super::WriteStats;
use crate::fanout::FanOut;

/// One queued record: its encoded parts (`bytes[..split]` the envelope
/// middle, `bytes[split..]` the payload, see
/// [`transcript_domain::PreEncoded::encode_into`]), its draft (moved, to
/// build the broadcast event without re-decoding) and where its outcome goes.
pub(super) struct Entry {
    pub(super) bytes: Vec<u8>,
    pub(super) split: usize,
    pub(super) draft: EventDraft,
    /// Room it holds in the record queue (returned once it is written).
    pub(super) permits: u32,
    pub(super) ack: oneshot::Sender<Answer>,
}

/// The writer thread's answer to a record: its outcome, and what the record allocated, handed
/// back so the producer's thread frees it. Freed here instead, every record's buffers went
/// back to another thread's allocator arena, which cost a record more than the hand-off
/// itself (a bare round trip carrying a 400-byte buffer: 2.0 µs freed on the far side,
/// 0.56 µs handed back).
pub(super) struct Answer {
    pub(super) outcome: Result<Seq, RecordError>,
    /// Dropped by the producer (the draft is gone when it was broadcast).
    pub(super) _spent: (Vec<u8>, Option<EventDraft>),
}

impl Entry {
    /// Answers this record with `outcome`, handing its buffers back and its
    /// room in the queue.
    pub(super) fn answer(self, outcome: Result<Seq, RecordError>, room: &Semaphore) {
        room.add_permits(self.permits as usize);
        let _ = self.ack.send(Answer {
            outcome,
            _spent: (self.bytes, Some(self.draft)),
        });
    }
}

/// What producers send the writer thread.
// Records are the common case; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
pub(super) enum Msg {
    Record(Entry),
    /// Write everything queued before it, sync, end subscriptions, release
    /// the file and lock, then answer.
    Close(oneshot::Sender<Result<(), RecordError>>),
}

/// What the API side reads and the writer thread publishes, under one lock
/// so that a subscription is registered at an exact seq.
pub(super) struct Published {
    /// The seq the next written record gets.
    pub(super) next_seq: Seq,
    pub(super) fanout: FanOut,
    pub(super) stats: WriteStats,
    /// The file is released; nothing more is written.
    pub(super) closed: bool,
    /// The writer thread panicked with this message.
    pub(super) panicked: Option<String>,
}

pub(super) fn lock(published: &Mutex<Published>) -> MutexGuard<'_, Published> {
    published.lock().unwrap_or_else(|e| e.into_inner())
}
