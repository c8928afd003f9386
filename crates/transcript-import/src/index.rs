//! The import index (`<storage>/import-index.json`): what each session file of a store held
//! when it was last imported, so an unchanged file is not read again and a grown one appends
//! only what is new to its run.
//!
//! **Memory** (issue #29 item 4): the index is in memory whole while a store is imported and
//! while `receipts` groups by session, so an entry stays small whatever the session held:
//! the last turn a file's stream flushed is kept as a [`TailDigest`] (a sha256 per block and
//! the usage), not as the turn itself. Whole turns made the index 3.5 MB on disk for a
//! 100 MB store (2.6 MB of them turns) and grew the import's peak memory by ~10 MiB from a
//! 25 MB to a 100 MB store (debug build, `/usr/bin/time -f %M`: 23.1 → 32.8 MB for an import
//! with nothing new to read). An index written before keeps working: its whole turns are
//! read as digests, and written back as digests.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize};
use transcript_domain::{ContentBlock, MessagePayload, Usage};

use crate::ImportError;

/// Bytes of a session file's head whose hash tells a grown file from a rewritten one (the
/// store import's), and a file import's source from another ([`crate::source`]).
pub(crate) const HEAD: usize = 4096;

/// The index file, beside the transcripts.
pub const INDEX_FILE: &str = "import-index.json";

/// What the index knows about one session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Its run (empty: the file had no agent output).
    pub run_id: String,
    /// The provider it was read as.
    pub provider: String,
    /// Size when last imported.
    pub size: u64,
    /// Modification time when last imported (ns since the epoch).
    pub mtime_ns: u128,
    /// sha256 of its first `head_len` bytes.
    pub head: String,
    /// min(4 KiB, size) when last imported.
    pub head_len: u64,
    /// Normalizer items its content produced before the end of the stream.
    pub items_fed: u64,
    /// The turn the end of the stream flushed (written), as its digest (an index of an
    /// earlier version held the turn itself under `tail`: read as its digest).
    #[serde(
        default,
        rename = "tail_digest",
        alias = "tail",
        deserialize_with = "digest_or_turn"
    )]
    pub tail: Option<TailDigest>,
    /// The working directory the session file records, as a project name
    /// ([`crate::project::recorded_project`]), read when the file was last read (absent in an
    /// index written before, or when the file records none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The run was written by a file import (`import FILE`) and completed: it is never
    /// appended to, and is no open session run ([`Index::session_runs`]); absent (false) for
    /// a store import's open run (see [`crate::source`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
}

/// What the next import needs of the last turn a file's stream flushed, to write only what a
/// grown file added to it: which blocks it had (a sha256 of each block's JSON, in order) and
/// its usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TailDigest {
    /// sha256 (hex) of each block's JSON.
    pub blocks: Vec<String>,
    /// The turn's usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl TailDigest {
    /// The digest of a turn.
    pub fn of(turn: &MessagePayload) -> Self {
        Self {
            blocks: turn.blocks.iter().filter_map(block_digest).collect(),
            usage: turn.usage.clone(),
        }
    }

    /// The digest of a turn an earlier index kept whole (`{"blocks": [...], "usage": {...}}`).
    fn of_turn_json(turn: &serde_json::Value) -> Self {
        let blocks = turn
            .get("blocks")
            .and_then(|b| b.as_array())
            .map(|b| b.iter().map(value_digest).collect())
            .unwrap_or_default();
        let usage = turn.get("usage").map(|u| Usage {
            input_tokens: u.get("input_tokens").and_then(|v| v.as_u64()),
            output_tokens: u.get("output_tokens").and_then(|v| v.as_u64()),
            cache_read_tokens: u.get("cache_read_tokens").and_then(|v| v.as_u64()),
            cache_write_tokens: u.get("cache_write_tokens").and_then(|v| v.as_u64()),
            reasoning_tokens: u.get("reasoning_tokens").and_then(|v| v.as_u64()),
            cost_usd: u.get("cost_usd").and_then(|v| v.as_f64()),
            ..Default::default()
        });
        Self { blocks, usage }
    }
}

/// The digest of a block: the sha256 of its JSON as a `serde_json::Value` writes it (the
/// form an earlier index stored it in, so both compare equal).
pub fn block_digest(block: &ContentBlock) -> Option<String> {
    serde_json::to_value(block).ok().map(|v| value_digest(&v))
}

/// The lowercase hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    transcript_domain::text::lower_hex(&sha2::Sha256::digest(bytes))
}

fn value_digest(v: &serde_json::Value) -> String {
    crate::index::sha256_hex(&serde_json::to_vec(v).unwrap_or_default())
}

/// A `tail_digest`, or the whole turn an earlier index stored under `tail` (its blocks are
/// objects, a digest's are strings).
fn digest_or_turn<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TailDigest>, D::Error> {
    let Some(v) = Option::<serde_json::Value>::deserialize(d)? else {
        return Ok(None);
    };
    let digest_form = v
        .get("blocks")
        .and_then(|b| b.as_array())
        .is_some_and(|b| b.iter().all(serde_json::Value::is_string));
    if digest_form {
        serde_json::from_value(v)
            .map(Some)
            .map_err(serde::de::Error::custom)
    } else {
        Ok(Some(TailDigest::of_turn_json(&v)))
    }
}

/// `<storage>/import-index.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Index {
    /// Canonical path → entry.
    pub files: BTreeMap<String, IndexEntry>,
}

impl Index {
    /// The runs that mirror a session file of an agent CLI's store (issue #29 item 3). Such
    /// a run is **open**, not incomplete: the session may grow (the CLI appends to the same
    /// file when it is resumed), so its import writes no `step.completed` / `run.completed`
    /// that a later import would have to contradict in an append-only transcript. Readers
    /// that show a run's status say "open (imported session)" for a run of this set without
    /// `run.completed`, where they would say "incomplete".
    pub fn session_runs(&self) -> std::collections::BTreeSet<transcript_domain::RunId> {
        self.files
            .values()
            .filter(|e| !e.closed)
            .filter_map(|e| transcript_domain::RunId::parse(&e.run_id).ok())
            .collect()
    }

    /// Reads the index (absent: empty; unreadable: an error naming it).
    pub fn load(storage: &Path) -> Result<Self, ImportError> {
        let path = storage.join(INDEX_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| ImportError::Read {
                path,
                message: format!("not an import index: {e}"),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(ImportError::Read {
                path,
                message: format!("cannot read: {e}"),
            }),
        }
    }

    /// Writes the index durably: streamed into a temporary file (0o600, never through a
    /// symlink), synced, renamed over the index, directory synced
    /// ([`transcript_infra::replace_file_durably`]). Callers save it only once the
    /// transcripts it names are durable.
    pub fn save(&self, storage: &Path) -> Result<(), ImportError> {
        transcript_infra::replace_file_durably(storage, INDEX_FILE, |w| {
            serde_json::to_writer_pretty(w, self).map_err(std::io::Error::other)
        })
        .map_err(|e| ImportError::Storage(format!("import index: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(run_id: &str) -> IndexEntry {
        IndexEntry {
            run_id: run_id.to_owned(),
            provider: "gemini".to_owned(),
            size: 1,
            mtime_ns: 1,
            head: String::new(),
            head_len: 1,
            items_fed: 0,
            tail: None,
            project: None,
            closed: false,
        }
    }

    #[test]
    fn session_runs_are_the_runs_of_indexed_files_and_not_files_without_output() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = Index::default();
        let run = "26ad1d70-2cb4-45bf-ba28-55633c7792f6";
        index.files.insert("/s/a.jsonl".to_owned(), entry(run));
        index.files.insert("/s/b.jsonl".to_owned(), entry(""));
        index.save(dir.path()).unwrap();
        let runs = Index::load(dir.path()).unwrap().session_runs();
        let ids: Vec<String> = runs.iter().map(ToString::to_string).collect();
        assert_eq!(ids, vec![run.to_owned()]);
        assert!(Index::default().session_runs().is_empty());
    }
}
