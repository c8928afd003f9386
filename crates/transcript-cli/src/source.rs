//! Resolving `<file|run-id>` arguments and loading transcripts through the
//! infra reader, keeping every diagnostic with its file and line.

use std::path::{Path, PathBuf};

use transcript_domain::{DecodedEvent, RunId};
use transcript_infra::{MalformedLine, ReadError, ReadItem, ReadWarning, TranscriptReader};

use crate::CliError;

/// The default storage directory, relative to the working directory.
pub const DEFAULT_STORAGE: &str = "storage/transcripts";

/// Resolves a `<file|run-id>` argument: an existing path wins; otherwise a full run id names
/// `<storage>/<run-id>.jsonl`, a unique prefix of a run id (at least 4 hex digits) names the one
/// run it starts, and `latest` names the most recently started root run.
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
    if arg == "latest" {
        return crate::runs::latest(storage)?.ok_or_else(|| CliError::NotFound {
            what: "any run (for `latest`)".to_owned(),
            path: storage.to_path_buf(),
        });
    }
    if is_id_prefix(arg) {
        let prefix = arg.to_ascii_lowercase();
        let mut matches: Vec<(RunId, PathBuf)> = crate::runs::run_files(storage)
            .into_iter()
            .filter(|(id, _)| id.to_string().starts_with(&prefix))
            .collect();
        return match matches.len() {
            1 => Ok(matches.remove(0).1),
            0 => Err(CliError::NotFound {
                what: format!("run with id prefix {prefix:?}"),
                path: storage.to_path_buf(),
            }),
            n => {
                matches.sort_by_key(|(id, _)| id.to_string());
                let shown: Vec<String> = matches
                    .iter()
                    .take(5)
                    .map(|(id, _)| id.to_string())
                    .collect();
                Err(CliError::Invalid(format!(
                    "run id prefix {prefix:?} is ambiguous: {n} runs match ({}{})",
                    shown.join(", "),
                    if n > 5 { ", …" } else { "" }
                )))
            }
        };
    }
    Err(CliError::NotFound {
        what: "transcript".to_owned(),
        path: as_path,
    })
}

/// Whether `arg` can be the start of a run id: 4 to 35 characters of hex digits and hyphens.
fn is_id_prefix(arg: &str) -> bool {
    (4..36).contains(&arg.len()) && arg.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
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

/// A child run's events: `<dir of the parent>/<child>.jsonl`, decoded tolerantly (malformed
/// lines are skipped; `validate` reports them). `Ok(None)` when there is no such file; a file
/// that exists but cannot be read is an error, not a missing child.
pub fn read_child(dir: &Path, child: RunId) -> Result<Option<Vec<DecodedEvent>>, CliError> {
    let path = dir.join(child.file_name());
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CliError::Read {
                path,
                message: format!("cannot read the child run: {e}"),
            });
        }
        Ok(_) => {}
    }
    Ok(Some(load(&path)?.decoded()))
}

/// The directory holding a transcript (for resolving its child runs).
pub fn dir_of(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Malformed lines and reader warnings go to stderr, one line each, naming
/// the file and line; the command goes on with what could be read.
pub fn report_read_problems(loaded: &Loaded) {
    for m in &loaded.malformed {
        let line = m.to_string();
        if line.starts_with(&loaded.path.display().to_string()) {
            crate::diag!("warning: {line}");
        } else {
            crate::diag!("warning: {}: {line}", loaded.path.display());
        }
    }
    for w in &loaded.warnings {
        crate::diag!("warning: {}: {w}", loaded.path.display());
    }
}

/// A run opened for a view: its events (masked when a redactor is given)
/// and access to its child runs, masked the same way.
pub struct RunSource<'a> {
    /// The run's file.
    pub path: PathBuf,
    /// Its events, masked when asked.
    pub events: Vec<DecodedEvent>,
    redactor: Option<&'a transcript_redact::Redactor>,
    /// Child runs that exist but could not be read, met by [`RunSource::lookup`].
    child_errors: std::cell::RefCell<Vec<CliError>>,
}

/// Resolves, reads (reporting bad lines on stderr) and masks a run.
pub fn open_run<'a>(
    arg: &str,
    storage: &Path,
    redactor: Option<&'a transcript_redact::Redactor>,
) -> Result<RunSource<'a>, CliError> {
    let path = resolve(arg, storage)?;
    let loaded = load(&path)?;
    report_read_problems(&loaded);
    let mut events = loaded.decoded();
    if let Some(r) = redactor {
        events.iter_mut().for_each(|e| r.mask_decoded(e));
    }
    Ok(RunSource {
        path,
        events,
        redactor,
        child_errors: Default::default(),
    })
}

impl RunSource<'_> {
    /// The child-run lookup the pure views take (files beside this run's).
    /// A child file that exists but cannot be read is shown as missing by the views (their
    /// lookup has no error channel) and kept for [`RunSource::children_read`].
    pub fn lookup(&self) -> impl FnMut(RunId) -> Option<Vec<DecodedEvent>> + '_ {
        let dir = dir_of(&self.path);
        move |id| {
            let mut events = match read_child(&dir, id) {
                Ok(events) => events?,
                Err(e) => {
                    self.child_errors.borrow_mut().push(e);
                    return None;
                }
            };
            if let Some(r) = self.redactor {
                events.iter_mut().for_each(|e| r.mask_decoded(e));
            }
            Some(events)
        }
    }

    /// After a view: the first child run that exists but could not be read (the command
    /// exits 3 naming it, after printing what it could), with how many more.
    pub fn children_read(&self) -> Result<(), CliError> {
        let mut errors = self.child_errors.take();
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.swap_remove(0)),
            n => {
                let first = errors.swap_remove(0);
                Err(CliError::Invalid(format!(
                    "{first} (and {} more unreadable child runs)",
                    n - 1
                )))
            }
        }
    }

    /// The export document of the run and its child runs.
    pub fn document(
        &self,
        options: &transcript_export::ExportOptions,
    ) -> transcript_export::ExportDocument {
        transcript_export::build_document(&self.events, &mut self.lookup(), options)
    }
}

/// The clock and run-id generator of a run or import: the system ones, or
/// (`--deterministic`) a stepping manual clock and sequential ids, for
/// byte-stable output in tests and docs.
pub fn clock_and_ids(
    deterministic: bool,
) -> (
    std::sync::Arc<dyn transcript_domain::Clock>,
    std::sync::Arc<dyn transcript_domain::RunIdGenerator>,
) {
    use std::sync::Arc;
    if deterministic {
        let start = transcript_domain::Timestamp::from_unix_millis(1_780_000_000_000)
            .unwrap_or(transcript_domain::Timestamp::UNIX_EPOCH);
        (
            Arc::new(transcript_domain::ManualClock::stepping(start, 1)),
            Arc::new(transcript_domain::SequentialRunIds::new()),
        )
    } else {
        (
            Arc::new(transcript_infra::SystemClock),
            Arc::new(transcript_infra::RandomRunIds),
        )
    }
}
