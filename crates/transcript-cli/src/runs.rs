//! The runs of a store as `list` shows them ([`RunSummary`], from the read port's
//! [`StoredRun`]), newest first, and the liveness of a transcript file named by its path.

use std::path::{Path, PathBuf};

use serde::Serialize;
use transcript_domain::RunId;
use transcript_domain::run_store::{RunState, RunStore, StoredRun};

use crate::CliError;

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
        RunState::from(self).as_str()
    }
}

impl From<RunState> for RunStatus {
    fn from(state: RunState) -> Self {
        match state {
            RunState::Succeeded => RunStatus::Succeeded,
            RunState::Failed => RunStatus::Failed,
            RunState::Running => RunStatus::Running,
            RunState::Abandoned => RunStatus::Abandoned,
            RunState::Open => RunStatus::Open,
        }
    }
}

impl From<RunStatus> for RunState {
    fn from(status: RunStatus) -> Self {
        match status {
            RunStatus::Succeeded => RunState::Succeeded,
            RunStatus::Failed => RunState::Failed,
            RunStatus::Running => RunState::Running,
            RunStatus::Abandoned => RunState::Abandoned,
            RunStatus::Open => RunState::Open,
        }
    }
}

/// A run without `run.completed` at `path`: [`RunStatus::Running`] while a runner holds its
/// lease (tested without taking it: `transcript_infra::writer_holds`), else
/// [`RunStatus::Abandoned`].
pub fn liveness(path: &Path) -> RunStatus {
    if transcript_infra::writer_holds(path).unwrap_or(false) {
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
    pub started_at: Option<transcript_domain::Timestamp>,
    /// Milliseconds from the first to the last event; for a running run, from the first event
    /// to now (its last event may be long ago: a step still working).
    pub duration_ms: Option<i64>,
    /// Events in the file (the last line's seq).
    pub events: u64,
    /// Where the run is: its file, or `nats://…#<run-id>`.
    pub path: PathBuf,
    /// The run it replays (`run.started`'s `replay_of`): its turns were served from that
    /// recording and are not spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// For a trial of that recording, the step it was forked at (`run.started`'s
    /// `forked_at`): its live part, from that step on, is spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<String>,
}

impl From<StoredRun> for RunSummary {
    fn from(r: StoredRun) -> Self {
        RunSummary {
            run_id: r.run_id,
            parent_run_id: r.parent_run_id,
            workflow: r.workflow,
            status: r.state.into(),
            started_at: r.started_at,
            duration_ms: match r.state {
                RunState::Running => r.started_at.map(|s| {
                    use transcript_domain::Clock as _;
                    transcript_infra::SystemClock.now().millis_since(s)
                }),
                _ => r.started_at.zip(r.ended_at).map(|(s, e)| e.millis_since(s)),
            },
            events: r.events,
            path: PathBuf::from(r.location),
            replay_of: r.replay_of,
            forked_at: r.forked_at,
        }
    }
}

/// Every run of `store`, newest first (runs without events last).
pub fn all_runs(store: &dyn RunStore) -> Result<Vec<RunSummary>, CliError> {
    let mut runs: Vec<RunSummary> = store
        .runs()
        .map_err(crate::store::error)?
        .into_iter()
        .map(RunSummary::from)
        .collect();
    runs.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then(a.run_id.cmp(&b.run_id))
    });
    Ok(runs)
}
