//! The runs index: one key-value entry per run (`<STREAM>_RUNS`, key = run id) written by the
//! recorder as the run goes (at `run.started`, with each lease renewal when the run recorded
//! events since, at `run.completed` and at close), so `list` and
//! fleet-wide receipts read one small value per completed run instead of every message of the
//! stream. The index is a cache of the stream: a run not completed in the index (running, or
//! its runner killed) is checked against its last message and rebuilt from its lines when the
//! stream holds more, and a run of the stream with no entry is rebuilt the same way
//! ([`NatsStore::runs`]).

use std::collections::BTreeMap;

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use transcript_domain::{Payload, RunId, Seq, Timestamp, Usage};

use crate::{NatsError, NatsStore};

/// A run's state in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexStatus {
    /// Started, no `run.completed` yet; as read by [`NatsStore::runs`], its runner holds the
    /// run's lease (alive).
    Running,
    /// Never written: [`NatsStore::runs`] reports a run without `run.completed` whose lease
    /// lapsed (its runner died or was killed) so.
    Abandoned,
    /// `run.completed` without an error.
    Succeeded,
    /// `run.completed` with an error.
    Failed,
}

/// One run's summary in the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// The run.
    pub run_id: RunId,
    /// The calling run, for a child run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// The workflow name from `run.started`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The run this run replays (`run.started`'s `replay_of`, wire decision 16): its turns
    /// were served from that recording and are not spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// For a trial, the step it was forked at (`run.started`'s `forked_at`, decision 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<String>,
    /// How far the run got.
    pub status: IndexStatus,
    /// `run.started`'s timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// The timestamp of the last event recorded when the entry was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Events recorded when the entry was written (the last seq).
    pub events: Seq,
    /// Usage reported by assistant turns, per model (`""` when the provider named none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage_by_model: BTreeMap<String, Usage>,
    /// Every assistant turn with usage of the steps completed so far (and, once the run is
    /// closed, of every step), under the model it is billed under (its own, else its step's:
    /// `transcript_domain::bill`), for fleet-wide receipts without reading the stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<BilledTurnEntry>,
    /// Assistant turns of steps not completed yet, per (path, iteration).
    #[serde(skip)]
    pending: BTreeMap<(String, u64), Vec<PendingTurn>>,
}

/// One billed assistant turn in the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BilledTurnEntry {
    /// Its seq in the run.
    pub seq: Seq,
    /// Its time.
    pub timestamp: Timestamp,
    /// The model it is billed under (`transcript_domain::bill::billed_model`).
    pub model: String,
    /// Its usage.
    pub usage: Usage,
    /// The provider's identity of its request (wire decision 17), so receipts bill a
    /// request once across runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct PendingTurn {
    seq: Seq,
    timestamp: Timestamp,
    model: Option<String>,
    usage: Option<Usage>,
    request_id: Option<String>,
}

impl RunEntry {
    /// An entry for a run that has recorded nothing yet.
    pub fn new(run_id: RunId, parent_run_id: Option<RunId>) -> Self {
        Self {
            run_id,
            parent_run_id,
            workflow: None,
            replay_of: None,
            forked_at: None,
            status: IndexStatus::Running,
            started_at: None,
            ended_at: None,
            events: 0,
            usage_by_model: BTreeMap::new(),
            turns: Vec::new(),
            pending: BTreeMap::new(),
        }
    }

    /// Bills the pending turns of one step (all steps with `None`), in seq order.
    pub(crate) fn flush(&mut self, step: Option<&(String, u64)>) {
        let keys: Vec<(String, u64)> = match step {
            Some(key) => vec![key.clone()],
            None => self.pending.keys().cloned().collect(),
        };
        for key in keys {
            let Some(turns) = self.pending.remove(&key) else {
                continue;
            };
            let step_model =
                transcript_domain::bill::step_model(turns.iter().map(|t| t.model.as_deref()));
            for t in &turns {
                if let Some(usage) = &t.usage {
                    self.turns.push(BilledTurnEntry {
                        seq: t.seq,
                        timestamp: t.timestamp,
                        model: transcript_domain::bill::billed_model(
                            t.model.as_deref(),
                            step_model,
                        )
                        .to_owned(),
                        usage: usage.clone(),
                        request_id: t.request_id.clone(),
                    });
                }
            }
        }
        self.turns.sort_by_key(|t| t.seq);
    }

    /// Folds one recorded event in; returns whether the entry should be written now.
    pub(crate) fn observe(
        &mut self,
        (seq, timestamp): (Seq, Timestamp),
        (path, iteration): (&str, u64),
        payload: &Payload,
    ) -> bool {
        self.events = seq;
        self.ended_at = Some(timestamp);
        match payload {
            Payload::RunStarted(p) => {
                self.workflow = Some(p.name.clone());
                self.replay_of = p.replay_of.clone();
                self.forked_at = p.forked_at.clone();
                self.started_at = Some(timestamp);
                true
            }
            Payload::RunCompleted(p) => {
                self.flush(None);
                self.status = if p.error.is_some() {
                    IndexStatus::Failed
                } else {
                    IndexStatus::Succeeded
                };
                true
            }
            Payload::MessageAssistant(m) => {
                if let Some(usage) = &m.usage {
                    self.usage_by_model
                        .entry(m.model.clone().unwrap_or_default())
                        .or_default()
                        .accumulate(usage);
                }
                self.pending
                    .entry((path.to_owned(), iteration))
                    .or_default()
                    .push(PendingTurn {
                        seq,
                        timestamp,
                        model: m.model.clone(),
                        usage: m.usage.clone(),
                        request_id: m.request_id.clone(),
                    });
                false
            }
            Payload::StepCompleted(_) | Payload::CallWorkflowCompleted(_) => {
                self.flush(Some(&(path.to_owned(), iteration)));
                false
            }
            _ => false,
        }
    }
}

impl NatsStore {
    /// Writes `entry` to the runs index.
    ///
    /// No responders (the bucket's stream electing a leader, as right after a cluster created
    /// it, or a server restarting) is waited out within `ack_timeout × publish_attempts`, as
    /// an event's publish is.
    pub async fn put_run(&self, entry: &RunEntry) -> Result<(), NatsError> {
        let value: bytes::Bytes = serde_json::to_vec(entry)
            .map_err(|e| self.js_error("encoding", e))?
            .into();
        let index = self.writable_index()?;
        let budget = self.options.ack_timeout * self.options.publish_attempts.max(1);
        let deadline = tokio::time::Instant::now() + budget;
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            match index.put(entry.run_id.to_string(), value.clone()).await {
                Ok(_) => return Ok(()),
                Err(e)
                    if no_responders(&e)
                        && tokio::time::Instant::now() + pause < deadline
                        && !self.bucket_gone(index).await =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(1));
                }
                Err(e) => {
                    return Err(self.js_error(format!("runs index: writing {}", entry.run_id), e));
                }
            }
        }
    }

    /// Whether the index bucket's stream no longer exists (deleted): then no responders is
    /// final, not a leader being elected.
    async fn bucket_gone(&self, index: &kv::Store) -> bool {
        use async_nats::jetstream::{ErrorCode, context::GetStreamErrorKind};
        match self.js.get_stream(&index.stream_name).await {
            Err(e) => matches!(
                e.kind(),
                GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND
            ),
            Ok(_) => false,
        }
    }

    /// The runs index of a store opened for writing ([`NatsStore::connect`] makes it).
    pub(crate) fn writable_index(&self) -> Result<&kv::Store, NatsError> {
        self.index.as_ref().ok_or_else(|| {
            self.js_error(
                "runs index",
                format!(
                    "the bucket {}_RUNS does not exist (opened for reading)",
                    self.url.stream
                ),
            )
        })
    }

    /// One run's stored index value, if it has one.
    async fn entry_bytes(&self, run_id: RunId) -> Result<Option<bytes::Bytes>, NatsError> {
        let Some(index) = &self.index else {
            return Ok(None);
        };
        index
            .get(run_id.to_string())
            .await
            .map_err(|e| self.js_error(format!("runs index: reading {run_id}"), e))
    }

    /// One run's index entry, if it has one; an entry that does not decode is an error naming
    /// the run.
    pub async fn run_entry(&self, run_id: RunId) -> Result<Option<RunEntry>, NatsError> {
        self.entry_bytes(run_id)
            .await?
            .map(|v| {
                serde_json::from_slice(&v)
                    .map_err(|e| self.js_error(format!("runs index: entry {run_id}"), e))
            })
            .transpose()
    }

    /// `entry` brought up to date from the stream when the index says the run is still
    /// running (its runner may have died since the last index write, or still be writing):
    /// one message read per such run; when the stream holds events the entry has not seen,
    /// the entry is rebuilt from every line of the run ([`Self::entry_from_stream`]), keeping
    /// the entry's workflow and start when the stream no longer holds `run.started`.
    pub async fn refresh(&self, entry: RunEntry) -> Result<RunEntry, NatsError> {
        if entry.status != IndexStatus::Running {
            return Ok(entry);
        }
        let Some(line) = self.last_line(entry.run_id).await? else {
            return Ok(entry);
        };
        let last = transcript_domain::decode_line(&line).map(|d| d.event.seq);
        if last.is_ok_and(|seq| seq <= entry.events) {
            return Ok(entry);
        }
        let Some(mut rebuilt) = self.entry_from_stream(entry.run_id).await? else {
            return Ok(entry);
        };
        // The stream's limits removed its first events (run.started): what the index knew of
        // them stays.
        if rebuilt.started_at.is_none() {
            rebuilt.workflow = entry.workflow;
            rebuilt.replay_of = entry.replay_of;
            rebuilt.forked_at = entry.forked_at;
            rebuilt.started_at = entry.started_at;
            rebuilt.parent_run_id = rebuilt.parent_run_id.or(entry.parent_run_id);
        }
        Ok(rebuilt)
    }

    /// `run_id`'s entry rebuilt from its lines in the stream, as its recorder writes it at
    /// close (every turn billed); `None` when the stream holds no event of the run. Lines
    /// that do not decode are passed over.
    pub async fn entry_from_stream(&self, run_id: RunId) -> Result<Option<RunEntry>, NatsError> {
        let lines = match self.run_lines(run_id).await {
            Ok(lines) => lines,
            Err(NatsError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut entry: Option<RunEntry> = None;
        for line in &lines {
            if let Ok(decoded) = transcript_domain::decode_line(line)
                && let Ok(event) = decoded.event.to_event()
            {
                entry
                    .get_or_insert_with(|| RunEntry::new(run_id, event.parent_run_id))
                    .observe(
                        (event.seq, event.timestamp),
                        (&event.path, event.iteration),
                        &event.payload,
                    );
            }
        }
        Ok(entry.map(|mut entry| {
            entry.flush(None);
            entry
        }))
    }

    /// Writes an entry rebuilt from the stream back to the index, only if the key is still
    /// at `revision` (`None`: still absent), so a live recorder's own write is never
    /// overwritten. A cache repair: a failure (a reader without write permission, a race
    /// lost) changes nothing the caller sees.
    async fn repair(&self, entry: &RunEntry, revision: Option<u64>) {
        let Ok(value) = serde_json::to_vec(entry) else {
            return;
        };
        let key = entry.run_id.to_string();
        let Some(index) = &self.index else {
            return;
        };
        match revision {
            Some(revision) => drop(index.update(key, value.into(), revision).await),
            None => drop(index.create(key, value.into()).await),
        }
    }

    /// Every run of the fleet (unordered), the stream being the truth and the index its
    /// cache: each index entry (a running run whose runner holds its lease as its runner last
    /// wrote it, at most a renewal period old; a run not completed otherwise brought up to date
    /// from the stream: [`Self::refresh`], then [`Self::settle`]), and each run the stream holds with no readable entry
    /// (the bucket deleted, an entry purged, a runner killed before its first index write),
    /// rebuilt from its lines. Rebuilt entries are written back so the next listing reads
    /// them from the index. Keys that are not run ids are skipped; an entry that does not
    /// decode counts as missing.
    pub async fn runs(&self) -> Result<Vec<RunEntry>, NatsError> {
        let mut revisions = BTreeMap::new();
        let mut runs = Vec::new();
        let mut held = std::collections::BTreeSet::new();
        if let Some(index) = &self.index {
            self.indexed_runs(index, (&mut revisions, &mut held), &mut runs)
                .await?;
        }
        let indexed: std::collections::BTreeSet<RunId> = runs.iter().map(|r| r.run_id).collect();
        for id in self.stream_run_ids().await? {
            if !indexed.contains(&id)
                && let Some(entry) = self.entry_from_stream(id).await?
            {
                self.repair(&entry, revisions.get(&id).copied()).await;
                runs.push(entry);
            }
        }
        let mut settled = Vec::with_capacity(runs.len());
        for entry in runs {
            // Held when the keys were listed: as its runner last wrote it, nothing more read.
            if held.contains(&entry.run_id) {
                settled.push(entry);
                continue;
            }
            settled.push(self.settle(entry).await?);
        }
        Ok(settled)
    }

    /// A run the index (brought up to date) says is running, checked against its lease: held,
    /// it is [`IndexStatus::Running`]; lapsed, the stream is looked at once more (the runner
    /// records `run.completed` before it releases the lease) and the run is completed or
    /// [`IndexStatus::Abandoned`]. Other entries are returned as they are.
    pub async fn settle(&self, entry: RunEntry) -> Result<RunEntry, NatsError> {
        if entry.status != IndexStatus::Running || self.lease_held(entry.run_id).await? {
            return Ok(entry);
        }
        let mut entry = self.refresh(entry).await?;
        if entry.status == IndexStatus::Running {
            entry.status = IndexStatus::Abandoned;
        }
        Ok(entry)
    }

    /// The runs of the index (each not held by its runner brought up to date from the
    /// stream), each key's revision, and the running runs whose lease is held. The leases
    /// are keys of the same bucket: one listing of its keys says which are held, with no
    /// read per running run.
    async fn indexed_runs(
        &self,
        index: &kv::Store,
        (revisions, held): (
            &mut BTreeMap<RunId, u64>,
            &mut std::collections::BTreeSet<RunId>,
        ),
        runs: &mut Vec<RunEntry>,
    ) -> Result<(), NatsError> {
        let mut listing = index
            .keys()
            .await
            .map_err(|e| self.js_error("runs index: listing keys", e))?;
        let mut keys = Vec::new();
        while let Some(key) = listing.next().await {
            keys.push(key.map_err(|e| self.js_error("runs index: listing keys", e))?);
        }
        let leases: std::collections::BTreeSet<RunId> = keys
            .iter()
            .filter_map(|k| RunId::parse(k.strip_prefix("lease.")?).ok())
            .collect();
        for key in keys {
            let Ok(id) = RunId::parse(&key) else {
                continue;
            };
            let Some(stored) = index
                .entry(key)
                .await
                .map_err(|e| self.js_error(format!("runs index: reading {id}"), e))?
            else {
                continue;
            };
            revisions.insert(id, stored.revision);
            // An entry another writer (or version) left unreadable does not hide the fleet.
            if let Ok(entry) = serde_json::from_slice::<RunEntry>(&stored.value) {
                // Its runner holds the lease and keeps the entry current with each renewal
                // (events, last event time, usage so far): no stream message is read for it.
                if entry.status == IndexStatus::Running && leases.contains(&id) {
                    held.insert(id);
                    runs.push(entry);
                    continue;
                }
                let events = (entry.status, entry.events);
                let entry = self.refresh(entry).await?;
                if (entry.status, entry.events) != events {
                    self.repair(&entry, Some(stored.revision)).await;
                }
                runs.push(entry);
            }
        }
        Ok(())
    }
}

/// Whether a key-value put found no stream answering (JetStream's "no responders"):
/// transient while the bucket's stream has no leader.
fn no_responders(e: &async_nats::jetstream::kv::PutError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<async_nats::jetstream::context::PublishError>())
        .is_some_and(|p| {
            p.kind() == async_nats::jetstream::context::PublishErrorKind::StreamNotFound
        })
}
