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
