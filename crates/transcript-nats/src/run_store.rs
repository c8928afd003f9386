//! The read port ([`transcript_domain::run_store::RunStore`]) on the fleet's JetStream store:
//! runs listed from the runs index ([`NatsStore::runs`]: a running run's counts come from its
//! entry, so listing reads no stream message for it), a run's lines read from its subject,
//! byte-identical to the file recorder's, with nothing copied to disk.
//!
//! The NATS client is asynchronous and the port is not: a [`NatsRunStore`] owns a thread
//! running a single-threaded tokio runtime on which it connected, and each call hands that
//! thread a job and waits for its answer. So the port can be called from any thread, inside
//! another runtime or not, and the connection's own tasks keep running between calls.
//! Dropping the store ends the thread.

use std::future::Future;
use std::pin::Pin;

use std::ops::ControlFlow;
use std::sync::Arc;

use bytes::Bytes;
use transcript_domain::run_store::{
    FollowEnd, FollowItem, RunState, RunStore, StoreReadError, StoredLines, StoredRun,
};
use transcript_domain::{EventKind, EventType, RunId, decode_line};

use crate::{IndexStatus, NatsError, NatsStore, RunEntry, StorageUrl, StreamOptions};

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A JetStream store, read through the port.
#[derive(Debug)]
pub struct NatsRunStore {
    store: NatsStore,
    jobs: Option<tokio::sync::mpsc::UnboundedSender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NatsRunStore {
    /// Connects to `url`'s existing store ([`NatsStore::connect_existing`]: nothing is
    /// created) on a thread of its own.
    pub fn connect(url: &StorageUrl, options: StreamOptions) -> Result<Self, NatsError> {
        Self::start(url, options, None)
    }

    /// [`Self::connect`] for a follower: on servers without the store yet, calls `waiting`
    /// once and waits for a writer to create it ([`NatsStore::connect_existing_waiting`]).
    pub fn connect_waiting(
        url: &StorageUrl,
        options: StreamOptions,
        waiting: impl FnOnce() + Send + 'static,
    ) -> Result<Self, NatsError> {
        Self::start(url, options, Some(Box::new(waiting)))
    }

    fn start(
        url: &StorageUrl,
        options: StreamOptions,
        waiting: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<Self, NatsError> {
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<Job>();
        let (ready, connected) = std::sync::mpsc::channel();
        let url = url.clone();
        let io = |e: std::io::Error| NatsError::Io {
            path: "the NATS reader's thread".to_owned(),
            message: e.to_string(),
        };
        let thread = std::thread::Builder::new()
            .name("transcript-nats-reader".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(io(e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let connected = match waiting {
                        Some(waiting) => {
                            NatsStore::connect_existing_waiting(&url, options, waiting).await
                        }
                        None => NatsStore::connect_existing(&url, options).await,
                    };
                    let _ = ready.send(connected);
                    // Each job a task of its own (a follow may last), the client's tasks
                    // beside them.
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job);
                    }
                });
            })
            .map_err(io)?;
        let store = connected.recv().map_err(|_| NatsError::Io {
            path: "the NATS reader's thread".to_owned(),
            message: "it ended before connecting".to_owned(),
        })??;
        Ok(NatsRunStore {
            store,
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// The store it reads.
    pub fn store(&self) -> &NatsStore {
        &self.store
    }

    /// Runs `f` on the reader's runtime and waits for its answer.
    fn call<T, F>(&self, f: impl FnOnce(NatsStore) -> F) -> Result<T, StoreReadError>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let (answer, answered) = std::sync::mpsc::channel();
        let job = f(self.store.clone());
        let sent = self.jobs.as_ref().is_some_and(|jobs| {
            jobs.send(Box::pin(async move {
                let _ = answer.send(job.await);
            }))
            .is_ok()
        });
        let gone = || StoreReadError::Unavailable {
            location: self.location(),
            message: "the NATS reader's thread has ended".to_owned(),
        };
        if !sent {
            return Err(gone());
        }
        answered.recv().map_err(|_| gone())
    }

    fn unavailable(&self, e: &NatsError) -> StoreReadError {
        StoreReadError::Unavailable {
            location: self.location(),
            message: e.to_string(),
        }
    }
}

impl Drop for NatsRunStore {
    fn drop(&mut self) {
        // Closing the queue ends the thread's loop; its runtime is dropped on that thread.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the follower hands the caller's thread.
enum Followed {
    Line(Bytes),
    Idle,
    End(Result<FollowEnd, NatsError>),
}

/// Follows `run` (replay, then live), sending its lines, and an idle tick whenever none came
/// for a while. Watching the lease, a run seen lapsed (every stored line delivered) for a
/// whole renewal period is abandoned: a live runner cut off from the servers (a restart) has
/// renewed by then.
async fn follow_run(
    store: &NatsStore,
    run: RunId,
    watch_lease: bool,
    lines: &std::sync::mpsc::SyncSender<Followed>,
) -> Result<FollowEnd, NatsError> {
    let mut follower = store.follow(run).await?;
    let lease = store.options().lease;
    let every = (lease / 3).clamp(
        std::time::Duration::from_millis(200),
        std::time::Duration::from_secs(2),
    );
    let grace = lease / 3 + std::time::Duration::from_secs(1);
    let (mut shown, mut unheld_since) = (0u64, None);
    loop {
        tokio::select! {
            line = follower.next_line() => match line {
                None => return Ok(FollowEnd::Ended),
                Some(line) => {
                    shown += 1;
                    if lines.send(Followed::Line(line?)).is_err() {
                        return Ok(FollowEnd::Stopped);
                    }
                }
            },
            () = tokio::time::sleep(every) => {
                if lines.send(Followed::Idle).is_err() {
                    return Ok(FollowEnd::Stopped);
                }
                if !watch_lease || shown == 0 {
                    continue;
                }
                if !store.abandoned_after(run, follower.position()).await {
                    unheld_since = None;
                    continue;
                }
                let since = *unheld_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= grace {
                    return Ok(FollowEnd::Abandoned);
                }
            }
        }
    }
}

/// A list entry from a runs-index entry.
pub fn stored_run(url: &StorageUrl, e: RunEntry) -> StoredRun {
    StoredRun {
        location: format!("{url}#{}", e.run_id),
        run_id: e.run_id,
        parent_run_id: e.parent_run_id,
        workflow: e.workflow,
        state: match e.status {
            IndexStatus::Succeeded => RunState::Succeeded,
            IndexStatus::Failed => RunState::Failed,
            IndexStatus::Running => RunState::Running,
            IndexStatus::Abandoned => RunState::Abandoned,
        },
        started_at: e.started_at,
        ended_at: e.ended_at,
        events: e.events,
        replay_of: e.replay_of,
        forked_at: e.forked_at,
    }
}

/// `Succeeded` or `Failed` when `line` is a `run.completed`.
fn completion(line: Option<&[u8]>) -> Option<RunState> {
    let event = decode_line(line?).ok()?.event;
    if event.kind != EventKind::Known(EventType::RunCompleted) {
        return None;
    }
    Some(if event.step().and_then(|p| p.error.as_ref()).is_some() {
        RunState::Failed
    } else {
        RunState::Succeeded
    })
}

impl RunStore for NatsRunStore {
    fn location(&self) -> String {
        self.store.url().to_string()
    }

    fn runs(&self) -> Result<Vec<StoredRun>, StoreReadError> {
        let url = self.store.url().clone();
        let (entries, open) = self
            .call(|store| async move {
                let open = crate::staging::imported_open_runs(&store).await?;
                Ok::<_, NatsError>((store.runs().await?, open))
            })?
            .map_err(|e| self.unavailable(&e))?;
        Ok(entries
            .into_iter()
            .map(|e| stored_run(&url, e))
            .map(|mut r| {
                if r.state == RunState::Abandoned && open.contains(&r.run_id) {
                    r.state = RunState::Open;
                }
                r
            })
            .collect())
    }

    fn contains(&self, run: RunId) -> Result<bool, StoreReadError> {
        self.call(move |store| async move { store.last_stream_seq(run).await })?
            .map(|last| last.is_some())
            .map_err(|e| self.unavailable(&e))
    }

    fn follow(
        &self,
        run: RunId,
        watch_lease: bool,
        each: &mut dyn FnMut(FollowItem<'_>) -> ControlFlow<()>,
    ) -> Result<FollowEnd, StoreReadError> {
        // The follower runs on the reader's thread and hands its lines over a bounded
        // channel; the caller's `each` runs here. Stopping wakes the follower, which ends.
        let (lines, received) = std::sync::mpsc::sync_channel::<Followed>(256);
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopped = stop.clone();
        let store = self.store.clone();
        let job: Job = Box::pin(async move {
            let end = tokio::select! {
                end = follow_run(&store, run, watch_lease, &lines) => end,
                () = stopped.notified() => Ok(FollowEnd::Stopped),
            };
            let _ = lines.send(Followed::End(end));
        });
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        let gone = || StoreReadError::Unavailable {
            location: self.location(),
            message: "the NATS reader's thread has ended".to_owned(),
        };
        if !sent {
            return Err(gone());
        }
        loop {
            let flow = match received.recv().map_err(|_| gone())? {
                Followed::Line(line) => {
                    let line = line.strip_suffix(b"\n").unwrap_or(&line);
                    each(FollowItem::Line(line))
                }
                Followed::Idle => each(FollowItem::Idle),
                Followed::End(end) => return end.map_err(|e| self.unavailable(&e)),
            };
            if flow.is_break() {
                stop.notify_one();
                return Ok(FollowEnd::Stopped);
            }
        }
    }

    fn read(&self, run: RunId) -> Result<Option<StoredLines>, StoreReadError> {
        let answer = self.call(move |store| async move {
            let lines = match store.run_lines(run).await {
                Ok(lines) => lines,
                Err(NatsError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let mut state = completion(lines.last().map(|l| l.as_ref()));
            if state.is_none() {
                // Held: running. Lapsed: the runner records run.completed before it releases
                // the lease, so the stream is looked at once more.
                state = Some(if store.lease_held(run).await? {
                    RunState::Running
                } else {
                    let last = store.last_line(run).await?;
                    let open = crate::staging::imported_open_runs(&store).await?;
                    completion(last.as_deref()).unwrap_or(if open.contains(&run) {
                        RunState::Open
                    } else {
                        RunState::Abandoned
                    })
                });
            }
            Ok(Some((lines.concat(), state.unwrap_or(RunState::Abandoned))))
        })?;
        let Some((bytes, state)) = answer.map_err(|e| self.unavailable(&e))? else {
            return Ok(None);
        };
        Ok(Some(StoredLines {
            location: format!("{}#{run}", self.location()),
            body: Box::new(std::io::Cursor::new(bytes)),
            state,
        }))
    }
}
