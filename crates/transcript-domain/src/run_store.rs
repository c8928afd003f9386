//! The read port: the runs a storage holds, for every command that reads them.
//!
//! A [`RunStore`] lists runs (what `transcript list` shows), resolves a run argument (a full
//! id, a unique prefix, `latest`) and reads a run's transcript as recorded, byte for byte; a
//! child run is read by its id from the same store. Two adapters implement it: a storage
//! directory (`transcript_infra::DirRunStore`) and the fleet's JetStream store
//! (`transcript_nats::NatsRunStore`), so a view is written once and reads either without
//! copying. [`RunStore::follow`] follows a run as it grows (`tail -f`): its lines as they are
//! stored, until the caller stops or the run is abandoned.
//!
//! The port is synchronous: the views that use it are. An adapter whose client is
//! asynchronous runs it on a runtime of its own and waits for the answer, so the port can be
//! called from any thread, inside an async runtime or not.

use std::collections::BTreeSet;

use crate::ids::{RunId, Seq};
use crate::timestamp::Timestamp;

/// How far a run got, as a store can tell without reading all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// `run.completed` without an error.
    Succeeded,
    /// `run.completed` with an error.
    Failed,
    /// No `run.completed` yet, and a runner holds the run's lease: still recording.
    Running,
    /// No `run.completed`, and no runner holds the run: its runner died or was killed.
    Abandoned,
    /// No `run.completed`, and none will come: the run mirrors an agent CLI's session,
    /// imported, which may still grow (the next import appends).
    Open,
}

impl RunState {
    /// `succeeded`, `failed`, `running`, `abandoned` or `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Running => "running",
            RunState::Abandoned => "abandoned",
            RunState::Open => "open",
        }
    }

    /// Whether the run has its `run.completed`.
    pub fn is_complete(self) -> bool {
        matches!(self, RunState::Succeeded | RunState::Failed)
    }
}

/// One run as a store lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRun {
    /// The run.
    pub run_id: RunId,
    /// The calling run, for a child run.
    pub parent_run_id: Option<RunId>,
    /// The workflow name from `run.started`.
    pub workflow: Option<String>,
    /// How far it got.
    pub state: RunState,
    /// `run.started`'s time.
    pub started_at: Option<Timestamp>,
    /// The time of the last event the store has seen.
    pub ended_at: Option<Timestamp>,
    /// Events recorded (the last seq).
    pub events: Seq,
    /// The run it replays (`run.started`'s `replay_of`).
    pub replay_of: Option<String>,
    /// For a trial, the step it was forked at (`run.started`'s `forked_at`, decision 22).
    pub forked_at: Option<String>,
    /// Where it is: a file path, or `nats://…#<run-id>`.
    pub location: String,
}

/// A run's transcript as recorded.
pub struct StoredLines {
    /// Where it was read: a file path, or `nats://…#<run-id>` (diagnostics name it with the
    /// line number).
    pub location: String,
    /// The JSONL bytes, every line as written, to be read as a stream: a file's are not held
    /// in memory, so a transcript with a line of gigabytes costs a reader its line cap only.
    pub body: Box<dyn std::io::Read + Send>,
    /// How far the run got when it was read.
    pub state: RunState,
}

impl std::fmt::Debug for StoredLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredLines")
            .field("location", &self.location)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl StoredLines {
    /// The whole body in memory.
    pub fn into_bytes(mut self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.body.read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// Why a store could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreReadError {
    /// No run (or no store) answers to what was asked.
    #[error("{location}: no {what}")]
    NotFound {
        /// What was looked for, e.g. `run 0b6e…` or `run with id prefix "0b6e"`.
        what: String,
        /// The store.
        location: String,
    },
    /// A run id prefix matches more than one run.
    #[error("run id prefix {prefix:?} is ambiguous: {count} runs match ({})", shown(matches, *count))]
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// How many runs match.
        count: usize,
        /// The first few, sorted.
        matches: Vec<RunId>,
    },
    /// The store could not be read (I/O, the servers, a deleted message).
    #[error("{location}: {message}")]
    Unavailable {
        /// The store or run.
        location: String,
        /// The cause.
        message: String,
    },
}

fn shown(matches: &[RunId], count: usize) -> String {
    let ids: Vec<String> = matches.iter().map(ToString::to_string).collect();
    let more = if count > ids.len() { ", …" } else { "" };
    format!("{}{more}", ids.join(", "))
}

/// What a follower hands its caller ([`RunStore::follow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowItem<'a> {
    /// One complete line of the run, in order, without its `\n`.
    Line(&'a [u8]),
    /// A line longer than the store's line cap, skipped (not buffered): its 1-based number
    /// and length.
    Skipped {
        /// The line's number.
        line: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// Nothing new for a moment (the run has not appeared yet, or has no new line): the
    /// caller may stop here (its reader went away, a deadline).
    Idle,
}

/// How a follow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowEnd {
    /// The caller stopped (it saw what it waited for).
    Stopped,
    /// No runner holds the run any more, and every line it stored was delivered (only when
    /// the follow watches the lease).
    Abandoned,
    /// The store ended the follow (a stream that cannot continue).
    Ended,
}

/// The runs of a storage, read-only.
pub trait RunStore: Send + Sync {
    /// Where the store is (a directory, a NATS URL), for messages.
    fn location(&self) -> String;

    /// Every run the store holds, in no promised order.
    fn runs(&self) -> Result<Vec<StoredRun>, StoreReadError>;

    /// The run `arg` names: a full run id, a unique prefix of one (4 to 35 hex digits and
    /// hyphens), or `latest` (the most recently started root run). The default reads
    /// [`RunStore::runs`] and applies [`resolve_among`].
    fn resolve(&self, arg: &str) -> Result<RunId, StoreReadError> {
        if let Ok(id) = RunId::parse(arg) {
            return Ok(id);
        }
        resolve_among(&self.runs()?, arg, &self.location())
    }

    /// The run's transcript as recorded; `Ok(None)` when the store has no such run.
    fn read(&self, run: RunId) -> Result<Option<StoredLines>, StoreReadError>;

    /// Whether the store holds `run` (it has recorded at least one byte of it). The default
    /// reads it.
    fn contains(&self, run: RunId) -> Result<bool, StoreReadError> {
        Ok(self.read(run)?.is_some())
    }

    /// Follows `run` from its first line: hands `each` every line as it is stored (waiting for
    /// the run to appear, then for new lines, with [`FollowItem::Idle`] while waiting) until
    /// `each` breaks ([`FollowEnd::Stopped`]). With `watch_lease`, a run whose runner no longer
    /// holds it ends the follow once everything it stored was delivered
    /// ([`FollowEnd::Abandoned`]): the runner records `run.completed` before it releases the
    /// run, so a completed run is never called abandoned.
    fn follow(
        &self,
        run: RunId,
        watch_lease: bool,
        each: &mut dyn FnMut(FollowItem<'_>) -> std::ops::ControlFlow<()>,
    ) -> Result<FollowEnd, StoreReadError>;
}

/// Whether `arg` can be the start of a run id: 4 to 35 hex digits and hyphens.
pub fn is_id_prefix(arg: &str) -> bool {
    (4..36).contains(&arg.len()) && arg.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// Resolves `latest` or a run id prefix among `runs` (see [`RunStore::resolve`]).
pub fn resolve_among(
    runs: &[StoredRun],
    arg: &str,
    location: &str,
) -> Result<RunId, StoreReadError> {
    let not_found = |what: String| StoreReadError::NotFound {
        what,
        location: location.to_owned(),
    };
    if arg == "latest" {
        return runs
            .iter()
            .filter(|r| r.parent_run_id.is_none() && r.started_at.is_some())
            .max_by_key(|r| (r.started_at, std::cmp::Reverse(r.run_id)))
            .map(|r| r.run_id)
            .ok_or_else(|| not_found("run (for `latest`)".to_owned()));
    }
    if !is_id_prefix(arg) {
        return Err(not_found(format!("run {arg:?}")));
    }
    let prefix = arg.to_ascii_lowercase();
    let matches: BTreeSet<RunId> = runs
        .iter()
        .map(|r| r.run_id)
        .filter(|id| id.to_string().starts_with(&prefix))
        .collect();
    let mut matches: Vec<RunId> = matches.into_iter().collect();
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(not_found(format!("run with id prefix {prefix:?}"))),
        count => {
            matches.sort_by_key(ToString::to_string);
            matches.truncate(5);
            Err(StoreReadError::Ambiguous {
                prefix,
                count,
                matches,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: u8, parent: Option<u8>, started: Option<i64>) -> StoredRun {
        let id = |n: u8| {
            RunId::parse(&format!("{n:02x}000000-0000-4000-8000-000000000000"))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        StoredRun {
            run_id: id(n),
            parent_run_id: parent.map(id),
            workflow: None,
            state: RunState::Succeeded,
            started_at: started.and_then(Timestamp::from_unix_millis),
            ended_at: None,
            events: 1,
            replay_of: None,
            forked_at: None,
            location: String::new(),
        }
    }

    #[test]
    fn latest_is_the_newest_root_and_prefixes_are_unique_or_refused() {
        let runs = [
            run(0xab, None, Some(1_000)),
            run(0xac, None, Some(3_000)),
            run(0xad, Some(0xab), Some(9_000)),
            run(0xae, None, None),
        ];
        let got = resolve_among(&runs, "latest", "s").map(|id| id.to_string());
        assert!(got.is_ok_and(|id| id.starts_with("ac")));
        let got = resolve_among(&runs, "AB00", "s").map(|id| id.to_string());
        assert!(got.is_ok_and(|id| id.starts_with("ab")));
        let err = resolve_among(&runs, "a", "s").map_err(|e| e.to_string());
        assert_eq!(err, Err("s: no run \"a\"".to_owned()));
        let none = resolve_among(&runs, "ffff", "s").map_err(|e| e.to_string());
        assert_eq!(none, Err("s: no run with id prefix \"ffff\"".to_owned()));
        let all: Vec<StoredRun> = (0..8).map(|n| run(0xa0 + n, None, None)).collect();
        let err = resolve_among(&all, "a", "s");
        assert!(matches!(err, Err(StoreReadError::NotFound { .. })));
        let four: Vec<StoredRun> = (0..8)
            .map(|n| {
                let mut r = run(0xa0, None, None);
                r.run_id = RunId::parse(&format!("a0000000-0000-4000-8000-00000000000{n}"))
                    .unwrap_or_else(|e| panic!("{e}"));
                r
            })
            .collect();
        match resolve_among(&four, "a000", "s") {
            Err(e @ StoreReadError::Ambiguous { count: 8, .. }) => {
                assert!(e.to_string().ends_with(", …)"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(resolve_among(&[], "latest", "s").is_err());
    }
}
