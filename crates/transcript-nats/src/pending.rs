//! An import killed part way leaves nothing half visible after the next import (#59 item 4).
//!
//! Before an import publishes a run's lines it writes `pending.<run id>` in the runs-index
//! bucket: the run's last sequence before this import (0 for a new run), and it holds the
//! run's lease while it publishes (as a runner does), renewing it. Once the run is complete in
//! the store (its lines acknowledged, its runs-index entry and the import index written) the
//! key is deleted and the lease released. An import that dies in between (its servers killed,
//! the process killed) leaves the key; the next import, before it stages anything, rolls each
//! such run back to what it was: the lines past the recorded sequence are deleted from the
//! stream, and a run that was new is removed with its runs-index entry. It waits (within the
//! lease) for a key whose lease is still held (another import publishing now) and leaves it
//! to that import. So after a re-run the store holds what a clean import writes.

use std::time::Duration;

use transcript_domain::{RunId, decode_line};

use crate::{NatsError, NatsStore};

/// The key prefix of pending runs (not a run id: listing runs passes over them).
pub const PENDING_PREFIX: &str = "pending.";

fn key(run: RunId) -> String {
    format!("{PENDING_PREFIX}{run}")
}

/// Marks `run` pending: its last sequence before this import is `after`.
pub(crate) async fn mark(store: &NatsStore, run: RunId, after: u64) -> Result<(), NatsError> {
    let bucket = store.writable_index()?;
    bucket
        .put(key(run), after.to_string().into())
        .await
        .map(drop)
        .map_err(|e| store.js_error(format!("runs index: marking run {run} pending"), e))
}

/// Clears `run`'s pending mark (it is complete in the store).
pub(crate) async fn clear(store: &NatsStore, run: RunId) -> Result<(), NatsError> {
    let bucket = store.writable_index()?;
    bucket
        .purge(key(run))
        .await
        .map_err(|e| store.js_error(format!("runs index: clearing run {run}'s pending mark"), e))
}

/// Rolls back every run a dead import left pending (see the module docs); the runs rolled
/// back. A run whose lease stays held for a whole lease is another import's: left alone.
pub async fn recover(store: &NatsStore) -> Result<Vec<RunId>, NatsError> {
    let Some(bucket) = &store.index else {
        return Ok(Vec::new());
    };
    let pending = pending_runs(store, bucket).await?;
    let mut recovered = Vec::new();
    for run in pending {
        let Some(value) = bucket
            .get(key(run))
            .await
            .map_err(|e| store.js_error(format!("runs index: run {run}'s pending mark"), e))?
        else {
            continue;
        };
        let after: u64 = std::str::from_utf8(&value)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if !lease_lapses(store, run).await? {
            continue;
        }
        roll_back(store, run, after).await?;
        clear(store, run).await?;
        recovered.push(run);
    }
    Ok(recovered)
}

/// The runs marked pending, listed patiently: no responders and timeouts (a cluster electing
/// the bucket's leader) are waited out within `ack_timeout × publish_attempts`.
async fn pending_runs(
    store: &NatsStore,
    bucket: &async_nats::jetstream::kv::Store,
) -> Result<Vec<RunId>, NatsError> {
    use futures_util::StreamExt as _;
    let budget = store.options.ack_timeout * store.options.publish_attempts.max(1);
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = Duration::from_millis(50);
    loop {
        let listed = async {
            let mut keys = bucket.keys().await.map_err(|e| e.to_string())?;
            let mut pending = Vec::new();
            while let Some(k) = keys.next().await {
                let k = k.map_err(|e| e.to_string())?;
                if let Some(run) = k
                    .strip_prefix(PENDING_PREFIX)
                    .and_then(|r| RunId::parse(r).ok())
                {
                    pending.push(run);
                }
            }
            Ok::<_, String>(pending)
        }
        .await;
        match listed {
            Ok(pending) => return Ok(pending),
            Err(_) if tokio::time::Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(store.js_error("runs index: listing pending runs", e)),
        }
    }
}

/// Whether `run`'s lease is free now or lapses within one lease (polled).
async fn lease_lapses(store: &NatsStore, run: RunId) -> Result<bool, NatsError> {
    let deadline = tokio::time::Instant::now() + store.options.lease + Duration::from_secs(1);
    let mut pause = Duration::from_millis(100);
    loop {
        if !store.lease_held(run).await? {
            return Ok(true);
        }
        if tokio::time::Instant::now() + pause > deadline {
            return Ok(false);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Deletes `run`'s lines past sequence `after`, newest first; a run that was new (`after` 0)
/// loses its runs-index entry too.
async fn roll_back(store: &NatsStore, run: RunId, after: u64) -> Result<(), NatsError> {
    while let Some((line, stream_seq)) = store.last_message(run).await? {
        let seq = decode_line(&line).map(|d| d.event.seq).unwrap_or(u64::MAX);
        if seq <= after {
            break;
        }
        store
            .stream
            .delete_message(stream_seq)
            .await
            .map_err(|e| store.js_error(format!("run {run}: deleting a half-imported line"), e))?;
    }
    if after == 0 {
        let bucket = store.writable_index()?;
        bucket.purge(run.to_string()).await.map_err(|e| {
            store.js_error(format!("runs index: removing half-imported run {run}"), e)
        })?;
    }
    Ok(())
}
