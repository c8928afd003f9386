//! Resolving `<file|run-id>` arguments and loading transcripts through the
//! infra reader, keeping every diagnostic with its file and line.

use std::path::{Path, PathBuf};

use transcript_domain::{DecodedEvent, RunId};
use transcript_infra::{MalformedLine, ReadError, ReadItem, ReadWarning, TranscriptReader};

use crate::CliError;

/// The default storage directory, relative to the working directory.
pub const DEFAULT_STORAGE: &str = "storage/transcripts";

/// Resolves a `<file|run-id>` argument: an existing path wins; otherwise a
/// run id names `<storage>/<run-id>.jsonl`.
pub fn resolve(arg: &str, storage: &Path) -> Result<PathBuf, CliError> {
    let as_path = PathBuf::from(arg);
    if as_path.exists() {
        return Ok(as_path);
    }
    if let Ok(run_id) = RunId::parse(arg) {
        let path = storage.join(run_id.file_name());
        if path.exists() {
            return Ok(path);
        }
        return Err(CliError::NotFound {
            what: format!("run {run_id}"),
            path,
        });
    }
    Err(CliError::NotFound {
        what: "transcript".to_owned(),
        path: as_path,
    })
}

/// One transcript file, read completely and tolerantly.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The file.
    pub path: PathBuf,
    /// Events with their line numbers and decode warnings.
    pub events: Vec<transcript_infra::ReadEvent>,
    /// Malformed lines (errors).
    pub malformed: Vec<MalformedLine>,
    /// Reader warnings (unterminated final line, empty lines).
    pub warnings: Vec<ReadWarning>,
}

impl Loaded {
    /// The decoded events in file order.
    pub fn decoded(&self) -> Vec<DecodedEvent> {
        self.events.iter().map(|e| e.event.clone()).collect()
    }
}

/// Reads a whole transcript. A malformed line does not stop reading; an I/O
/// error does and is returned.
pub fn load(path: &Path) -> Result<Loaded, CliError> {
    let reader = TranscriptReader::open(path).map_err(|e| CliError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut loaded = Loaded {
        path: path.to_path_buf(),
        ..Loaded::default()
    };
    for item in reader {
        match item {
            Ok(ReadItem::Event(e)) => loaded.events.push(e),
            Ok(ReadItem::Warning(w)) => loaded.warnings.push(w),
            Err(ReadError::Malformed(m)) => loaded.malformed.push(m),
            Err(e @ ReadError::Io { .. }) => {
                return Err(CliError::Read {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(loaded)
}

/// A lookup for child runs: `<dir of the parent>/<child>.jsonl`, decoded
/// tolerantly (malformed lines are skipped; `validate` reports them).
pub fn child_lookup(dir: PathBuf) -> impl FnMut(RunId) -> Option<Vec<DecodedEvent>> {
    move |child: RunId| {
        let path = dir.join(child.file_name());
        if !path.exists() {
            return None;
        }
        load(&path).ok().map(|l| l.decoded())
    }
}

/// The directory holding a transcript (for resolving its child runs).
pub fn dir_of(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
