//! The runs index: one key-value entry per run (`<STREAM>_RUNS`, key = run id) written by the
//! recorder as the run goes (at `run.started`, at `run.completed` and at close), so `list` and
//! fleet-wide receipts read one small value per run instead of every message of the stream.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use transcript_domain::{Payload, RunId, Seq, Timestamp, Usage};

use crate::{NatsError, NatsStore};

/// A run's state in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexStatus {
    /// Started, no `run.completed` yet (running, or its runner died).
    Running,
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
}

impl RunEntry {
    /// An entry for a run that has recorded nothing yet.
    pub fn new(run_id: RunId, parent_run_id: Option<RunId>) -> Self {
        Self {
            run_id,
            parent_run_id,
            workflow: None,
            status: IndexStatus::Running,
            started_at: None,
            ended_at: None,
            events: 0,
            usage_by_model: BTreeMap::new(),
        }
    }

    /// Folds one recorded event in; returns whether the entry should be written now.
    pub(crate) fn observe(&mut self, seq: Seq, timestamp: Timestamp, payload: &Payload) -> bool {
        self.events = seq;
        self.ended_at = Some(timestamp);
        match payload {
            Payload::RunStarted(p) => {
                self.workflow = Some(p.name.clone());
                self.started_at = Some(timestamp);
                true
            }
            Payload::RunCompleted(p) => {
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
                false
            }
            _ => false,
        }
    }
}

impl NatsStore {
    /// Writes `entry` to the runs index.
    pub async fn put_run(&self, entry: &RunEntry) -> Result<(), NatsError> {
        let value = serde_json::to_vec(entry).map_err(|e| self.js_error("encoding", e))?;
        self.index
            .put(entry.run_id.to_string(), value.into())
            .await
            .map_err(|e| self.js_error(format!("runs index: writing {}", entry.run_id), e))?;
        Ok(())
    }

    /// One run's index entry, if it has one.
    pub async fn run_entry(&self, run_id: RunId) -> Result<Option<RunEntry>, NatsError> {
        let value = self
            .index
            .get(run_id.to_string())
            .await
            .map_err(|e| self.js_error(format!("runs index: reading {run_id}"), e))?;
        value
            .map(|v| {
                serde_json::from_slice(&v)
                    .map_err(|e| self.js_error(format!("runs index: entry {run_id}"), e))
            })
            .transpose()
    }

    /// `entry` brought up to date from the stream when the index says the run is still
    /// running (its runner may have died since the last index write): the last event's seq and
    /// time, and its status when that event is `run.completed`. One message read per such run.
    pub async fn refresh(&self, mut entry: RunEntry) -> Result<RunEntry, NatsError> {
        if entry.status != IndexStatus::Running {
            return Ok(entry);
        }
        let Some(line) = self.last_line(entry.run_id).await? else {
            return Ok(entry);
        };
        if let Ok(decoded) = transcript_domain::decode_line(&line)
            && let Ok(event) = decoded.event.to_event()
        {
            entry.observe(event.seq, event.timestamp, &event.payload);
        }
        Ok(entry)
    }

    /// Every run of the index (unordered). Entries that do not decode are skipped.
    pub async fn runs(&self) -> Result<Vec<RunEntry>, NatsError> {
        let mut keys = self
            .index
            .keys()
            .await
            .map_err(|e| self.js_error("runs index: listing keys", e))?;
        let mut runs = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.map_err(|e| self.js_error("runs index: listing keys", e))?;
            if let Ok(id) = RunId::parse(&key)
                && let Some(entry) = self.run_entry(id).await?
            {
                runs.push(entry);
            }
        }
        Ok(runs)
    }
}
