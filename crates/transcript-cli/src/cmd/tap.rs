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

    /// Waits for every consumer started so far (each ends when its recorder closes).
    pub async fn drain(&self) {
        let tasks: Vec<_> = self
            .tasks
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        for t in tasks {
            let _ = t.await;
        }
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
