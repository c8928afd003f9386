//! A subscription to a recorder: live (the fan-out's buffer, drop-newest) or replay-then-live,
//! the state machine that reads stored events from the file ([`crate::file_tail`], off the
//! runtime's workers), then follows the live buffer, and goes back to the file whenever the
//! buffer overflowed or the recorder closed, so a replaying subscriber never misses an
//! acknowledged event it could read.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use transcript_domain::{ExchangeEvent, Seq, Subscription};

use crate::chan::{Receiver, TryRecvError};
use crate::fanout::SubCounters;
use crate::file_tail::{FileTail, Stored};

/// A subscription to a [`crate::JsonlRecorder`].
///
/// Live (`subscribe(None)`): events in seq order as they are written;
/// when its buffer is full, newer events are dropped for it and counted in
/// [`Subscription::dropped`]. Replaying (`subscribe(Some(seq))`): stored
/// events from `seq` read from the file, then live ones; when it falls
/// behind it reads the file again instead of dropping.
pub struct JsonlSubscription {
    id: u64,
    rx: Receiver<Arc<ExchangeEvent>>,
    counters: Arc<SubCounters>,
    closed: bool,
    live_ended: bool,
    pending: Option<Arc<ExchangeEvent>>,
    replay: Option<Replay>,
}

impl std::fmt::Debug for JsonlSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlSubscription")
            .field("id", &self.id)
            .field("closed", &self.closed)
            .field("replaying", &self.replay.is_some())
            .finish_non_exhaustive()
    }
}

impl JsonlSubscription {
    pub(crate) fn live(
        id: u64,
        rx: Receiver<Arc<ExchangeEvent>>,
        counters: Arc<SubCounters>,
    ) -> Self {
        Self {
            id,
            rx,
            counters,
            closed: false,
            live_ended: false,
            pending: None,
            replay: None,
        }
    }

    pub(crate) fn replaying(
        id: u64,
        rx: Receiver<Arc<ExchangeEvent>>,
        counters: Arc<SubCounters>,
        tail: FileTail,
        from: Seq,
    ) -> Self {
        Self {
            replay: Some(Replay {
                tail: Tail::Idle(Box::new(tail)),
                ready: VecDeque::new(),
                wanted: from,
                catching_up: true,
            }),
            ..Self::live(id, rx, counters)
        }
    }

    /// The subscription's id (matches [`SubscriberStats::id`]).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Hands out `ev` (seq >= the wanted one), counting any seqs it skips
    /// over as dropped.
    fn deliver(&mut self, ev: Arc<ExchangeEvent>) -> Arc<ExchangeEvent> {
        if let Some(replay) = self.replay.as_mut() {
            let missed = ev.seq.saturating_sub(replay.wanted);
            if missed > 0 {
                self.counters.dropped.fetch_add(missed, Ordering::Relaxed);
            }
            // A seq of u64::MAX is never written (resume refuses it), so
            // saturating cannot deliver an event twice.
            replay.wanted = ev.seq.saturating_add(1);
        }
        ev
    }

    async fn next_replaying(&mut self) -> Option<Arc<ExchangeEvent>> {
        loop {
            let replay = self.replay.as_mut()?;
            if replay.catching_up {
                match replay.next_stored().await {
                    // Read ahead before `wanted` moved past it (or a
                    // foreign file's lines out of order).
                    Stored::Event(ev) if ev.seq < replay.wanted => continue,
                    Stored::Skipped(Some(seq)) if seq < replay.wanted => continue,
                    Stored::Event(ev) => return Some(self.deliver(ev)),
                    Stored::Skipped(Some(seq)) => {
                        // Never a silent gap: what cannot be rebuilt counts
                        // as dropped.
                        let missed = seq.saturating_sub(replay.wanted).saturating_add(1);
                        self.counters.dropped.fetch_add(missed, Ordering::Relaxed);
                        replay.wanted = seq.saturating_add(1);
                        continue;
                    }
                    // Counted by the gap before the next event delivered.
                    Stored::Skipped(None) => continue,
                    Stored::End => {}
                }
                replay.catching_up = false;
                if let Some(ev) = self.pending.take() {
                    // The file had nothing more before this live event
                    // (lines that could not be replayed, or a read error):
                    // deliver it, counting the gap.
                    if ev.seq >= replay.wanted {
                        return Some(self.deliver(ev));
                    }
                }
            }
            let ev = match self.pending.take() {
                Some(ev) => ev,
                None => match self.rx.try_recv() {
                    Ok(ev) => ev,
                    Err(TryRecvError::Empty) => {
                        if self.counters.lagged.swap(false, Ordering::AcqRel) {
                            replay.catching_up = true;
                            continue;
                        }
                        match self.rx.recv().await {
                            Some(ev) => ev,
                            None => {
                                self.live_ended = true;
                                continue;
                            }
                        }
                    }
                    Err(TryRecvError::Disconnected) => {
                        if self.live_ended {
                            return None;
                        }
                        // Recorder closed: whatever was acknowledged but not
                        // buffered is still in the file.
                        self.live_ended = true;
                        replay.catching_up = true;
                        continue;
                    }
                },
            };
            let replay = self.replay.as_mut()?;
            if ev.seq < replay.wanted {
                continue;
            }
            if ev.seq == replay.wanted {
                return Some(self.deliver(ev));
            }
            // A gap: the buffer overflowed; the missing lines are in the file.
            self.pending = Some(ev);
            replay.catching_up = true;
        }
    }
}

#[async_trait]
impl Subscription for JsonlSubscription {
    async fn next(&mut self) -> Option<Arc<ExchangeEvent>> {
        if self.closed {
            return None;
        }
        if self.replay.is_some() {
            self.next_replaying().await
        } else {
            self.rx.recv().await
        }
    }

    fn close(&mut self) {
        self.closed = true;
        self.rx.close();
        self.pending = None;
        self.replay = None;
    }

    fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }
}

/// Where a replaying subscription's file reader is.
enum Tail {
    /// Idle, between reads.
    Idle(Box<FileTail>),
    /// Reading on the blocking pool. Kept across a cancelled `next()`, so
    /// the next call picks up the same read.
    Reading(tokio::task::JoinHandle<(Box<FileTail>, Vec<Stored>)>),
    /// The read task failed (the runtime is shutting down): nothing more
    /// comes from the file.
    Gone,
}

/// The replay side of a replaying subscription: where its file read is, what it read ahead,
/// and the next seq it owes its consumer.
struct Replay {
    tail: Tail,
    /// Items read from the file, not yet delivered.
    ready: VecDeque<Stored>,
    /// Next seq this subscription delivers.
    wanted: Seq,
    /// Reading the file (not the live buffer) until it is exhausted.
    catching_up: bool,
}

impl Replay {
    /// The next stored item at or after `wanted`, read off the runtime's
    /// workers (inline when polled outside a Tokio runtime: there is no
    /// worker to block then).
    async fn next_stored(&mut self) -> Stored {
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
