//! Live fan-out (write-then-broadcast) and subscriptions, including
//! replay-then-live from the file.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::chan::{self, Linger, PushError, Pushed, Receiver, Sender, TryRecvError};
use crate::replay::{FileTail, Replay, Stored, Tail};
use async_trait::async_trait;
use serde::Serialize;
use transcript_domain::{ExchangeEvent, Seq, Subscription};

/// Default per-subscriber buffer (events), from the wire contract.
pub const DEFAULT_SUBSCRIBER_BUFFER: usize = 256;

const WARN_EVERY: Duration = Duration::from_secs(1);

/// Counters shared between the broadcaster and one subscription.
#[derive(Debug, Default)]
pub(crate) struct SubCounters {
    dropped: AtomicU64,
    /// Set by the broadcaster when a replaying subscriber's buffer was full:
    /// the subscriber must catch up from the file.
    lagged: AtomicBool,
}

struct SubEntry {
    id: u64,
    tx: Sender<Arc<ExchangeEvent>>,
    counters: Arc<SubCounters>,
    replaying: bool,
    last_warn: Option<Instant>,
}

impl SubEntry {
    /// The buffer was full for event `seq`: a replaying subscriber will
    /// re-read the file; a live one loses the event (drop-newest).
    fn full(&mut self, seq: Seq) {
        if self.replaying {
            self.counters.lagged.store(true, Ordering::Release);
            return;
        }
        let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        // Reading the clock on every drop would cost the writer; every 64th
        // drop (and the first) is often enough for a once-per-second warning.
        if dropped % 64 != 1 {
            return;
        }
        let now = Instant::now();
        if self
            .last_warn
            .is_none_or(|t| now.duration_since(t) >= WARN_EVERY)
        {
            self.last_warn = Some(now);
            tracing::warn!(
                subscriber = self.id,
                dropped,
                seq,
                "transcript subscriber is not keeping up; dropping newest events"
            );
        }
    }
}

/// Subscriber registry; lives under the lock the writer thread publishes
/// each batch under, so a registration is ordered with respect to writes.
#[derive(Default)]
pub(crate) struct FanOut {
    subs: Vec<SubEntry>,
    next_id: u64,
    /// Drops of subscribers that are gone.
    retired_drops: u64,
    /// Started with the first subscriber.
    linger: Option<Linger>,
}

/// Fan-out statistics of one recorder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FanOutStats {
    /// Subscriptions currently registered.
    pub subscribers: usize,
    /// Events dropped for all subscribers, including ones that have closed.
    pub dropped_total: u64,
    /// Per live subscription.
    pub per_subscriber: Vec<SubscriberStats>,
}

/// Statistics of one subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubscriberStats {
    /// Registration order id, unique per recorder.
    pub id: u64,
    /// Events it missed: a live subscription's because its buffer was full;
    /// a replaying one (which catches up from the file instead of dropping)
    /// counts the stored lines it could not rebuild as events.
    pub dropped: u64,
    /// Whether it was opened with `subscribe(Some(seq))`.
    pub replaying: bool,
}

impl FanOut {
    pub(crate) fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    pub(crate) fn register(
        &mut self,
        capacity: usize,
        replaying: bool,
    ) -> (Receiver<Arc<ExchangeEvent>>, Arc<SubCounters>, u64) {
        let (tx, rx, flush) = chan::channel(capacity);
        self.linger.get_or_insert_with(Linger::start).watch(flush);
        let counters = Arc::new(SubCounters::default());
        let id = self.next_id;
        self.next_id += 1;
        self.subs.push(SubEntry {
            id,
            tx,
            counters: Arc::clone(&counters),
            replaying,
            last_warn: None,
        });
        (rx, counters, id)
    }

    /// Broadcasts event `seq`, building it with `make` only if some
    /// subscriber has room (a slow subscriber alone costs no event build).
    pub(crate) fn broadcast_with(&mut self, seq: Seq, make: impl FnOnce() -> Arc<ExchangeEvent>) {
        if self.subs.iter().any(|s| s.tx.has_room()) {
            self.broadcast(&make());
            return;
        }
        let mut retired = 0;
        self.subs.retain_mut(|s| {
            if s.tx.is_closed() {
                retired += s.counters.dropped.load(Ordering::Relaxed);
                false
            } else {
                s.full(seq);
                true
            }
        });
        self.retired_drops += retired;
    }

    /// Hands `event` to every subscriber without waiting: a full buffer
    /// drops the event for that subscriber only (drop-newest).
    pub(crate) fn broadcast(&mut self, event: &Arc<ExchangeEvent>) {
        let mut retired = 0;
        let mut deferred = false;
        self.subs
            .retain_mut(|s| match s.tx.try_send(Arc::clone(event)) {
                Ok(Pushed::Signalled) => true,
                Ok(Pushed::Deferred) => {
                    deferred = true;
                    true
                }
                Err(PushError::Full) => {
                    s.full(event.seq);
                    true
                }
                Err(PushError::Closed) => {
                    retired += s.counters.dropped.load(Ordering::Relaxed);
                    false
                }
            });
        self.retired_drops += retired;
        if deferred {
            match &self.linger {
                Some(l) if l.running() => l.arm(),
                _ => self.flush_all(),
            }
        }
    }

    /// Wakes every parked subscriber that has events (close, or no linger thread).
    fn flush_all(&self) {
        for s in &self.subs {
            s.tx.flush();
        }
    }

    /// Ends every subscription (their buffered events are still delivered).
    pub(crate) fn close_all(&mut self) {
        // Dropping the senders wakes every receiver.
        for s in self.subs.drain(..) {
            self.retired_drops += s.counters.dropped.load(Ordering::Relaxed);
        }
        self.linger = None;
    }

    pub(crate) fn stats(&mut self) -> FanOutStats {
        let mut retired = 0;
        self.subs.retain(|s| {
            let open = !s.tx.is_closed();
            if !open {
                retired += s.counters.dropped.load(Ordering::Relaxed);
            }
            open
        });
        self.retired_drops += retired;
        let per_subscriber: Vec<SubscriberStats> = self
            .subs
            .iter()
            .map(|s| SubscriberStats {
                id: s.id,
                dropped: s.counters.dropped.load(Ordering::Relaxed),
                replaying: s.replaying,
            })
            .collect();
        FanOutStats {
            subscribers: per_subscriber.len(),
            dropped_total: self.retired_drops
                + per_subscriber.iter().map(|s| s.dropped).sum::<u64>(),
            per_subscriber,
        }
    }
}

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
