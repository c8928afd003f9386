//! [`NatsRecorder`]: the Recorder port on a JetStream stream, and its [`NatsRecorderFactory`].
//!
//! `record` returns only after the stream's publish ack (ack = durable, replicated to the
//! stream's replicas). Each message carries `Nats-Msg-Id = <run_id>:<seq>`, so a publish retried
//! after a lost ack is stored once, and `Nats-Expected-Last-Subject-Sequence` = the stream
//! sequence of the run's previous event, so the run's subject stays gapless and in order and a
//! second writer of the same run is refused ([`RecordError::Locked`]), as the file lock refuses
//! it. Records of one run are serialized (seq, timestamp and publish under one lock: the
//! expected sequence of event n+1 is the ack of event n); runs publish concurrently.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::watch;
use transcript_domain::{
    Clock, EventDraft, EventMask, RecordError, Recorder, RecorderFactory, RunId, Seq, Subscription,
};

use crate::NatsStore;
use crate::encode::prepare;
use crate::index::RunEntry;
use crate::live_entry::LiveEntry;
use crate::store::run_subject;
use crate::subscription::NatsSubscription;

/// What `record` guards: the next seq and the stream sequence of the run's last event.
#[derive(Debug)]
struct State {
    next_seq: Seq,
    last_subject_seq: u64,
    closed: bool,
    /// Set when a publish's outcome is unknown or refused: every later record fails.
    failed: Option<String>,
}

struct Inner {
    store: NatsStore,
    run_id: RunId,
    parent_run_id: Option<RunId>,
    subject: String,
    clock: Arc<dyn Clock>,
    mask: Option<Arc<dyn EventMask>>,
    state: tokio::sync::Mutex<State>,
    /// `Some(last seq)` once closed: subscriptions end after delivering it.
    closed: watch::Sender<Option<Seq>>,
    index: Arc<LiveEntry>,
    /// The first runs-index write that failed (reported by `close`).
    index_error: Mutex<Option<String>>,
    /// The run's lease, checked before each publish: once lapsed, the run records nothing.
    lease: Arc<crate::lease::LeaseHold>,
    /// The task renewing the run's lease (`crate::lease`), until the close.
    renewal: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropped without a close: the lease is no longer renewed and lapses.
        if let Some(renewal) = lock(&self.renewal).take() {
            renewal.abort();
        }
    }
}

/// A run's recorder on JetStream (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct NatsRecorder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for NatsRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsRecorder")
            .field("run_id", &self.inner.run_id)
            .field("subject", &self.inner.subject)
            .finish()
    }
}

/// How one publish ended.
enum Published {
    /// Stored at this stream sequence.
    Stored(u64),
    /// Another writer holds the run.
    Refused(String),
    /// Not stored (refused before sending), or not known to be stored after every attempt.
    Failed(String),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Refuses to open `run_id` on `store` when the existing stream keeps fewer copies of each
/// event than asked for ([`RecordError::Storage`]) or the run's subject already has events
/// ([`RecordError::Locked`]: a run has one writer, from its first event on).
async fn refuse_unless_writable(
    store: &NatsStore,
    run_id: RunId,
    subject: &str,
) -> Result<(), RecordError> {
    // An existing stream is used as it is: one keeping fewer copies than asked for would
    // make each ack less durable than the runner was told.
    let kept = store.stream.cached_info().config.num_replicas;
    if let Some(asked) = store.options.replicas.filter(|asked| kept < *asked) {
        return Err(RecordError::Storage {
            path: store.url.to_string(),
            message: format!(
                "stream {} keeps {kept} {} of each event and TRANSCRIPT_NATS_REPLICAS asks \
                     for {}: raise the stream's replicas (`nats stream edit {0} --replicas {2}`) \
                     or ask for fewer",
                store.url.stream,
                if kept == 1 { "copy" } else { "copies" },
                asked,
            ),
            source: None,
        });
    }
    match store.stream.get_last_raw_message_by_subject(subject).await {
        Ok(_) => {
            return Err(RecordError::Locked {
                path: format!("{} (subject {subject} already has events)", store.url),
            });
        }
        Err(e)
            if e.kind()
                == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound => {}
        Err(e) => {
            return Err(RecordError::Storage {
                path: store.url.to_string(),
                message: format!("cannot open run {run_id}: {e}"),
                source: None,
            });
        }
    }
    Ok(())
}

impl NatsRecorder {
    /// Opens the recorder of `run_id` on `store`. Refused ([`RecordError::Locked`]) when the
    /// run already has events in the stream: a run has one writer, from its first event on;
    /// and ([`RecordError::Storage`]) when the existing stream keeps fewer copies of each event
    /// than `StreamOptions::replicas` asks for.
    pub async fn open(
        store: NatsStore,
        run_id: RunId,
        parent_run_id: Option<RunId>,
        clock: Arc<dyn Clock>,
        mask: Option<Arc<dyn EventMask>>,
    ) -> Result<Self, RecordError> {
        let subject = run_subject(&run_id);
        refuse_unless_writable(&store, run_id, &subject).await?;
        // The run's lease, held from before its first event until its close.
        let lease = match crate::lease::LeaseHold::take(&store, run_id).await {
            Ok(lease) => Arc::new(lease),
            Err(crate::lease::TakeError::Held) => {
                return Err(RecordError::Locked {
                    path: format!(
                        "{} (run {run_id}'s lease, key {} of the runs index, is held by \
                         another runner)",
                        store.url,
                        crate::lease::lease_key(run_id)
                    ),
                });
            }
            Err(crate::lease::TakeError::Store(e)) => {
                return Err(RecordError::Storage {
                    path: store.url.to_string(),
                    message: format!("cannot open run {run_id}: {e}"),
                    source: None,
                });
            }
        };
        let index = Arc::new(LiveEntry::new(RunEntry::new(run_id, parent_run_id)));
        let renewal = crate::lease::spawn_renewal(store.clone(), lease.clone(), index.clone());
        let (closed, _) = watch::channel(None);
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                run_id,
                parent_run_id,
                subject,
                clock,
                mask,
                state: tokio::sync::Mutex::new(State {
                    next_seq: 1,
                    last_subject_seq: 0,
                    closed: false,
                    failed: None,
                }),
                closed,
                index,
                index_error: Mutex::new(None),
                lease,
                renewal: Mutex::new(Some(renewal)),
            }),
        })
    }

    /// The subject this run publishes to (`transcript.run.<run_id>`).
    pub fn subject(&self) -> &str {
        &self.inner.subject
    }

    fn storage_error(&self, message: String) -> RecordError {
        RecordError::Storage {
            path: format!("{} {}", self.inner.store.url, self.inner.subject),
            message,
            source: None,
        }
    }

    /// Publishes `line` as event `seq`, retrying with the same message id while the outcome is
    /// unknown (no ack in time, no responders while a stream leader is elected), until
    /// `ack_timeout × publish_attempts` has passed.
    async fn publish(&self, line: &Bytes, seq: Seq, expected: u64) -> Published {
        let store = &self.inner.store;
        let msg_id = format!("{}:{seq}", self.inner.run_id);
        let budget = store.options.ack_timeout * store.options.publish_attempts.max(1);
        let deadline = tokio::time::Instant::now() + budget;
        let mut pause = Duration::from_millis(50);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let message = PublishMessage::build()
                .payload(line.clone())
                .message_id(&msg_id)
                .expected_last_subject_sequence(expected);
            let ack = match store
                .js
                .send_publish(self.inner.subject.clone(), message)
                .await
            {
                Ok(future) => future.await,
                Err(e) => Err(e),
            };
            let error = match ack {
                Ok(ack) if ack.duplicate => {
                    return self.check_duplicate(line, seq, ack.sequence).await;
                }
                Ok(ack) => return Published::Stored(ack.sequence),
                // Refused by the client before sending (the line with its headers is larger
                // than the servers' max_payload): definite, so not retried.
                Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => {
                    return Published::Failed(format!(
                        "event {seq} was not stored: its line is {} bytes and the servers' \
                         max_payload is {} bytes (raise max_payload on the servers, up to 64 MB): {e}",
                        line.len(),
                        store.client.server_info().max_payload
                    ));
                }
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    return Published::Refused(format!(
                        "another writer appended to the run before event {seq}"
                    ));
                }
                Err(e) => e,
            };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Published::Failed(format!(
                    "event {seq} not acknowledged within {budget:?} ({attempts} attempts; its \
                     outcome is unknown): {error}"
                ));
            }
            // No responders (a leader being elected, a server restarting): wait a little
            // before trying again; a timeout has waited already.
            if error.kind() != PublishErrorKind::TimedOut {
                tokio::time::sleep(pause.min(deadline - now)).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }

    /// A duplicate ack for event `seq`: ours from an earlier attempt (same bytes), or another
    /// writer's event `seq`.
    async fn check_duplicate(&self, line: &Bytes, seq: Seq, at: u64) -> Published {
        match self.inner.store.stream.get_raw_message(at).await {
            Ok(stored) if stored.payload == *line => Published::Stored(at),
            Ok(_) => Published::Refused(format!(
                "event {seq} of the run was written by another writer"
            )),
            Err(e) => Published::Failed(format!(
                "event {seq} was acknowledged as a duplicate and cannot be checked: {e}"
            )),
        }
    }

    /// Folds a recorded event into the runs index, writing it when the run starts or ends.
    async fn index_event(
        &self,
        seq: Seq,
        timestamp: transcript_domain::Timestamp,
        draft: &EventDraft,
    ) {
        let now = self.inner.index.update(|entry| {
            entry.observe(
                (seq, timestamp),
                (&draft.path, draft.iteration),
                &draft.payload,
            )
        });
        if now {
            self.write_index().await;
        }
    }

    async fn write_index(&self) {
        if let Err(e) = self.inner.index.write(&self.inner.store).await {
            lock(&self.inner.index_error).get_or_insert(e.to_string());
        }
    }
}

#[async_trait]
impl Recorder for NatsRecorder {
    fn run_id(&self) -> RunId {
        self.inner.run_id
    }

    fn parent_run_id(&self) -> Option<RunId> {
        self.inner.parent_run_id
    }

    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        let inner = &self.inner;
        let prepared = prepare(
            (inner.run_id, inner.parent_run_id),
            inner.mask.as_deref(),
            draft,
        )?;
        let mut state = inner.state.lock().await;
        if state.closed {
            return Err(RecordError::Closed);
        }
        if let Some(failed) = &state.failed {
            return Err(self.storage_error(format!("the run cannot go on: {failed}")));
        }
        // A runner whose lease lapsed (stopped, cut off) writes nothing more: the run stays
        // abandoned as readers may have reported it.
        if let Err(e) = inner.lease.ensure(&inner.store).await {
            let why = e.to_string();
            state.failed = Some(why.clone());
            return Err(self.storage_error(why));
        }
        let seq = state.next_seq;
        let timestamp = inner.clock.now();
        let line = Bytes::from(prepared.line(seq, timestamp));
        match self.publish(&line, seq, state.last_subject_seq).await {
            Published::Stored(stream_seq) => {
                state.last_subject_seq = stream_seq;
                state.next_seq += 1;
            }
            Published::Refused(why) => {
                state.failed = Some(why.clone());
                return Err(RecordError::Locked {
                    path: format!("{} {}: {why}", inner.store.url, inner.subject),
                });
            }
            Published::Failed(why) => {
                state.failed = Some(why.clone());
                return Err(self.storage_error(why));
            }
        }
        drop(state);
        self.index_event(seq, timestamp, &prepared.draft).await;
        Ok(seq)
    }

    async fn subscribe(&self, from: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        let (start, last_seq) = {
            let state = self.inner.state.lock().await;
            if state.closed {
                return Err(RecordError::Closed);
            }
            (state.last_subject_seq, state.next_seq - 1)
        };
        let first = match from {
            None => last_seq + 1,
            Some(seq) if seq == 0 || seq > last_seq + 1 => {
                return Err(RecordError::Replay {
                    requested: seq,
                    reason: if seq == 0 {
                        "seq starts at 1".to_owned()
                    } else {
                        format!("the last written seq is {last_seq}")
                    },
                });
            }
            Some(seq) => seq,
        };
        // Live only: start after the run's last stored message; replay: from the run's start.
        let stream_start = if from.is_none() { start + 1 } else { 1 };
        let subscription = NatsSubscription::start(
            &self.inner.store,
            &self.inner.subject,
            stream_start,
            first,
            self.inner.closed.subscribe(),
        )
        .await
        .map_err(|e| self.storage_error(format!("cannot subscribe: {e}")))?;
        Ok(Box::new(subscription))
    }

    async fn close(&self) -> Result<(), RecordError> {
        let mut state = self.inner.state.lock().await;
        if state.closed {
            return Ok(());
        }
        state.closed = true;
        let last = state.next_seq - 1;
        drop(state);
        self.inner.closed.send_replace(Some(last));
        if let Some(renewal) = lock(&self.inner.renewal).take() {
            renewal.abort();
        }
        if self.inner.lease.lost().await {
            // Abandoned: the entry and the lapsed key stay as readers saw them.
            return Ok(());
        }
        let events = self.inner.index.update(|entry| {
            entry.flush(None);
            entry.events
        });
        if events > 0 {
            self.write_index().await;
        }
        // Released after run.completed and the index entry: a reader finding no lease and no
        // run.completed has seen an abandoned run, never a completing one.
        if let Err(e) = self.inner.store.release_lease(self.inner.run_id).await {
            lock(&self.inner.index_error).get_or_insert(e.to_string());
        }
        match lock(&self.inner.index_error).take() {
            Some(e) => Err(self.storage_error(format!(
                "every event is stored, but the runs index was not updated: {e}"
            ))),
            None => Ok(()),
        }
    }
}

/// Opens a [`NatsRecorder`] per run (the root run and each `call_workflow` child run), all on
/// one store, with one clock and mask.
#[derive(Clone)]
pub struct NatsRecorderFactory {
    store: NatsStore,
    clock: Arc<dyn Clock>,
    mask: Option<Arc<dyn EventMask>>,
}

impl std::fmt::Debug for NatsRecorderFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsRecorderFactory")
            .field("store", &self.store)
            .finish()
    }
}

impl NatsRecorderFactory {
    /// A factory recording to `store`, timestamps from `clock`.
    pub fn new(store: NatsStore, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            mask: None,
        }
    }

    /// Masks every draft before it is encoded (the redaction stage).
    pub fn with_mask(mut self, mask: Arc<dyn EventMask>) -> Self {
        self.mask = Some(mask);
        self
    }

    /// The store.
    pub fn store(&self) -> &NatsStore {
        &self.store
    }
}

#[async_trait]
impl RecorderFactory for NatsRecorderFactory {
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        let recorder = NatsRecorder::open(
            self.store.clone(),
            run_id,
            parent_run_id,
            self.clock.clone(),
            self.mask.clone(),
        )
        .await?;
        Ok(Arc::new(recorder))
    }
}
