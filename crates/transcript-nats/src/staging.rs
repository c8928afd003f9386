//! [`ImportStaging`]: an import into the store through the file importer.
//!
//! The file importer (`transcript-import`) decides what an import writes: which sources are
//! new, unchanged or grown, and the bytes of every line. On NATS storage it runs unchanged on
//! a private staging directory that this type fills from the store and publishes back:
//!
//! 1. [`ImportStaging::open`] writes the store's import index (the document under
//!    [`IMPORT_INDEX_KEY`] in the runs-index bucket) into the directory as
//!    `import-index.json`, and for every open run it names (a store import's session run,
//!    which a grown session file appends to) the run's last stored line as
//!    `<run_id>.jsonl`: what the file importer needs to resume the run after its highest seq
//!    with timestamps that never go backwards.
//! 2. The caller runs the file import on the directory.
//! 3. [`ImportStaging::publish`] publishes every line the import added (those after the
//!    staged ones) with a [`PipelinedPublisher`], writes each published run's runs-index
//!    entry (its billed turns), and only then the import index, merged into the one stored
//!    (a concurrent import's entries are kept). A source whose run was not published in full
//!    is left out of the index, so the next import writes it again; `receipts` bills a
//!    request written twice once, by its request id.
//!
//! The lines published are the file importer's lines, so a run imported into NATS is byte
//! for byte the run imported into a directory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;
use transcript_domain::{RunId, Seq, decode_line};

use crate::index::RunEntry;
use crate::publish::{PipelinedPublisher, Published};
use crate::{NatsError, NatsStore};

/// The key of the import index in the runs-index bucket (not a run id, so listing runs
/// passes over it).
pub const IMPORT_INDEX_KEY: &str = "import-index";

/// The import index's file name in the staging directory (`transcript-import`'s).
pub const IMPORT_INDEX_FILE: &str = "import-index.json";

/// How often a concurrent change of the stored import index is merged before giving up.
const INDEX_ATTEMPTS: usize = 10;

/// What a publish keeps per run: its index entry and last sequence, and its lease.
type Publishing<'a> = (
    &'a mut BTreeMap<RunId, (RunEntry, Seq)>,
    &'a mut BTreeMap<RunId, crate::lease::LeaseHold>,
);

/// A staging directory for one import into the store (see the module docs).
#[derive(Debug)]
pub struct ImportStaging {
    store: NatsStore,
    dir: PathBuf,
    /// The import index as loaded (`{}` when the store had none).
    loaded: Value,
    /// Open runs staged with their last stored seq.
    staged: BTreeMap<RunId, Seq>,
}

/// What [`ImportStaging::publish`] did.
#[derive(Debug, Clone, Default)]
pub struct StagedImport {
    /// The runs the import wrote to, each acknowledged up to its last event.
    pub published: Published,
    /// Whether the stored import index changed.
    pub index_changed: bool,
}

impl ImportStaging {
    /// Fills `dir` (an empty, private directory) from `store`, which must be opened for
    /// writing ([`NatsStore::connect`]).
    /// Refused when the existing stream keeps fewer copies of each event than
    /// `StreamOptions::replicas` asks for, as a runner is.
    pub async fn open(store: NatsStore, dir: &Path) -> Result<Self, NatsError> {
        let kept = store.stream.cached_info().config.num_replicas;
        if let Some(asked) = store.options.replicas.filter(|asked| kept < *asked) {
            return Err(store.js_error(
                format!("stream {}", store.url.stream),
                format!(
                    "it keeps {kept} copies of each event and TRANSCRIPT_NATS_REPLICAS asks for \
                     {asked}: raise the stream's replicas or ask for fewer"
                ),
            ));
        }
        // What an import killed part way left is rolled back first (#59 item 4).
        crate::pending::recover(&store).await?;
        let (loaded, _) = load_index(&store).await?;
        let mut staging = Self {
            store,
            dir: dir.to_path_buf(),
            loaded: Value::Object(Default::default()),
            staged: BTreeMap::new(),
        };
        if let Some(loaded) = loaded {
            let text = serde_json::to_vec_pretty(&loaded).map_err(|e| staging.io(&e))?;
            staging.write(IMPORT_INDEX_FILE, &text)?;
            for run in open_runs(&loaded) {
                let Some(line) = staging.store.last_line(run).await? else {
                    continue;
                };
                let seq = decode_line(&line).map(|d| d.event.seq).map_err(|e| {
                    staging
                        .store
                        .js_error(format!("run {run}: its last event"), e)
                })?;
                staging.write(&run.file_name(), &line)?;
                staging.staged.insert(run, seq);
            }
            staging.loaded = loaded;
        }
        Ok(staging)
    }

    /// Publishes what the import wrote into the directory with up to `window` acks in
    /// flight, then the runs' index entries and the import index (see the module docs).
    /// An error names the run; the runs fully acknowledged before it are indexed.
    pub async fn publish(self, window: usize) -> Result<StagedImport, NatsError> {
        let mut publisher = PipelinedPublisher::new(self.store.clone(), window);
        let mut entries: BTreeMap<RunId, (RunEntry, Seq)> = BTreeMap::new();
        let mut holds = BTreeMap::new();
        let mut failure = None;
        for run in self.run_files()? {
            let held = (&mut entries, &mut holds);
            if let Err(e) = self.publish_run(&mut publisher, run, held).await {
                failure = Some(e);
                break;
            }
        }
        if failure.is_none()
            && let Err(e) = publisher.flush().await
        {
            failure = Some(e);
        }
        let published = publisher.acknowledged().clone();
        // A run is complete when every line the import wrote is acknowledged.
        let mut complete = BTreeSet::new();
        for (run, (mut entry, last)) in entries {
            if published.runs.get(&run).map(|(seq, _)| *seq) != Some(last) {
                continue;
            }
            entry.flush(None);
            self.store.put_run(&entry).await?;
            complete.insert(run);
        }
        let index_changed = self.save_index(&complete).await?;
        // Complete in the store: no longer pending, the lease released. A run left
        // incomplete stays pending for the next import to roll back, its lease let go.
        for (run, _) in holds {
            if complete.contains(&run) {
                crate::pending::clear(&self.store, run).await?;
            }
            let _ = self.store.release_lease(run).await;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(StagedImport {
                published,
                index_changed,
            }),
        }
    }

    /// Publishes one run's new lines, folding them into its index entry.
    async fn publish_run(
        &self,
        publisher: &mut PipelinedPublisher,
        run: RunId,
        (entries, holds): Publishing<'_>,
    ) -> Result<(), NatsError> {
        let path = self.dir.join(run.file_name());
        let bytes = std::fs::read(&path).map_err(|e| self.io(&e))?;
        let after = self.staged.get(&run).copied().unwrap_or(0);
        let bytes = Bytes::from(bytes);
        let mut start = 0;
        while start < bytes.len() {
            let end = bytes[start..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |i| start + i + 1);
            let line = bytes.slice(start..end);
            start = end;
            let event = decode_line(&line)
                .ok()
                .and_then(|d| d.event.to_event().ok())
                .ok_or_else(|| {
                    self.store.js_error(
                        format!("run {run}"),
                        "the import wrote a line that does not decode",
                    )
                })?;
            if event.seq <= after {
                continue;
            }
            let (entry, last) = match entries.entry(run) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    // Held and marked pending before its first line (see `pending`).
                    holds.insert(run, self.hold(run).await?);
                    crate::pending::mark(&self.store, run, after).await?;
                    // An appended run goes on from its entry; a new one starts empty.
                    let entry = match self.store.run_entry(run).await? {
                        Some(entry) if after > 0 => entry,
                        _ => RunEntry::new(run, event.parent_run_id),
                    };
                    slot.insert((entry, 0))
                }
            };
            entry.observe(
                (event.seq, event.timestamp),
                (&event.path, event.iteration),
                &event.payload,
            );
            *last = event.seq;
            if let Some(hold) = holds.get(&run) {
                hold.ensure(&self.store).await?;
            }
            publisher.publish(run, event.seq, line).await?;
        }
        Ok(())
    }

    /// `run`'s lease, held while its lines are published. Taken patiently: a lease just
    /// released (its purge marker lives a second) or left by a dead import lapses within one
    /// lease; one held longer is another writer's, and refused.
    async fn hold(&self, run: RunId) -> Result<crate::lease::LeaseHold, NatsError> {
        let deadline = tokio::time::Instant::now()
            + self.store.options.lease
            + std::time::Duration::from_secs(2);
        let mut pause = std::time::Duration::from_millis(100);
        loop {
            match crate::lease::LeaseHold::take(&self.store, run).await {
                Ok(hold) => return Ok(hold),
                Err(crate::lease::TakeError::Held)
                    if tokio::time::Instant::now() + pause < deadline =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(1));
                }
                Err(crate::lease::TakeError::Held) => {
                    return Err(self.store.js_error(
                        format!("run {run}"),
                        "another import or runner holds its lease: import again once it is done",
                    ));
                }
                Err(crate::lease::TakeError::Store(e)) => return Err(e),
            }
        }
    }

    /// The runs the directory holds a transcript of, in run-id order.
    fn run_files(&self) -> Result<Vec<RunId>, NatsError> {
        let mut runs = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(|e| self.io(&e))? {
            let name = entry.map_err(|e| self.io(&e))?.file_name();
            if let Some(run) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".jsonl"))
                .and_then(|id| RunId::parse(id).ok())
            {
                runs.push(run);
            }
        }
        runs.sort();
        Ok(runs)
    }

    /// Merges the sources the import changed into the stored import index, each only when
    /// its run is in `complete` (or it has none), with compare-and-set so that a concurrent
    /// import's entries are kept. Returns whether anything was written.
    async fn save_index(&self, complete: &BTreeSet<RunId>) -> Result<bool, NatsError> {
        let text = match std::fs::read(self.dir.join(IMPORT_INDEX_FILE)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(self.io(&e)),
        };
        let now: Value = serde_json::from_slice(&text).map_err(|e| self.io(&e))?;
        let changed: Vec<(&String, &Value)> = files(&now)
            .filter(|(key, entry)| files_get(&self.loaded, key) != Some(*entry))
            .filter(|(_, entry)| {
                let run = entry.get("run_id").and_then(Value::as_str).unwrap_or("");
                run.is_empty() || RunId::parse(run).is_ok_and(|r| complete.contains(&r))
            })
            .collect();
        if changed.is_empty() {
            return Ok(false);
        }
        let bucket = self.store.writable_index()?;
        for _ in 0..INDEX_ATTEMPTS {
            let (stored, revision) = load_index(&self.store).await?;
            let mut merged = stored.unwrap_or_else(|| serde_json::json!({ "files": {} }));
            if let Some(map) = merged.as_object_mut().and_then(|o| {
                o.entry("files")
                    .or_insert_with(|| serde_json::json!({}))
                    .as_object_mut()
            }) {
                for (key, entry) in &changed {
                    map.insert((*key).clone(), (*entry).clone());
                }
            }
            let value: Bytes = serde_json::to_vec(&merged).map_err(|e| self.io(&e))?.into();
            let written = match revision {
                Some(revision) => bucket
                    .update(IMPORT_INDEX_KEY, value, revision)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string()),
                None => bucket
                    .create(IMPORT_INDEX_KEY, value)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string()),
            };
            match written {
                Ok(()) => return Ok(true),
                // Another import wrote it since it was read: merge again.
                Err(_) if load_index(&self.store).await?.1 != revision => {}
                Err(e) => return Err(self.store.js_error("writing the import index", e)),
            }
        }
        Err(self.store.js_error(
            "writing the import index",
            format!("it kept changing under {INDEX_ATTEMPTS} concurrent imports"),
        ))
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), NatsError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join(name);
        // A new file, never through a planted symlink.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| NatsError::Io {
                path: path.display().to_string(),
                message: format!("staging the import: {e}"),
            })
    }

    fn io(&self, e: &dyn std::fmt::Display) -> NatsError {
        NatsError::Io {
            path: self.dir.display().to_string(),
            message: format!("staging the import: {e}"),
        }
    }
}

/// The store's import index: what `import` keeps of the session files it imported (the
/// document a directory keeps as `import-index.json`: each file's run, provider and project),
/// `None` when nothing was imported. `receipts --by session|project` groups a store import's
/// runs by it, as on a directory.
pub async fn import_index(store: &NatsStore) -> Result<Option<Value>, NatsError> {
    if store.index.is_none() {
        return Ok(None);
    }
    Ok(load_index(store).await?.0)
}

/// The session runs the stored import index names as open (an agent CLI's session imported
/// with `import --store`, which may grow): without `run.completed` they are open, not
/// abandoned. None without a runs index or an import index.
pub(crate) async fn imported_open_runs(store: &NatsStore) -> Result<BTreeSet<RunId>, NatsError> {
    if store.index.is_none() {
        return Ok(BTreeSet::new());
    }
    Ok(load_index(store)
        .await?
        .0
        .map(|index| open_runs(&index))
        .unwrap_or_default())
}

/// The stored import index and its revision (`None`, `None` when there is none).
/// Reading it waits out no responders and timeouts (a cluster electing the bucket's leader)
/// within `ack_timeout × publish_attempts`.
async fn load_index(store: &NatsStore) -> Result<(Option<Value>, Option<u64>), NatsError> {
    let bucket = store.writable_index()?;
    let budget = store.options.ack_timeout * store.options.publish_attempts.max(1);
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = std::time::Duration::from_millis(50);
    let entry = loop {
        match bucket.entry(IMPORT_INDEX_KEY).await {
            Ok(entry) => break entry,
            Err(_) if tokio::time::Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
            Err(e) => return Err(store.js_error("reading the import index", e)),
        }
    };
    let Some(entry) = entry else {
        return Ok((None, None));
    };
    if entry.operation != async_nats::jetstream::kv::Operation::Put {
        return Ok((None, Some(entry.revision)));
    }
    let value = serde_json::from_slice(&entry.value)
        .map_err(|e| store.js_error("the stored import index is not one", e))?;
    Ok((Some(value), Some(entry.revision)))
}

/// The index's sources: key → entry.
fn files(index: &Value) -> impl Iterator<Item = (&String, &Value)> {
    index
        .get("files")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn files_get<'a>(index: &'a Value, key: &str) -> Option<&'a Value> {
    index.get("files").and_then(|f| f.get(key))
}

/// The open runs an import index names (store imports' session runs: `closed` absent or
/// false), which an import may append to.
fn open_runs(index: &Value) -> BTreeSet<RunId> {
    files(index)
        .filter(|(_, e)| !e.get("closed").and_then(Value::as_bool).unwrap_or(false))
        .filter_map(|(_, e)| RunId::parse(e.get("run_id")?.as_str()?).ok())
        .collect()
}

/// [`ImportStaging`] for a blocking caller (the command line): connects to the store (creating
/// the stream and runs index as a runner does), stages on its own runtime, and publishes
/// once.
#[derive(Debug)]
pub struct BlockingStaging {
    runtime: tokio::runtime::Runtime,
    staging: Option<ImportStaging>,
}

impl BlockingStaging {
    /// Connects to `url` with `options` and fills `dir` ([`ImportStaging::open`]).
    pub fn open(
        url: &crate::StorageUrl,
        options: crate::StreamOptions,
        dir: &Path,
    ) -> Result<Self, NatsError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| NatsError::Connect {
                url: url.to_string(),
                message: format!("cannot start the runtime: {e}"),
            })?;
        let staging = runtime.block_on(async {
            let store = NatsStore::connect(url, options).await?;
            ImportStaging::open(store, dir).await
        })?;
        Ok(Self {
            runtime,
            staging: Some(staging),
        })
    }

    /// [`ImportStaging::publish`] with [`crate::DEFAULT_WINDOW`] acks in flight; a second
    /// call does nothing.
    pub fn publish(&mut self) -> Result<Option<StagedImport>, NatsError> {
        match self.staging.take() {
            Some(staging) => self
                .runtime
                .block_on(staging.publish(crate::DEFAULT_WINDOW))
                .map(Some),
            None => Ok(None),
        }
    }
}
