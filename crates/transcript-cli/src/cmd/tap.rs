//! The CLI's taps (the live progress view, the live OTLP exporter) are transcript-infra's public
//! [`transcript_infra::TapFactory`]: every run the factory opens, root and child runs, is handed
//! to a consumer from seq 1. This module only adapts its typed errors to the command's messages.

use std::sync::Arc;

use async_trait::async_trait;
use transcript_domain::{RecordError, Recorder, RecorderFactory, RunId};
pub use transcript_infra::StartTap;

/// transcript-infra's tap, with errors as the command's messages.
pub struct TapFactory(transcript_infra::TapFactory);

impl TapFactory {
    /// Wraps `inner`; `start` spawns the consumer of each new run's subscription.
    pub fn new(inner: Arc<dyn RecorderFactory>, start: Box<StartTap>) -> Self {
        Self(transcript_infra::TapFactory::new(inner, start))
    }

    /// Waits for every consumer started so far; a consumer that panicked is an error naming
    /// the panic (the first one, and how many).
    pub async fn drain(&self, what: &str) -> Result<(), String> {
        self.0.drain(what).await.map_err(|e| e.to_string())
    }
}

#[async_trait]
impl RecorderFactory for TapFactory {
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        self.0.create(run_id, parent_run_id).await
    }
}
