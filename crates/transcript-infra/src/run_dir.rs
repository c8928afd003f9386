//! The read port ([`transcript_domain::run_store::RunStore`]) on a storage directory: its
//! transcripts are the files named `<run-id>.jsonl` (not `audit.jsonl`, not a `.torn` copy,
//! not a symlink), each listed from its first and last lines only ([`crate::first_event`],
//! [`crate::last_event`]), so listing a storage of large transcripts reads a few KiB per run:
//! one open and one read for a file of at most 16 KiB (its head and tail for a larger one),
//! the files summarized on as many threads as there are CPUs, in order.
//!
//! A run without `run.completed` is [`RunState::Running`] while its writer holds the file's
//! lease ([`crate::writer_holds`]), else [`RunState::Abandoned`], or [`RunState::Open`] when the
//! composition root says it mirrors an imported agent CLI session
//! ([`DirRunStore::with_open_sessions`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use transcript_domain::run_store::{
    FollowEnd, FollowItem, RunState, RunStore, StoreReadError, StoredLines, StoredRun,
};
use transcript_domain::{DecodedEvent, EventKind, EventType, RunId};

use crate::{last_event, writer_holds};

/// Files one listing thread summarizes at least (fewer are not worth a thread).
const FILES_PER_THREAD: usize = 64;

/// A storage directory, read through the port.
#[derive(Debug, Clone)]
pub struct DirRunStore {
    dir: PathBuf,
    open_sessions: HashSet<RunId>,
}

impl DirRunStore {
    /// The runs of `dir` (a missing directory holds none).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirRunStore {
            dir: dir.into(),
            open_sessions: HashSet::new(),
        }
    }

    /// Runs that mirror an imported agent CLI session (the import index knows them): without
    /// `run.completed` they are [`RunState::Open`], not abandoned.
    pub fn with_open_sessions(mut self, runs: impl IntoIterator<Item = RunId>) -> Self {
        self.open_sessions.extend(runs);
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every transcript of the directory, sorted by run id.
    pub fn run_files(&self) -> Vec<(RunId, PathBuf)> {
        run_files(&self.dir)
    }

    /// The transcript file of `run` (which may not exist).
    pub fn path_of(&self, run: RunId) -> PathBuf {
        self.dir.join(run.file_name())
    }

    /// How far the run in `path` got, from its last line and its lease.
    pub fn state_of(&self, run: RunId, path: &Path) -> RunState {
        state(run, path, last_event(path), &self.open_sessions).0
    }

    /// The list entry of the run in `path`.
    pub fn summarize(&self, run: RunId, path: &Path) -> StoredRun {
        self.summarize_with(run, path, &mut Vec::new())
    }

    /// [`DirRunStore::summarize`] reading through `buf` (reused from file to file).
    fn summarize_with(&self, run: RunId, path: &Path, buf: &mut Vec<u8>) -> StoredRun {
        let (first, last) = crate::ends::ends(path, buf);
        let (state, last) = state(run, path, last, &self.open_sessions);
        let started = first.as_ref().and_then(DecodedEvent::step);
        StoredRun {
            run_id: run,
            parent_run_id: first.as_ref().and_then(|e| e.parent_run_id),
            workflow: started.map(|p| p.name.clone()),
            state,
            started_at: first.as_ref().map(|e| e.timestamp),
            ended_at: last.as_ref().map(|e| e.timestamp),
            events: last.as_ref().map_or(0, |e| e.seq),
            replay_of: started.and_then(|p| p.replay_of.clone()),
            forked_at: started.and_then(|p| p.forked_at.clone()),
            location: path.display().to_string(),
        }
    }

    /// The list entries of `files`, in their order: on as many threads as there are CPUs
    /// (each a contiguous share, with one read buffer), on this one when there are few files
    /// or a thread cannot be started.
    fn summarize_all(&self, files: &[(RunId, PathBuf)]) -> Vec<StoredRun> {
        let one = |part: &[(RunId, PathBuf)]| {
            let mut buf = Vec::with_capacity(2 * crate::ends::END_READ);
            part.iter()
                .map(|(id, path)| self.summarize_with(*id, path, &mut buf))
                .collect::<Vec<_>>()
        };
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let threads = cpus.min(files.len() / FILES_PER_THREAD).max(1);
        if threads == 1 {
            return one(files);
        }
        let parts: Vec<&[(RunId, PathBuf)]> = files.chunks(files.len().div_ceil(threads)).collect();
        std::thread::scope(|scope| {
            // The first share is this thread's; the others are spawned, or done here when a
            // thread cannot be started.
            let spawned: Vec<_> = parts[1..]
                .iter()
                .map(|part| {
                    let thread = std::thread::Builder::new().name("transcript-list".to_owned());
                    (*part, thread.spawn_scoped(scope, || one(part)).ok())
                })
                .collect();
            let mut runs = one(parts[0]);
            for (part, handle) in spawned {
                match handle.map(std::thread::ScopedJoinHandle::join) {
                    Some(Ok(done)) => runs.extend(done),
                    // Not started, or ended by a panic (a bug): this thread does its share.
                    _ => runs.extend(one(part)),
                }
            }
            runs
        })
    }
}

/// Every transcript in `dir`: regular files named `<run-id>.jsonl`, sorted by run id.
pub fn run_files(dir: &Path) -> Vec<(RunId, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(RunId, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            let id = RunId::from_file_name(&p)?;
            // The entry's type, not following a symlink (`lstat` only where the directory
            // does not say it).
            let regular = e.file_type().is_ok_and(|t| t.is_file());
            regular.then_some((id, p))
        })
        .collect();
    files.sort();
    files
}

/// `Succeeded` or `Failed` when `last` is `run.completed`.
fn completion(last: Option<&DecodedEvent>) -> Option<RunState> {
    let e = last.filter(|e| e.kind == EventKind::Known(EventType::RunCompleted))?;
    Some(if e.step().and_then(|p| p.error.as_ref()).is_some() {
        RunState::Failed
    } else {
        RunState::Succeeded
    })
}

/// The run's state and the last event it was decided on.
fn state(
    run: RunId,
    path: &Path,
    last: Option<DecodedEvent>,
    open: &HashSet<RunId>,
) -> (RunState, Option<DecodedEvent>) {
    if let Some(done) = completion(last.as_ref()) {
        return (done, last);
    }
    if writer_holds(path).unwrap_or(false) {
        return (RunState::Running, last);
    }
    // Not held: the runner may have completed the run since its last line was read (it
    // writes run.completed before it releases the run), so that line is read again.
    let last = last_event(path);
    let state = completion(last.as_ref()).unwrap_or(if open.contains(&run) {
        RunState::Open
    } else {
        RunState::Abandoned
    });
    (state, last)
}

impl RunStore for DirRunStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn runs(&self) -> Result<Vec<StoredRun>, StoreReadError> {
        if !self.dir.is_dir() {
            return Err(StoreReadError::NotFound {
                what: "storage directory".to_owned(),
                location: self.location(),
            });
        }
        Ok(self.summarize_all(&self.run_files()))
    }

    fn resolve(&self, arg: &str) -> Result<RunId, StoreReadError> {
        if let Ok(id) = RunId::parse(arg) {
            return Ok(id);
        }
        if !self.dir.is_dir() {
            return Err(StoreReadError::NotFound {
                what: "storage directory".to_owned(),
                location: self.location(),
            });
        }
        // A prefix needs only the file names; `latest` the first lines.
        let runs: Vec<StoredRun> = if arg == "latest" {
            self.runs()?
        } else {
            self.run_files()
                .into_iter()
                .map(|(id, path)| StoredRun {
                    run_id: id,
                    parent_run_id: None,
                    workflow: None,
                    state: RunState::Abandoned,
                    started_at: None,
                    ended_at: None,
                    events: 0,
                    replay_of: None,
                    forked_at: None,
                    location: path.display().to_string(),
                })
                .collect()
        };
        transcript_domain::run_store::resolve_among(&runs, arg, &self.location())
    }

    fn contains(&self, run: RunId) -> Result<bool, StoreReadError> {
        Ok(std::fs::symlink_metadata(self.path_of(run)).is_ok())
    }

    fn follow(
        &self,
        run: RunId,
        watch_lease: bool,
        each: &mut dyn FnMut(FollowItem<'_>) -> std::ops::ControlFlow<()>,
    ) -> Result<FollowEnd, StoreReadError> {
        crate::follow_file(&self.path_of(run), watch_lease, each)
    }

    fn read(&self, run: RunId) -> Result<Option<StoredLines>, StoreReadError> {
        let path = self.path_of(run);
        let unavailable = |e: &dyn std::fmt::Display| StoreReadError::Unavailable {
            location: path.display().to_string(),
            message: e.to_string(),
        };
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unavailable(&e)),
            Ok(_) => {}
        }
        let file = crate::fs::open_read(&path).map_err(|e| unavailable(&e))?;
        Ok(Some(StoredLines {
            location: path.display().to_string(),
            state: self.state_of(run, &path),
            body: Box::new(file),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "0b6e7c8e-3f4a-4b1c-9d2e-1a2b3c4d5e6f";

    fn line(seq: u64, kind: &str, payload: &str) -> String {
        format!(
            "{{\"seq\":{seq},\"run_id\":\"{RUN}\",\"type\":\"{kind}\",\"path\":\"\",\
             \"iteration\":0,\"timestamp\":\"2026-06-08T08:14:4{seq}.000Z\",\"payload\":{payload}}}\n"
        )
    }

    #[test]
    fn a_directory_lists_resolves_and_reads_its_runs_through_the_port() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let started = line(1, "run.started", r#"{"name":"w","kind":"workflow"}"#);
        let text = started.clone() + &line(2, "run.completed", r#"{"name":"w","kind":"workflow"}"#);
        std::fs::write(dir.path().join(format!("{RUN}.jsonl")), &text)
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("audit.jsonl"), "{}\n").unwrap_or_else(|e| panic!("{e}"));
        let store = DirRunStore::new(dir.path());
        let runs = store.runs().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].state, RunState::Succeeded);
        assert_eq!(
            (runs[0].events, runs[0].workflow.as_deref()),
            (2, Some("w"))
        );
        let id = store.resolve("0b6e").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.resolve("latest").ok(), Some(id));
        let read = store.read(id).unwrap_or_else(|e| panic!("{e}"));
        let read = read.map(|r| (r.state, r.into_bytes().unwrap_or_else(|e| panic!("{e}"))));
        assert_eq!(read, Some((RunState::Succeeded, text.into_bytes())));

        // Without run.completed and without a writer: abandoned, or open for a session.
        std::fs::write(dir.path().join(format!("{RUN}.jsonl")), &started)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.state_of(id, &store.path_of(id)), RunState::Abandoned);
        let sessions = DirRunStore::new(dir.path()).with_open_sessions([id]);
        assert_eq!(sessions.runs().map(|r| r[0].state), Ok(RunState::Open));

        let other =
            RunId::parse("1b6e7c8e-3f4a-4b1c-9d2e-1a2b3c4d5e6f").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(store.read(other), Ok(None)));
        assert!(matches!(
            DirRunStore::new(dir.path().join("none")).resolve("latest"),
            Err(StoreReadError::NotFound { .. })
        ));
    }

    #[test]
    fn a_listing_on_many_threads_is_the_one_file_by_file_in_run_id_order() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for n in 0..300u32 {
            let id = format!("{n:08x}-3f4a-4b1c-9d2e-1a2b3c4d5e6f");
            let mut text = line(1, "run.started", r#"{"name":"w","kind":"workflow"}"#)
                .replace(RUN, &id)
                .replace("\"w\"", &format!("\"w{}\"", n % 7));
            if n % 3 != 0 {
                text += &line(2, "run.completed", r#"{"name":"w","kind":"workflow"}"#)
                    .replace(RUN, &id);
            }
            if n % 5 == 0 {
                text += &"x".repeat(n as usize * 211);
            }
            std::fs::write(dir.path().join(format!("{id}.jsonl")), text)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let store = DirRunStore::new(dir.path());
        let one_by_one: Vec<StoredRun> = store
            .run_files()
            .into_iter()
            .map(|(id, path)| store.summarize(id, &path))
            .collect();
        assert_eq!(one_by_one.len(), 300);
        assert_eq!(store.runs(), Ok(one_by_one));
    }
}
