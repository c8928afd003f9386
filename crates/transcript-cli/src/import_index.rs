//! The import index (`<storage>/import-index.json`): what each session file of a store held
//! when it was last imported, so an unchanged file is not read again and a grown one appends
//! only what is new to its run.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::CliError;

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
    /// The turn the end of the stream flushed (written), as JSON.
    pub tail: Option<serde_json::Value>,
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
            .filter_map(|e| transcript_domain::RunId::parse(&e.run_id).ok())
            .collect()
    }

    /// Reads the index (absent: empty; unreadable: an error naming it).
    pub fn load(storage: &Path) -> Result<Self, CliError> {
        let path = storage.join(INDEX_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| CliError::Read {
                path,
                message: format!("not an import index: {e}"),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(CliError::Read {
                path,
                message: format!("cannot read: {e}"),
            }),
        }
    }

    /// Writes the index (a temporary file renamed over it).
    pub fn save(&self, storage: &Path) -> Result<(), CliError> {
        let path = storage.join(INDEX_FILE);
        let tmp = storage.join(format!("{INDEX_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| CliError::Storage(format!("cannot encode the import index: {e}")))?;
        std::fs::create_dir_all(storage)
            .and_then(|()| std::fs::write(&tmp, text))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| CliError::Storage(format!("{}: {e}", path.display())))
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
