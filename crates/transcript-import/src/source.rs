//! A source already imported (#51 item 3): a file import looks its input up in the storage's
//! [`Index`] first, so importing the same session log twice, or by file after `--store`
//! (and `--store` after a file import), never writes a second run that bills its requests
//! again.
//!
//! A source's **identity** is its canonical path with the sha256 of its first 4 KiB (its
//! first records, which name the session), or, at another path, the same provider and the
//! same first 4 KiB (a copy of the log). A regular file only: a FIFO or a device is read
//! once, by the import itself, and has no identity.
//!
//! What a file import does with a known source:
//! - a run of a store import (**open**, [`crate::index::IndexEntry::closed`] false): the store's
//!   incremental import of that file, against its entry: unchanged (nothing written), or
//!   grown (what is new appended to the run, the store's continuation rule);
//! - a run of an earlier file import (**closed**: it has its `run.completed`): unchanged when
//!   it has the size the index knows; grown, a new run that replaces it in the index (a
//!   completed run is never appended to: the earlier run stays, and `receipts` bills each
//!   request of both once, by its `request_id`).
//!
//! A new source's run is recorded in the index as closed, so the next import, by file or
//! as a store, knows it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::{Clock, RunIdGenerator};
use transcript_infra::{DurableBatch, Unsynced};
use transcript_providers::{ClockSource, Provider};

use crate::index::{self, HEAD, Index, IndexEntry, sha256_hex};
use crate::{
    ImportBill, ImportContext, ImportError, ImportOutcome, ImportStatus, Imported, Via, import_one,
    not_durable, store,
};

/// An input's identity: its index key (canonical path), size, modification time and head.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    /// Canonical path.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time (ns since the epoch).
    pub mtime_ns: u128,
    /// Its first [`HEAD`] bytes (fewer in a smaller file).
    pub head: Vec<u8>,
}

impl Identity {
    /// The identity of `input` when it is a regular file that can be read; `None` otherwise
    /// (the import then reads it as before and the index does not name it).
    pub fn of(input: &Path) -> Option<Self> {
        let meta = std::fs::metadata(input).ok()?;
        if !meta.is_file() {
            return None;
        }
        let key = std::fs::canonicalize(input)
            .ok()?
            .to_string_lossy()
            .into_owned();
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let mut head = Vec::with_capacity(HEAD);
        std::fs::File::open(input)
            .ok()?
            .take(HEAD as u64)
            .read_to_end(&mut head)
            .ok()?;
        Some(Self {
            key,
            size: meta.len(),
            mtime_ns,
            head,
        })
    }

    /// Whether the index entry `e` hashed the same first bytes as this file has.
    fn same_head(&self, e: &IndexEntry) -> bool {
        usize::try_from(e.head_len)
            .ok()
            .and_then(|n| self.head.get(..n))
            .is_some_and(|h| sha256_hex(h) == e.head)
    }

    /// The entry of this source in `index` and its provider: the one of its path when its
    /// head is the same, else one of another path with the same full head (a copy); of the
    /// `provider` named (any, when auto). Entries without a run (no agent output yet) are
    /// no source.
    pub fn known<'a>(
        &self,
        index: &'a Index,
        provider: Option<Provider>,
    ) -> Option<(&'a IndexEntry, Provider)> {
        let known = self.entry(index, provider)?;
        Some((known, Provider::from_name(&known.provider).ok()?))
    }

    fn entry<'a>(&self, index: &'a Index, provider: Option<Provider>) -> Option<&'a IndexEntry> {
        let has_run = |e: &&IndexEntry| {
            !e.run_id.is_empty() && provider.is_none_or(|p| e.provider == p.name())
        };
        if let Some(e) = index.files.get(&self.key) {
            return Some(e).filter(has_run).filter(|e| self.same_head(e));
        }
        index
            .files
            .values()
            .filter(has_run)
            .find(|e| e.head_len == HEAD as u64 && self.head.len() == HEAD && self.same_head(e))
    }

    /// The index entry of a file import's new, completed run.
    pub fn closed_entry(&self, run_id: String, provider: Provider, input: &Path) -> IndexEntry {
        IndexEntry {
            run_id,
            provider: provider.name().to_owned(),
            size: self.size,
            mtime_ns: self.mtime_ns,
            head: sha256_hex(&self.head),
            head_len: self.head.len() as u64,
            items_fed: 0,
            tail: None,
            project: crate::project::recorded_project(input),
            closed: true,
        }
    }
}

/// Imports every input; returns what was written, durably, and the per-file failures. A
/// source the storage's index knows is not imported as a second run ([`crate::source`]); each new
/// or appended source is recorded in the index once its transcript is durable.
pub fn import_all(
    ctx: &ImportContext,
    inputs: &[PathBuf],
    via: Via,
) -> (Vec<Imported>, Vec<ImportError>) {
    let mut index = match Index::load(&ctx.storage) {
        Ok(index) => index,
        Err(e) => return (Vec::new(), vec![e]),
    };
    let (clock, ids) = crate::clock::clock_and_ids(ctx.deterministic);
    let mut written: Vec<Option<(Imported, Option<Keyed>)>> = Vec::new();
    let mut failed = Vec::new();
    let mut batch = DurableBatch::new();
    for input in inputs {
        match import_source(ctx, (&clock, ids.as_ref()), input, via, &index) {
            Ok((imported, entry, file)) => {
                if let Some(file) = file {
                    batch.submit(written.len() as u64, file);
                }
                // A later input of this import that is the same source finds it.
                if let Some((key, entry)) = &entry {
                    index.files.insert(key.clone(), entry.clone());
                }
                written.push(Some((imported, entry)));
            }
            Err(e) => failed.push(e),
        }
    }
    for (token, result) in batch.finish() {
        if let Err(e) = result
            && let Some(slot) = written.get_mut(token as usize)
            && let Some((i, _)) = slot.take()
        {
            failed.push(not_durable(&i.input, &e));
        }
    }
    // The index names only durable runs: the entries of the inputs whose runs are, added to
    // the index as saved (read again: what this import inserted for the others is dropped).
    let done: Vec<(Imported, Option<Keyed>)> = written.into_iter().flatten().collect();
    if done.iter().any(|(_, e)| e.is_some()) {
        match Index::load(&ctx.storage) {
            Ok(mut saved) => {
                let mut changed = false;
                for (key, entry) in done.iter().filter_map(|(_, e)| e.as_ref()) {
                    if saved.files.get(key) != Some(entry) {
                        saved.files.insert(key.clone(), entry.clone());
                        changed = true;
                    }
                }
                if changed && let Err(e) = saved.save(&ctx.storage) {
                    failed.push(e);
                }
            }
            Err(e) => failed.push(e),
        }
    }
    (done.into_iter().map(|(i, _)| i).collect(), failed)
}

/// An index entry under its key (the source's canonical path).
type Keyed = (String, index::IndexEntry);

/// What importing one input did: its report, the index entry to record, and its
/// transcript's file, written but not yet durable.
type SourceImport = (Imported, Option<Keyed>, Option<Unsynced>);

/// Imports one input: through the store's incremental import when the index knows its
/// source as an open store run ([`crate::source`]), nothing when it knows it as a completed file
/// import of the same size, else as a new run.
fn import_source(
    ctx: &ImportContext,
    (clock, ids): (&Arc<dyn Clock>, &dyn RunIdGenerator),
    input: &Path,
    via: Via,
    index: &Index,
) -> Result<SourceImport, ImportError> {
    let identity = Identity::of(input);
    if let Some(identity) = &identity
        && let Some((known, provider)) = identity.known(index, ctx.provider)
    {
        if !known.closed {
            let (outcome, entry, file) =
                store::import_store_file(ctx, clock, ids, provider, input, Some(known), via)?;
            if let Some(imported) = from_store(ctx, input, provider, outcome) {
                let entry = entry.map(|e| (identity.key.clone(), e));
                return Ok((imported, entry, file));
            }
        } else if known.size == identity.size
            && let Ok(run_id) = transcript_domain::RunId::parse(&known.run_id)
        {
            // The same content a file import completed: nothing to write.
            let imported = unchanged(ctx, input, provider, run_id, ImportStatus::Succeeded);
            return Ok((imported, None, None));
        }
    }
    let (imported, file) = import_one(ctx, clock, ids, input, via)?;
    let entry = identity.map(|id| {
        let entry = id.closed_entry(imported.run_id.to_string(), imported.provider, input);
        (id.key, entry)
    });
    Ok((imported, entry, file))
}

/// A store import's outcome as a file import's report; `None` when it wrote no run (no
/// agent output: the input is then imported as a new run, which says why).
fn from_store(
    ctx: &ImportContext,
    input: &Path,
    provider: Provider,
    outcome: store::StoreOutcome,
) -> Option<Imported> {
    let (run, events, bill) = match outcome {
        store::StoreOutcome::Unchanged(run) => {
            return Some(unchanged(ctx, input, provider, run, ImportStatus::Open));
        }
        store::StoreOutcome::Appended(run, events, bill)
        | store::StoreOutcome::New(run, events, bill) => (run, events, bill),
        store::StoreOutcome::NoOutput => return None,
    };
    let mut imported = unchanged(ctx, input, provider, run, ImportStatus::Open);
    imported.events = events;
    imported.bill = bill;
    imported.outcome = ImportOutcome::Appended;
    Some(imported)
}

/// What an import of a known, unchanged source reports: its run, nothing written.
fn unchanged(
    ctx: &ImportContext,
    input: &Path,
    provider: Provider,
    run_id: transcript_domain::RunId,
    status: ImportStatus,
) -> Imported {
    Imported {
        input: input.to_path_buf(),
        run_id,
        path: ctx.storage.join(run_id.file_name()),
        provider,
        events: 0,
        diagnostics: 0,
        clock: ClockSource::Provider,
        status,
        bill: ImportBill::default(),
        outcome: ImportOutcome::Unchanged,
    }
}
