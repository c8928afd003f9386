//! [`PipelinedPublisher`]: many events published with a bounded window of acks in flight, for
//! imports (hundreds of thousands of events), where a run's one-ack-per-event would take
//! minutes.
//!
//! A live run awaits each event's ack before the next (its recorder chains
//! `Nats-Expected-Last-Subject-Sequence` from ack to ack). An import knows all of its events
//! up front, so it sends up to `window` of them before it awaits the oldest ack. What still
//! holds:
//!
//! - **Gapless and in order per run.** One connection publishes in order, and the server
//!   stores a connection's messages in the order it receives them. Each run's first message
//!   carries `Nats-Expected-Last-Subject-Sequence` = the run's last stream sequence when the
//!   run was first published to (0 for a new run), so a run another writer touched is
//!   refused. Acks are awaited in publish order, and each must carry a stream sequence above
//!   the run's previous one, else the import fails naming the run.
//! - **A lost ack is retried safely.** Every message carries `Nats-Msg-Id =
//!   <run_id>:<seq>:<publisher>` (the publisher's own part: a later import re-publishing
//!   lines a dead one's were rolled back from, `pending`, is not taken for a duplicate of
//!   them): a publish whose ack failed or timed out is sent again with the same id and `Nats-Expected-Last-Subject-Sequence` = the stream sequence of the run's previous
//!   (acknowledged) event. Stored the first time, the retry is a duplicate (its stored bytes
//!   are checked to be ours); not stored and a later event of the run stored meanwhile (a
//!   gap), the retry is refused and the import fails naming the run and the event. Nothing
//!   acknowledged is taken back.
//! - **Done means replicated.** [`PipelinedPublisher::finish`] returns only once every ack has
//!   arrived (an ack means the stream's replicas hold the message); any failure is an error,
//!   never a partial success.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use transcript_domain::{RunId, Seq};

use crate::store::run_subject;
use crate::{NatsError, NatsStore};

/// The acks in flight by default: enough to keep a 3-node cluster busy, few enough that a
/// failure leaves little to retry.
pub const DEFAULT_WINDOW: usize = 1024;

/// The largest window: below the client context's 4,096 acks in flight (`NatsStore`'s
/// JetStream context), past which a publish would wait for an ack nobody awaits.
pub const MAX_WINDOW: usize = 4000;

/// What [`PipelinedPublisher::finish`] reports: per run, its last event's seq and stream
/// sequence, all acknowledged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// Run → (last seq published, its stream sequence).
    pub runs: BTreeMap<RunId, (Seq, u64)>,
    /// Events acknowledged.
    pub events: u64,
}

/// One run's progress: the next seq expected and the stream sequence of its last
/// acknowledged event (or, before any, of its last stored one).
struct RunState {
    first_seq: Seq,
    next_seq: Seq,
    last_stream_seq: u64,
}

/// A publish whose ack is awaited.
struct Pending {
    run: RunId,
    seq: Seq,
    line: Bytes,
    ack: PublishAckFuture,
}

/// Publishes runs' events with a bounded window of acks in flight (see the module docs).
pub struct PipelinedPublisher {
    /// This publisher's part of its message ids.
    id: String,
    store: NatsStore,
    window: usize,
    in_flight: VecDeque<Pending>,
    runs: BTreeMap<RunId, RunState>,
    published: Published,
}

impl std::fmt::Debug for PipelinedPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelinedPublisher")
            .field("window", &self.window)
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

impl PipelinedPublisher {
    /// A publisher on `store` with up to `window` acks in flight (at least 1, at most
    /// [`MAX_WINDOW`]).
    pub fn new(store: NatsStore, window: usize) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The client's id on its server, this process and a counter: unique per publisher.
        let client = store.client.server_info().client_id;
        Self {
            id: format!("{client}-{}-{n}", std::process::id()),
            store,
            window: window.clamp(1, MAX_WINDOW),
            in_flight: VecDeque::new(),
            runs: BTreeMap::new(),
            published: Published::default(),
        }
    }

    /// Sends event `seq` of `run` (its complete line, `\n` included), after awaiting the
    /// oldest ack when the window is full. A run's events must come in seq order without a
    /// gap, its first one right after what the stream holds of it (seq 1 for a new run); an
    /// error is final (the publisher is not used again).
    pub async fn publish(&mut self, run: RunId, seq: Seq, line: Bytes) -> Result<(), NatsError> {
        let state = match self.runs.entry(run) {
            std::collections::btree_map::Entry::Occupied(state) => state.into_mut(),
            std::collections::btree_map::Entry::Vacant(slot) => {
                // The run's last stored event: the first published must follow it.
                let (stored, last) = match self.store.last_message(run).await? {
                    Some((line, at)) => match transcript_domain::decode_line(&line) {
                        Ok(decoded) => (decoded.event.seq, at),
                        Err(e) => {
                            let why = format!("the run's last stored event does not decode: {e}");
                            return Err(self.failure(run, seq, why));
                        }
                    },
                    None => (0, 0),
                };
                slot.insert(RunState {
                    first_seq: seq,
                    next_seq: stored + 1,
                    last_stream_seq: last,
                })
            }
        };
        if seq != state.next_seq {
            let why = format!(
                "the run's next event is {} (the stream holds it up to {})",
                state.next_seq,
                state.next_seq - 1
            );
            return Err(self.failure(run, seq, why));
        }
        state.next_seq += 1;
        // The run's first message says what the stream holds before it: a run another writer
        // touched since is refused.
        let expected = (seq == state.first_seq).then_some(state.last_stream_seq);
        let ack = self.send(run, seq, &line, expected).await?;
        self.in_flight.push_back(Pending {
            run,
            seq,
            line,
            ack,
        });
        while self.in_flight.len() >= self.window {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    /// Awaits every ack still in flight: the runs published, each acknowledged (replicated)
    /// up to its last event.
    pub async fn finish(mut self) -> Result<Published, NatsError> {
        self.flush().await?;
        Ok(self.published)
    }

    /// Awaits every ack still in flight (the publisher can go on publishing after).
    pub async fn flush(&mut self) -> Result<(), NatsError> {
        while !self.in_flight.is_empty() {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    /// What is acknowledged so far (after an error too: nothing in it is lost).
    pub fn acknowledged(&self) -> &Published {
        &self.published
    }

    async fn send(
        &self,
        run: RunId,
        seq: Seq,
        line: &Bytes,
        expected: Option<u64>,
    ) -> Result<PublishAckFuture, NatsError> {
        let mut message = PublishMessage::build()
            .payload(line.clone())
            .message_id(format!("{run}:{seq}:{}", self.id));
        if let Some(expected) = expected {
            message = message.expected_last_subject_sequence(expected);
        }
        self.store
            .js
            .send_publish(run_subject(&run), message)
            .await
            .map_err(|e| self.failure(run, seq, e))
    }

    /// Awaits the oldest ack; a failed one is retried with the same message id until
    /// `ack_timeout × publish_attempts` has passed.
    async fn settle_oldest(&mut self) -> Result<(), NatsError> {
        let Some(pending) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let Pending {
            run,
            seq,
            line,
            ack,
        } = pending;
        let options = &self.store.options;
        let deadline =
            tokio::time::Instant::now() + options.ack_timeout * options.publish_attempts.max(1);
        let mut outcome = ack.await;
        let mut pause = Duration::from_millis(50);
        let stream_seq = loop {
            let error = match outcome {
                Ok(ack) if ack.duplicate => {
                    break self.check_duplicate(run, seq, &line, ack.sequence).await?;
                }
                Ok(ack) => break ack.sequence,
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    return Err(self.failure(
                        run,
                        seq,
                        format!(
                            "the stream holds another event of the run after its event {} \
                             (a gap or a second writer): {e}",
                            seq.saturating_sub(1)
                        ),
                    ));
                }
                Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => {
                    return Err(self.failure(run, seq, e));
                }
                Err(e) => e,
            };
            if tokio::time::Instant::now() + pause >= deadline {
                return Err(self.failure(run, seq, format!("no ack after every attempt: {error}")));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
            let expected = self.runs.get(&run).map_or(0, |s| s.last_stream_seq);
            outcome = match self.send(run, seq, &line, Some(expected)).await {
                Ok(ack) => ack.await,
                Err(e) => return Err(e),
            };
        };
        let previous = self.runs.get(&run).map_or(0, |s| s.last_stream_seq);
        if stream_seq <= previous {
            return Err(self.failure(
                run,
                seq,
                format!(
                    "stored at stream sequence {stream_seq}, before the run's previous event \
                     ({previous}): out of order"
                ),
            ));
        }
        if let Some(state) = self.runs.get_mut(&run) {
            state.last_stream_seq = stream_seq;
        }
        self.published.runs.insert(run, (seq, stream_seq));
        self.published.events += 1;
        Ok(())
    }

    /// A duplicate ack: our own earlier attempt (the same bytes are stored), else another
    /// writer's event of the same id.
    async fn check_duplicate(
        &self,
        run: RunId,
        seq: Seq,
        line: &Bytes,
        at: u64,
    ) -> Result<u64, NatsError> {
        match self.store.stream.get_raw_message(at).await {
            Ok(stored) if stored.payload == *line => Ok(at),
            Ok(_) => Err(self.failure(run, seq, "another writer stored a different event")),
            Err(e) => Err(self.failure(
                run,
                seq,
                format!("acknowledged as a duplicate and cannot be checked: {e}"),
            )),
        }
    }

    fn failure(&self, run: RunId, seq: Seq, why: impl std::fmt::Display) -> NatsError {
        self.store.js_error(
            format!("publishing event {seq} of run {run} (nothing acknowledged is lost)"),
            why,
        )
    }
}
