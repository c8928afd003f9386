//! Resolving `<file|run-id>` arguments and loading transcripts through the
//! infra reader, keeping every diagnostic with its file and line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::run_store::{RunState, RunStore, StoredLines};
use transcript_domain::{DecodedEvent, RunId};
use transcript_infra::{MalformedLine, ReadError, ReadItem, ReadWarning, TranscriptReader};

use crate::CliError;

/// The default storage directory, relative to the working directory.
pub const DEFAULT_STORAGE: &str = "storage/transcripts";

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
    collect(reader, path)
}

/// Decodes a transcript a store read, as a stream (diagnostics name `lines.location` and the
/// line).
pub fn decode(lines: StoredLines) -> Result<Loaded, CliError> {
    let body = std::io::BufReader::new(lines.body);
    let reader = TranscriptReader::new(body).with_path(&lines.location);
    collect(reader, Path::new(&lines.location))
}

fn collect<R: std::io::BufRead>(
    reader: TranscriptReader<R>,
    path: &Path,
) -> Result<Loaded, CliError> {
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

/// A run opened for a view: its events (masked when a redactor is given), how far it got, and
/// its child runs, read from the same store and masked the same way.
pub struct RunSource<'a> {
    /// Where it was read: the file, or `nats://…#<run-id>`.
    pub path: PathBuf,
    /// Its events, masked when asked.
    pub events: Vec<DecodedEvent>,
    /// How far it got when it was read.
    pub state: RunState,
    store: Arc<dyn RunStore>,
    redactor: Option<&'a transcript_redact::Redactor>,
    /// Child runs that exist but could not be read, met by [`RunSource::lookup`].
    child_errors: std::cell::RefCell<Vec<CliError>>,
}

/// Whether a run argument names a file rather than a run of the store: an existing path (a
/// path wins), or what no run id, prefix or `latest` can be (a `/`, or a `.jsonl` name).
pub fn is_path(arg: &str) -> bool {
    !transcript_nats::StorageUrl::is_nats(arg)
        && (Path::new(arg).exists() || arg.contains('/') || arg.ends_with(".jsonl"))
}

/// Resolves `arg` in `store` (or reads the file it names, its child runs beside it), reads
/// it (reporting bad lines on stderr) and masks it.
pub fn open_run<'a>(
    arg: &str,
    store: &Arc<dyn RunStore>,
    redactor: Option<&'a transcript_redact::Redactor>,
) -> Result<RunSource<'a>, CliError> {
    let (store, loaded, state) = if is_path(arg) {
        let path = PathBuf::from(arg);
        if !path.exists() {
            return Err(CliError::NotFound {
                what: "transcript".to_owned(),
                path,
            });
        }
        let dir = crate::store::directory(&dir_of(&path));
        let loaded = load(&path)?;
        let run = loaded.events.first().map(|e| e.event.run_id);
        let state = run.map_or(RunState::Abandoned, |run| dir.state_of(run, &path));
        (Arc::new(dir) as Arc<dyn RunStore>, loaded, state)
    } else {
        // A run's location as a command printed it reads from the store it names.
        let (store, arg) = match crate::store::located(arg, store, false)? {
            Some((store, run)) => (store, run),
            None => (store.clone(), arg.to_owned()),
        };
        let id = store.resolve(&arg).map_err(crate::store::error)?;
        let lines = store
            .read(id)
            .map_err(crate::store::error)?
            .ok_or_else(|| CliError::NotFound {
                what: format!("run {id}"),
                path: store.location().into(),
            })?;
        let state = lines.state;
        (store, decode(lines)?, state)
    };
    report_read_problems(&loaded);
    let mut events = loaded.decoded();
    if let Some(r) = redactor {
        events.iter_mut().for_each(|e| r.mask_decoded(e));
    }
    Ok(RunSource {
        path: loaded.path,
        events,
        state,
        store,
        redactor,
        child_errors: Default::default(),
    })
}

impl RunSource<'_> {
    /// The child-run lookup the pure views take (from the run's store).
    /// A child run that exists but cannot be read is shown as missing by the views (their
    /// lookup has no error channel) and kept for [`RunSource::children_read`].
    pub fn lookup(&self) -> impl FnMut(RunId) -> Option<Vec<DecodedEvent>> + '_ {
        move |id| {
            let read = self
                .store
                .read(id)
                .map_err(crate::store::error)
                .and_then(|lines| lines.map(decode).transpose());
            let mut events = match read {
                Ok(loaded) => loaded?.decoded(),
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
