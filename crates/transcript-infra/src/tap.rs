//! A live tap on every run a recorder factory opens.
//!
//! With `ExecutionService::builder().recorder_factory(...)` the recorders are created inside
//! `run()`: the root run and each `call_workflow` child run. [`TapFactory`] wraps that factory
//! and, for every run it opens, subscribes from seq 1 and hands the subscription to your
//! consumer (a progress view, a live exporter, a test). Recording never waits for a tap: a
//! subscription that falls behind drops and counts (`Subscription::dropped`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), transcript_infra::TapError> {
//! use std::sync::Arc;
//! use transcript_infra::{JsonlRecorderFactory, TapFactory};
//!
//! let tap = Arc::new(TapFactory::new(
//!     Arc::new(JsonlRecorderFactory::new("storage/transcripts")),
//!     Box::new(|mut subscription| {
//!         Some(tokio::spawn(async move {
//!             while let Some(event) = subscription.next().await {
//!                 println!("{} #{} {}", event.run_id, event.seq, event.event_type().as_str());
//!             }
//!         }))
//!     }),
//! ));
//! // Pass `tap.clone()` as the service's recorder factory, run, then:
//! tap.drain("the live view").await?;
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::task::JoinHandle;
use transcript_domain::{RecordError, Recorder, RecorderFactory, RunId, Subscription};

/// Starts the consumer of one run's subscription (from seq 1); `None` when the tap takes no
/// more runs (the subscription is then dropped, recording goes on).
pub type StartTap = dyn Fn(Box<dyn Subscription>) -> Option<JoinHandle<()>> + Send + Sync;

/// A consumer task of a tap that did not end normally.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TapError {
    /// The consumer panicked.
    #[error("{what} panicked: {message}{}", more_text(*more))]
    Panicked {
        /// What the consumer is (the caller's words).
        what: String,
        /// The panic message.
        message: String,
        /// How many other consumers failed too.
        more: usize,
    },
    /// The consumer was cancelled (aborted, or its runtime shut down).
    #[error("{what} was cancelled: {message}{}", more_text(*more))]
    Cancelled {
        /// What the consumer is.
        what: String,
        /// The join error.
        message: String,
        /// How many other consumers failed too.
        more: usize,
    },
}

fn more_text(more: usize) -> String {
    if more == 0 {
        String::new()
    } else {
        format!(" (and {more} more)")
    }
}

impl TapError {
    fn with_more(mut self, n: usize) -> Self {
        match &mut self {
            TapError::Panicked { more, .. } | TapError::Cancelled { more, .. } => *more = n,
        }
        self
    }
}

/// Wraps a [`RecorderFactory`] and taps every run it opens, child runs included.
pub struct TapFactory {
    inner: Arc<dyn RecorderFactory>,
    start: Box<StartTap>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for TapFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapFactory").finish_non_exhaustive()
    }
}

impl TapFactory {
    /// Wraps `inner`; `start` spawns the consumer of each new run's subscription.
    pub fn new(inner: Arc<dyn RecorderFactory>, start: Box<StartTap>) -> Self {
        Self {
            inner,
            start,
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// Waits for every consumer started so far (each ends when its recorder closes and it has
    /// read what was recorded). A consumer that panicked or was cancelled is an error naming
    /// `what`, the first failure and how many more there were.
    pub async fn drain(&self, what: &str) -> Result<(), TapError> {
        let tasks: Vec<_> = self
            .tasks
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        let mut failures = Vec::new();
        for t in tasks {
            if let Err(e) = joined(what, t.await) {
                failures.push(e);
            }
        }
        let n = failures.len();
        match failures.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first.with_more(n - 1)),
        }
    }
}

/// How a consumer task ended: `Err` naming `what` and its panic message when it panicked.
pub fn joined(what: &str, result: Result<(), tokio::task::JoinError>) -> Result<(), TapError> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic".to_owned());
            Err(TapError::Panicked {
                what: what.to_owned(),
                message,
                more: 0,
            })
        }
        Err(e) => Err(TapError::Cancelled {
            what: what.to_owned(),
            message: e.to_string(),
            more: 0,
        }),
    }
}

#[async_trait]
impl RecorderFactory for TapFactory {
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        let recorder = self.inner.create(run_id, parent_run_id).await?;
        // From seq 1: nothing recorded before the subscription is missed.
        let subscription = recorder.subscribe(Some(1)).await?;
        if let Some(task) = (self.start)(subscription)
            && let Ok(mut tasks) = self.tasks.lock()
        {
            tasks.push(task);
        }
        Ok(recorder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JsonlRecorderFactory;
    use transcript_domain::{EventDraft, Payload, StepPayload};

    fn factory(dir: &std::path::Path) -> Arc<dyn RecorderFactory> {
        Arc::new(JsonlRecorderFactory::new(dir))
    }

    fn run(n: u8) -> RunId {
        RunId::parse(&format!("550e8400-e29b-41d4-a716-4466554400{n:02}")).unwrap()
    }

    /// Every run the factory opens, root and child, reaches the consumer from seq 1.
    #[tokio::test]
    async fn every_opened_run_is_handed_to_the_consumer_from_seq_one() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tap = TapFactory::new(
            factory(dir.path()),
            Box::new(move |mut subscription| {
                let tx = tx.clone();
                Some(tokio::spawn(async move {
                    while let Some(e) = subscription.next().await {
                        let _ = tx.send((e.run_id, e.parent_run_id, e.seq));
                    }
                }))
            }),
        );
        let root = tap.create(run(1), None).await.unwrap();
        let child = tap.create(run(2), Some(run(1))).await.unwrap();
        for r in [&root, &child] {
            let started = Payload::RunStarted(StepPayload::new("w", "workflow"));
            r.record(EventDraft::run_level(started)).await.unwrap();
            r.close().await.unwrap();
        }
        tap.drain("the test view").await.unwrap();
        let mut seen = Vec::new();
        while let Ok(x) = rx.try_recv() {
            seen.push(x);
        }
        seen.sort();
        assert_eq!(seen, vec![(run(1), None, 1), (run(2), Some(run(1)), 1)]);
    }

    /// A consumer that panics is not swallowed: draining the tap reports it.
    #[tokio::test]
    async fn a_panicking_consumer_is_an_error_of_drain() {
        let dir = tempfile::tempdir().unwrap();
        let tap = TapFactory::new(
            factory(dir.path()),
            Box::new(|subscription| {
                Some(tokio::spawn(async move {
                    drop(subscription);
                    panic!("boom in the consumer");
                }))
            }),
        );
        for n in [3, 4] {
            tap.create(run(n), None)
                .await
                .unwrap()
                .close()
                .await
                .unwrap();
        }
        let err = tap.drain("the live export").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "the live export panicked: boom in the consumer (and 1 more)"
        );
        // A quiet consumer drains cleanly.
        let quiet = TapFactory::new(
            factory(dir.path()),
            Box::new(|subscription| Some(tokio::spawn(async move { drop(subscription) }))),
        );
        quiet
            .create(run(5), None)
            .await
            .unwrap()
            .close()
            .await
            .unwrap();
        assert_eq!(quiet.drain("the view").await, Ok(()));
    }
}
