//! The one place the execution side writes transcript events: an optional
//! [`Recorder`] plus a record of recorder failures.
//!
//! A run whose transcript cannot be written **stops** (#17): the first
//! failed record cancels the run through its stop token, the run ends as
//! failed with `transcript write failed: <cause>` (the OS cause included),
//! and every later record, `run.completed` included, is still attempted,
//! since space may have come back. Each failure is kept for
//! [`crate::RunOutcome::transcript_errors`]; a run with any never reports
//! success.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use transcript_domain::{EventDraft, Payload, Recorder, RunId};

use crate::bounded::{DEFAULT_MAX_VALUE_BYTES, bound_payload_within};

/// An optional recorder shared by a run's steps, the router and the agent seam.
#[derive(Clone)]
pub struct Emitter {
    recorder: Option<Arc<dyn Recorder>>,
    errors: Arc<Mutex<Vec<String>>>,
    failure: Arc<Mutex<Option<String>>>,
    stop: Option<CancellationToken>,
    max_value_bytes: usize,
    max_line_bytes: usize,
}

impl Default for Emitter {
    fn default() -> Self {
        Self::new(None)
    }
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("recording", &self.recorder.is_some())
            .finish()
    }
}

/// `error` and its sources, each cause once (`write failed: No space left
/// on device (os error 28)`).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    transcript_domain::text::error_chain(error)
}

impl Emitter {
    /// Emits through `recorder`, or nowhere when `None`.
    pub fn new(recorder: Option<Arc<dyn Recorder>>) -> Self {
        Self {
            recorder,
            errors: Arc::default(),
            failure: Arc::default(),
            stop: None,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            max_line_bytes: transcript_domain::MAX_LINE_BYTES,
        }
    }

    /// Bounds every large value of what it records to `limit` bytes
    /// (default 1 MiB; see [`crate::bounded`]).
    pub fn with_max_value_bytes(mut self, limit: usize) -> Self {
        self.max_value_bytes = limit;
        self
    }

    /// Cuts values further when an event's line would exceed `limit` bytes (default
    /// [`transcript_domain::MAX_LINE_BYTES`]; see [`crate::bounded::bound_payload_within`]).
    pub fn with_max_line_bytes(mut self, limit: usize) -> Self {
        self.max_line_bytes = limit;
        self
    }

    /// Cancels `stop` (the run's token) at the first failed record. Clones
    /// share the failure and the errors.
    pub fn stopping(mut self, stop: CancellationToken) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The wired recorder, the cap of one value and of one line, for the one adapter that
    /// records on the run's behalf outside the emitter (an agent step's MCP proxy,
    /// [`crate::mcp`]).
    pub(crate) fn recorder_and_cap(&self) -> (Option<Arc<dyn Recorder>>, (usize, usize)) {
        (
            self.recorder.clone(),
            (self.max_value_bytes, self.max_line_bytes),
        )
    }

    /// Whether a recorder is wired.
    pub fn is_recording(&self) -> bool {
        self.recorder.is_some()
    }

    /// The recorder's run id, when one is wired.
    pub fn run_id(&self) -> Option<RunId> {
        self.recorder.as_ref().map(|r| r.run_id())
    }

    /// Records one event at `path` / `iteration`. The payload is built only
    /// when a recorder is wired.
    pub async fn emit(&self, path: &str, iteration: u64, payload: impl FnOnce() -> Payload) {
        self.emit_draft(|| EventDraft::new(path, iteration, payload()))
            .await;
    }

    /// Records a draft built on demand, its large values bounded so that
    /// the line fits [`transcript_domain::MAX_LINE_BYTES`].
    pub async fn emit_draft(&self, draft: impl FnOnce() -> EventDraft) {
        let Some(r) = &self.recorder else {
            return;
        };
        let mut draft = draft();
        bound_payload_within(
            &mut draft.payload,
            self.max_value_bytes,
            self.max_line_bytes,
        );
        if let Err(e) = r.record(draft).await {
            self.fail(format!("transcript write failed: {}", error_chain(&e)));
        }
    }

    /// Closes the recorder (idempotent); a failure counts as a failed write.
    pub async fn close(&self) {
        if let Some(r) = &self.recorder
            && let Err(e) = r.close().await
        {
            self.fail(format!(
                "transcript write failed: closing the transcript: {}",
                error_chain(&e)
            ));
        }
    }

    /// Keeps a failure of this run's transcript and stops the run at the
    /// first one.
    fn fail(&self, message: String) {
        let first = self
            .failure
            .lock()
            .map(|mut f| {
                let first = f.is_none();
                if first {
                    *f = Some(message.clone());
                }
                first
            })
            .unwrap_or(false);
        self.note_error(message);
        if first && let Some(stop) = &self.stop {
            stop.cancel();
        }
    }

    /// Keeps a recorder failure for the run outcome (a child run's, for
    /// instance) without stopping this run.
    pub fn note_error(&self, message: String) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(message);
        }
    }

    /// The first failure of this run's own transcript, if any.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }

    /// Recorder failures so far (this run's and its children's).
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }
}
