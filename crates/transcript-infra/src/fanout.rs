//! The live fan-out (write-then-broadcast): the registry of a recorder's subscribers, which the
//! writer thread hands each acknowledged event to without waiting, and its statistics. The
//! subscriptions' own side (live, or replay-then-live) is [`crate::subscription`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::chan::{self, Linger, PushError, Pushed, Receiver, Sender};
use serde::Serialize;
use transcript_domain::{ExchangeEvent, Seq};

/// Default per-subscriber buffer (events), from the wire contract.
pub const DEFAULT_SUBSCRIBER_BUFFER: usize = 256;

const WARN_EVERY: Duration = Duration::from_secs(1);

/// Counters shared between the broadcaster and one subscription.
#[derive(Debug, Default)]
pub(crate) struct SubCounters {
    pub(crate) dropped: AtomicU64,
    /// Set by the broadcaster when a replaying subscriber's buffer was full:
    /// the subscriber must catch up from the file.
    pub(crate) lagged: AtomicBool,
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
