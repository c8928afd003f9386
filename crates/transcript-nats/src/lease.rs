//! A run's lease on NATS: while its recorder is alive, the key `lease.<run-id>` of the runs
//! index holds a message with a per-message TTL (`Nats-TTL`, [`StreamOptions::lease`]) that
//! the recorder renews every third of it. The runner SIGKILLed, the servers remove the key
//! when the TTL runs out, and the run, still without `run.completed`, reads as abandoned. A
//! run that completes records `run.completed` and its index entry first, then releases the
//! key (purged, its marker itself expiring), so a reader that finds no lease and then no
//! `run.completed` has seen an abandoned run, never a completing one.
//!
//! The runner renews the key only at the revision it last wrote ([`LeaseHold`]): once the
//! key lapsed (the runner SIGSTOPped past its lease, or cut off from the servers) its next
//! renewal is refused, it records nothing more, and the run stays abandoned.
//!
//! The bucket's stream must allow per-message TTLs (`allow_msg_ttl`, nats-server 2.11+): the
//! writer's [`NatsStore::connect`] creates it so, and turns it on for a bucket made before.
//!
//! [`StreamOptions::lease`]: crate::StreamOptions::lease

use std::time::Duration;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, kv};
use transcript_domain::RunId;

use crate::{NatsError, NatsStore};

/// The runs-index key of `run_id`'s lease.
pub fn lease_key(run_id: RunId) -> String {
    format!("lease.{run_id}")
}

/// Turns per-message TTLs on for the index bucket's stream, when they are not yet.
pub(crate) async fn allow_ttl(
    js: &jetstream::Context,
    index: &mut kv::Store,
) -> Result<(), String> {
    let info = index.stream.info().await.map_err(|e| e.to_string())?;
    if info.config.allow_message_ttl {
        return Ok(());
    }
    let mut config = info.config.clone();
    config.allow_message_ttl = true;
    js.update_stream(config).await.map_err(|e| e.to_string())?;
    Ok(())
}

impl NatsStore {
    /// The lease's TTL in whole seconds (at least 1, the servers' granularity).
    pub(crate) fn lease_secs(&self) -> u64 {
        self.options.lease.as_secs().max(1)
    }

    /// Takes or renews `run_id`'s lease for [`crate::StreamOptions::lease`] from now (a
    /// publish to the key with `Nats-TTL`, waiting for its ack).
    ///
    /// No stream answering the subject (the bucket's stream electing its leader, as right
    /// after a cluster created it) is waited out within `ack_timeout × publish_attempts`, as
    /// [`NatsStore::put_run`] does: a run's first lease on a new cluster failed the run so.
    pub async fn renew_lease(&self, run_id: RunId) -> Result<(), NatsError> {
        let index = self.writable_index()?;
        let subject = format!(
            "{}{}",
            index.put_prefix.as_deref().unwrap_or(&index.prefix),
            lease_key(run_id)
        );
        let what = format!("runs index: the lease of run {run_id}");
        let budget = self.options.ack_timeout * self.options.publish_attempts.max(1);
        let deadline = tokio::time::Instant::now() + budget;
        let mut pause = Duration::from_millis(50);
        loop {
            let message = PublishMessage::build().payload(bytes::Bytes::new()).header(
                async_nats::header::NATS_MESSAGE_TTL,
                self.lease_secs().to_string().as_str(),
            );
            let acked = match self.js.send_publish(subject.clone(), message).await {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match acked {
                Ok(_) => return Ok(()),
                Err(e)
                    if e.kind()
                        == async_nats::jetstream::context::PublishErrorKind::StreamNotFound
                        && tokio::time::Instant::now() + pause < deadline =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(self.js_error(&what, e)),
            }
        }
    }

    /// Releases `run_id`'s lease (a run that completed, or whose recorder was closed): the
    /// key is purged, the purge marker expiring in a second.
    pub async fn release_lease(&self, run_id: RunId) -> Result<(), NatsError> {
        self.writable_index()?
            .purge_with_ttl(lease_key(run_id), Duration::from_secs(1))
            .await
            .map_err(|e| self.js_error(format!("runs index: releasing the lease of {run_id}"), e))
    }

    /// Whether `run_id`, followed up to stream sequence `position` (exclusive, a
    /// [`crate::RunFollower::position`]), looks abandoned now: its lease lapsed, and the
    /// stream holds nothing of it past what was delivered (the runner records `run.completed`
    /// before it releases the lease, so a completing run is never taken for an abandoned
    /// one). `false` when the servers cannot tell (a restart): a follower waits such faults
    /// out, and confirms a lapse over a renewal period before giving up on the run.
    pub async fn abandoned_after(&self, run_id: RunId, position: u64) -> bool {
        if self.lease_held(run_id).await.unwrap_or(true) {
            return false;
        }
        match self.last_stream_seq(run_id).await {
            Ok(last) => last.is_none_or(|last| last < position),
            Err(_) => false,
        }
    }

    /// Whether `run_id`'s runner holds its lease now (alive, and renewing it). `false` without
    /// a runs index.
    pub async fn lease_held(&self, run_id: RunId) -> Result<bool, NatsError> {
        let Some(index) = &self.index else {
            return Ok(false);
        };
        index
            .get(lease_key(run_id))
            .await
            .map(|value| value.is_some())
            .map_err(|e| self.js_error(format!("runs index: the lease of {run_id}"), e))
    }
}

/// Renews the lease `hold` keeps every third of its length until aborted (the recorder's
/// close or drop), each attempt bounded by that period, and writes the run's index `entry`
/// with it when the run recorded events since its last write. A failed renewal is tried again
/// at the next tick: the lease lapses only when the runner cannot renew it for about two
/// thirds of its length (a server lost and a leader election in a cluster fit a 30 s lease
/// easily). A renewal refused by the lease's revision (it lapsed: [`LeaseHold`]) ends the
/// renewals: the run is abandoned, and its entry is left as readers see it.
pub(crate) fn spawn_renewal(
    store: NatsStore,
    hold: std::sync::Arc<LeaseHold>,
    entry: std::sync::Arc<crate::live_entry::LiveEntry>,
) -> tokio::task::JoinHandle<()> {
    let every = (store.options.lease / 3).max(Duration::from_millis(200));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            // An attempt waits for its ack no longer than a tick: one stuck on a server that
            // died must not hold the next one back until the lease has lapsed.
            if let Ok(Err(Renewal::Lost(_))) = tokio::time::timeout(every, hold.renew(&store)).await
            {
                return;
            }
            // What `list` shows of the running run, so it reads no stream message for it.
            let _ = tokio::time::timeout(every, entry.write_if_grown(&store)).await;
        }
    })
}

/// Why a renewal of a held lease did not happen.
#[derive(Debug)]
pub(crate) enum Renewal {
    /// Refused by the lease's revision: the key lapsed (or was taken) since this runner last
    /// renewed it. Final.
    Lost(String),
    /// The servers did not answer (a restart, a leader election): the lease may still hold.
    Unknown(String),
}

/// What a runner knows of its run's lease.
#[derive(Debug)]
struct Held {
    /// The key's revision (its stream sequence) as this runner last wrote it.
    revision: u64,
    /// Until when the lease surely holds: the last renewal's send time plus the lease (the
    /// servers count the TTL from when they stored it, later).
    valid_until: tokio::time::Instant,
    /// Set once a renewal was refused.
    lost: Option<String>,
}

/// A run's lease as its runner holds it: taken only if the key does not exist, renewed only
/// at the revision the runner last wrote (`Nats-Expected-Last-Subject-Sequence` on the key's
/// subject), so once the key lapsed and the servers removed it no renewal brings it back:
/// an abandoned run stays abandoned. A record first makes sure the lease still holds
/// ([`LeaseHold::ensure`]), renewing it when its validity runs short.
#[derive(Debug)]
pub(crate) struct LeaseHold {
    run_id: RunId,
    /// This holder's part of the renewals' message ids (a retry is deduplicated, another
    /// runner's renewal never is).
    holder: String,
    held: tokio::sync::Mutex<Held>,
}

/// Why a lease could not be taken.
#[derive(Debug)]
pub(crate) enum TakeError {
    /// The key exists: another runner holds the run.
    Held,
    /// The servers did not answer in time.
    Store(NatsError),
}

impl LeaseHold {
    /// Takes `run_id`'s lease (the key must not exist), waiting out no responders and lost
    /// acks within `ack_timeout × publish_attempts`.
    pub(crate) async fn take(store: &NatsStore, run_id: RunId) -> Result<Self, TakeError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The client's id on its server, this process and a counter: unique per holder.
        let client = store.client.server_info().client_id;
        let hold = Self {
            run_id,
            holder: format!("{client}-{}-{n}", std::process::id()),
            held: tokio::sync::Mutex::new(Held {
                revision: 0,
                valid_until: tokio::time::Instant::now(),
                lost: None,
            }),
        };
        match hold.ensure(store).await {
            Ok(()) => Ok(hold),
            Err(NatsError::Abandoned { .. }) => Err(TakeError::Held),
            Err(e) => Err(TakeError::Store(e)),
        }
    }

    /// Whether a renewal was refused: the run is abandoned.
    pub(crate) async fn lost(&self) -> bool {
        self.held.lock().await.lost.is_some()
    }

    /// Renews the lease at its revision (one attempt, bounded by `ack_timeout`).
    pub(crate) async fn renew(&self, store: &NatsStore) -> Result<(), Renewal> {
        let mut held = self.held.lock().await;
        if let Some(lost) = &held.lost {
            return Err(Renewal::Lost(lost.clone()));
        }
        let index = store
            .writable_index()
            .map_err(|e| Renewal::Unknown(e.to_string()))?;
        let subject = format!(
            "{}{}",
            index.put_prefix.as_deref().unwrap_or(&index.prefix),
            lease_key(self.run_id)
        );
        let message = PublishMessage::build()
            .payload(bytes::Bytes::new())
            .header(
                async_nats::header::NATS_MESSAGE_TTL,
                store.lease_secs().to_string().as_str(),
            )
            // A retry after a lost ack is the same renewal, stored once.
            .message_id(format!(
                "lease:{}:{}:{}",
                self.run_id, self.holder, held.revision
            ))
            .expected_last_subject_sequence(held.revision);
        let sent = tokio::time::Instant::now();
        let acked = tokio::time::timeout(store.options.ack_timeout, async {
            match store.js.send_publish(subject, message).await {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            }
        })
        .await;
        match acked {
            Ok(Ok(ack)) => {
                held.revision = ack.sequence;
                held.valid_until = sent + store.options.lease;
                Ok(())
            }
            Ok(Err(e)) if e.kind() == PublishErrorKind::WrongLastSequence => {
                let why = format!(
                    "its renewal at revision {} was refused: the key lease.{} lapsed, \
                     the runner stopped or cut off for longer than the {}s lease",
                    held.revision,
                    self.run_id,
                    store.lease_secs()
                );
                held.lost = Some(why.clone());
                Err(Renewal::Lost(why))
            }
            Ok(Err(e)) => Err(Renewal::Unknown(e.to_string())),
            Err(_) => Err(Renewal::Unknown(format!(
                "no ack within {:?}",
                store.options.ack_timeout
            ))),
        }
    }

    /// Makes sure the lease holds before the runner writes: nothing to do while more than a
    /// third of the lease is left since the last renewal; else it is renewed now, retried
    /// within `ack_timeout × publish_attempts` while the servers do not answer.
    /// [`NatsError::Abandoned`] once a renewal was refused (the lease lapsed).
    pub(crate) async fn ensure(&self, store: &NatsStore) -> Result<(), NatsError> {
        let margin = store.options.lease / 3;
        {
            let held = self.held.lock().await;
            if held.lost.is_none()
                && held.revision > 0
                && held.valid_until > tokio::time::Instant::now() + margin
            {
                return Ok(());
            }
        }
        let budget = store.options.ack_timeout * store.options.publish_attempts.max(1);
        let deadline = tokio::time::Instant::now() + budget;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.renew(store).await {
                Ok(()) => return Ok(()),
                Err(Renewal::Lost(why)) => {
                    return Err(NatsError::Abandoned {
                        url: store.url.to_string(),
                        run_id: self.run_id.to_string(),
                        why,
                    });
                }
                Err(Renewal::Unknown(e)) if tokio::time::Instant::now() + pause >= deadline => {
                    return Err(store.js_error(
                        format!(
                            "runs index: the lease of run {} (not renewed within {budget:?})",
                            self.run_id
                        ),
                        e,
                    ));
                }
                Err(Renewal::Unknown(_)) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}
