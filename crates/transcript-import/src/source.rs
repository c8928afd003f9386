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
use std::path::Path;

use transcript_providers::Provider;

use crate::index::{Index, IndexEntry, sha256_hex};

/// Bytes of a file's head its identity hashes (the store import's [`crate::store`] head).
pub(crate) const HEAD: usize = 4096;

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
