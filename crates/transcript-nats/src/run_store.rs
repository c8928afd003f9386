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

use transcript_domain::run_store::{RunState, RunStore, StoreReadError, StoredLines, StoredRun};
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
                    let _ = ready.send(NatsStore::connect_existing(&url, options).await);
                    // Jobs one after the other; the client's tasks run meanwhile.
                    while let Some(job) = queue.recv().await {
                        job.await;
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
        let entries = self
            .call(|store| async move { store.runs().await })?
            .map_err(|e| self.unavailable(&e))?;
        Ok(entries.into_iter().map(|e| stored_run(&url, e)).collect())
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
                    completion(last.as_deref()).unwrap_or(RunState::Abandoned)
                });
            }
            Ok(Some((lines.concat(), state.unwrap_or(RunState::Abandoned))))
        })?;
        let Some((bytes, state)) = answer.map_err(|e| self.unavailable(&e))? else {
            return Ok(None);
        };
        Ok(Some(StoredLines {
            location: format!("{}#{run}", self.location()),
            bytes,
            state,
        }))
    }
}
