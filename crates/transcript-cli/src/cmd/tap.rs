//! A recorder factory that taps every run it opens (the root run and each child run of a
//! `call_workflow` step): it subscribes from seq 1 and hands the subscription to a consumer task.
//! The live progress view and the live OTLP exporter are both such taps. Recording never waits
//! for a tap: a subscription that falls behind drops and counts.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::task::JoinHandle;
use transcript_domain::{RecordError, Recorder, RecorderFactory, RunId, Subscription};

/// Starts the consumer of one run's subscription; `None` when the tap takes no more runs.
pub type StartTap = dyn Fn(Box<dyn Subscription>) -> Option<JoinHandle<()>> + Send + Sync;

/// Wraps a factory and taps every run it opens.
pub struct TapFactory {
    inner: Arc<dyn RecorderFactory>,
    start: Box<StartTap>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
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

    /// Waits for every consumer started so far (each ends when its recorder closes). A
    /// consumer that panicked is an error naming the panic (the first one, and how many).
    pub async fn drain(&self, what: &str) -> Result<(), String> {
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
        match failures.len() {
            0 => Ok(()),
            1 => Err(failures.swap_remove(0)),
            n => Err(format!("{} (and {} more)", failures.swap_remove(0), n - 1)),
        }
    }
}

/// How a task ended: `Err` naming `what` and its panic message when it panicked.
pub fn joined(what: &str, result: Result<(), tokio::task::JoinError>) -> Result<(), String> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic".to_owned());
            Err(format!("{what} panicked: {message}"))
        }
        Err(e) => Err(format!("{what} was cancelled: {e}")),
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn factory(dir: &std::path::Path) -> Arc<dyn RecorderFactory> {
        Arc::new(transcript_infra::JsonlRecorderFactory::new(dir))
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
        let run = RunId::parse("550e8400-e29b-41d4-a716-446655440000").unwrap();
        let recorder = tap.create(run, None).await.unwrap();
        recorder.close().await.unwrap();
        let err = tap.drain("the live export").await.unwrap_err();
        assert!(
            err.contains("the live export panicked: boom in the consumer"),
            "{err}"
        );
        // A quiet consumer drains cleanly.
        let quiet = TapFactory::new(
            factory(dir.path()),
            Box::new(|subscription| Some(tokio::spawn(async move { drop(subscription) }))),
        );
        let run = RunId::parse("550e8400-e29b-41d4-a716-446655440001").unwrap();
        let recorder = quiet.create(run, None).await.unwrap();
        recorder.close().await.unwrap();
        assert_eq!(quiet.drain("the view").await, Ok(()));
    }
}
