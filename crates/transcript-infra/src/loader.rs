//! Loads a run and its child runs from a storage directory into the
//! domain's step tree.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use transcript_domain::tree::{RunTree, build_run_tree};
use transcript_domain::{DecodedEvent, RunId};

use crate::reader::{MalformedLine, ReadError, ReadItem, TranscriptReader};

/// Why a run could not be loaded at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The root run's file could not be opened or read.
    #[error("cannot read run {run_id}: {source}")]
    Read {
        /// The run.
        run_id: RunId,
        /// The cause.
        #[source]
        source: ReadError,
    },
    /// The root run's file holds no event (empty, or only bad lines): there
    /// is no run to build, and its id is not made up.
    #[error("run {run_id} has no events ({})", path.display())]
    NoEvents {
        /// The run asked for.
        run_id: RunId,
        /// Its file.
        path: PathBuf,
    },
}

/// A rebuilt run tree plus the lines that could not be read on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedRun {
    /// The tree (inconsistencies are in `tree.problems` and per child).
    pub tree: RunTree,
    /// Malformed lines met in any of the files (skipped).
    pub malformed: Vec<MalformedLine>,
    /// Files read, root first.
    pub files: Vec<PathBuf>,
}

/// Reads every event of `<storage_dir>/<run_id>.jsonl`, skipping bad lines
/// into `malformed`.
fn read_events(
    path: &Path,
    malformed: &mut Vec<MalformedLine>,
) -> Result<Vec<DecodedEvent>, ReadError> {
    let mut events = Vec::new();
    for item in TranscriptReader::open(path)? {
        match item {
            Ok(ReadItem::Event(e)) => events.push(e.event),
            Ok(ReadItem::Warning(_)) => {}
            Err(ReadError::Malformed(m)) => malformed.push(m),
            Err(e) => return Err(e),
        }
    }
    Ok(events)
}

/// Loads the run `run_id` from `storage_dir` and follows `child_run_id`
/// links to the child runs' files next to it (decision 7). A root file
/// without events is [`LoadError::NoEvents`]; a missing or unreadable
/// child file, or one without events, shows up in the tree's problems as a
/// missing child, not as an error.
pub fn load_run_tree(storage_dir: impl AsRef<Path>, run_id: RunId) -> Result<LoadedRun, LoadError> {
    let dir = storage_dir.as_ref();
    let mut malformed = Vec::new();
    let mut files = Vec::new();
    let root_path = dir.join(run_id.file_name());
    let events = read_events(&root_path, &mut malformed)
        .map_err(|source| LoadError::Read { run_id, source })?;
    if events.is_empty() {
        return Err(LoadError::NoEvents {
            run_id,
            path: root_path,
        });
    }
    files.push(root_path);
    // Each child file is read once, however often the tree links it (a
    // shared child would otherwise be re-read per link, exponentially).
    let mut cache: HashMap<RunId, Option<Vec<DecodedEvent>>> = HashMap::new();
    let mut lookup = |child: RunId| {
        cache
            .entry(child)
            .or_insert_with(|| {
                let path = dir.join(child.file_name());
                if !path.exists() {
                    return None;
                }
                match read_events(&path, &mut malformed) {
                    // A tree of no events would get a made-up run id:
                    // shown as a child without a transcript instead.
                    Ok(events) if events.is_empty() => {
                        tracing::warn!("child run {child} has no events in {}", path.display());
                        None
                    }
                    Ok(events) => {
                        files.push(path);
                        Some(events)
                    }
                    Err(e) => {
                        tracing::warn!("cannot read child run {child}: {e}");
                        None
                    }
                }
            })
            .clone()
    };
    let tree = build_run_tree(&events, &mut lookup);
    Ok(LoadedRun {
        tree,
        malformed,
        files,
    })
}
