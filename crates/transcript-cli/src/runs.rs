//! The runs of a storage directory: its transcripts (files named after their run ids), each
//! summarised from its first and last lines only (the last one found by reading backwards from
//! the end, so listing a storage of large transcripts stays fast), newest first, and the
//! `latest` root run every run argument accepts.

use std::path::{Path, PathBuf};

use serde::Serialize;
use transcript_domain::{DecodedEvent, EventKind, EventType, RunId, Timestamp};
use transcript_infra::{first_event, last_event};

use crate::CliError;

/// Every transcript in `storage`: files named `<run-id>.jsonl` (not `audit.jsonl`, not `.torn`).
pub fn run_files(storage: &Path) -> Vec<(RunId, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(storage) else {
        return Vec::new();
    };
    let mut files: Vec<(RunId, PathBuf)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let id = RunId::from_file_name(&p)?;
            p.is_file().then_some((id, p))
        })
        .collect();
    files.sort();
    files
}

/// How a run ended, from its last event, and for a run without `run.completed` whether its
/// runner is alive (serialized as `succeeded`, `failed`, `running`, `abandoned`, `open`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// `run.completed` without an error.
    Succeeded,
    /// `run.completed` with an error.
    Failed,
    /// No `run.completed` yet, and its runner holds the run's lease (on files the writer's
    /// lock, on NATS the lease key it renews): still running.
    Running,
    /// No `run.completed`, and no runner holds the run: its runner died or was killed.
    Abandoned,
    /// No `run.completed`, and none will come: the run mirrors a live agent-CLI session
    /// imported with `import --store` (the session may grow; the next import appends).
    Open,
}

impl RunStatus {
    /// `succeeded`, `failed`, `running`, `abandoned` or `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Running => "running",
            RunStatus::Abandoned => "abandoned",
            RunStatus::Open => "open",
        }
    }
}

/// Runs copied from NATS storage (`crate::nats_storage`): their liveness is their lease's on
/// the servers, not a lock on the copy.
static REMOTE_LIVENESS: std::sync::Mutex<std::collections::BTreeMap<PathBuf, bool>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Records that the run copied to `path` had its lease `held` on the servers it was read
/// from.
pub fn set_remote_liveness(path: &Path, held: bool) {
    REMOTE_LIVENESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(path.to_path_buf(), held);
}

/// A run without `run.completed` at `path`: [`RunStatus::Running`] while a runner holds its
/// lease (tested without taking it: `transcript_infra::writer_holds`), else
/// [`RunStatus::Abandoned`].
pub fn liveness(path: &Path) -> RunStatus {
    let remote = REMOTE_LIVENESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(path)
        .copied();
    let held = remote.unwrap_or_else(|| transcript_infra::writer_holds(path).unwrap_or(false));
    if held {
        RunStatus::Running
    } else {
        RunStatus::Abandoned
    }
}

/// One run of the list.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// The run id.
    pub run_id: RunId,
    /// The calling run, for child runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// Workflow name from `run.started`.
    pub workflow: Option<String>,
    /// How the run ended.
    pub status: RunStatus,
    /// Time of the first event.
    pub started_at: Option<Timestamp>,
    /// Milliseconds from the first to the last event.
    pub duration_ms: Option<i64>,
    /// Events in the file (the last line's seq).
    pub events: u64,
    /// The transcript file.
    pub path: PathBuf,
    /// The run it replays (`run.started`'s `replay_of`): its turns were served from that
    /// recording and are not spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
}

/// Summarises one transcript from its first and last events.
pub fn summarize(run_id: RunId, path: &Path) -> RunSummary {
    let first = first_event(path);
    let mut last = last_event(path);
    let mut status = completion(last.as_ref());
    if status.is_none() {
        let live = liveness(path);
        // Not held: the runner may have completed the run since its last line was read (it
        // writes run.completed before it releases the run), so that line is read again.
        if live == RunStatus::Abandoned {
            last = last_event(path);
            status = completion(last.as_ref());
        }
        status.get_or_insert(live);
    }
    let status = status.unwrap_or(RunStatus::Abandoned);
    RunSummary {
        run_id,
        parent_run_id: first.as_ref().and_then(|e| e.parent_run_id),
        workflow: first
            .as_ref()
            .and_then(|e| e.step())
            .map(|p| p.name.clone()),
        status,
        started_at: first.as_ref().map(|e| e.timestamp),
        duration_ms: first
            .as_ref()
            .zip(last.as_ref())
            .map(|(f, l)| l.timestamp.millis_since(f.timestamp)),
        events: last.as_ref().map_or(0, |e| e.seq),
        path: path.to_path_buf(),
        replay_of: first
            .as_ref()
            .and_then(|e| e.step())
            .and_then(|p| p.replay_of.clone()),
    }
}

/// `Succeeded` or `Failed` when `last` is `run.completed`.
fn completion(last: Option<&DecodedEvent>) -> Option<RunStatus> {
    let e = last.filter(|e| e.kind == EventKind::Known(EventType::RunCompleted))?;
    Some(if e.step().and_then(|p| p.error.as_ref()).is_some() {
        RunStatus::Failed
    } else {
        RunStatus::Succeeded
    })
}

/// Every run of `storage`, newest first (runs without events last). A run of an imported
/// session store (listed by the import index) without `run.completed` is [`RunStatus::Open`].
pub fn all_runs(storage: &Path) -> Vec<RunSummary> {
    // An unreadable index only costs the distinction open/abandoned here; `import` reports it.
    let sessions = crate::import_index::Index::load(storage)
        .map(|index| index.session_runs())
        .unwrap_or_default();
    let mut runs: Vec<RunSummary> = run_files(storage)
        .into_iter()
        .map(|(id, path)| {
            let mut run = summarize(id, &path);
            if matches!(run.status, RunStatus::Running | RunStatus::Abandoned)
                && sessions.contains(&id)
            {
                run.status = RunStatus::Open;
            }
            run
        })
        .collect();
    runs.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then(a.run_id.cmp(&b.run_id))
    });
    runs
}

/// The runs of `runs` that are replays or child runs of one (their turns are not spend).
pub fn replays(runs: &[RunSummary]) -> std::collections::HashSet<RunId> {
    transcript_domain::replays::replayed_runs(
        runs.iter()
            .map(|r| (r.run_id, r.parent_run_id, r.replay_of.is_some())),
    )
}

/// Whether the run file at `path` mirrors a session of an agent CLI's store (listed by the
/// import index of `storage`): such a run without `run.completed` is open, not incomplete
/// (the CLI may append to the session, and the next import appends to the run).
pub fn is_imported_session(storage: &Path, path: &Path) -> bool {
    let Some(id) = RunId::from_file_name(path) else {
        return false;
    };
    crate::import_index::Index::load(storage).is_ok_and(|index| index.session_runs().contains(&id))
}

/// The most recently started root run.
pub fn latest(storage: &Path) -> Result<Option<PathBuf>, CliError> {
    if !storage.is_dir() {
        return Err(CliError::NotFound {
            what: "storage directory".to_owned(),
            path: storage.to_path_buf(),
        });
    }
    Ok(all_runs(storage)
        .into_iter()
        .find(|r| r.parent_run_id.is_none() && r.started_at.is_some())
        .map(|r| r.path))
}
