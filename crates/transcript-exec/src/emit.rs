//! The one place the execution side writes transcript events: an optional
//! [`Recorder`] plus a record of recorder failures.
//!
//! The transcript is a pure addition (000 "Coexistence"): a recorder error
//! never fails a step or the run; it is kept and reported in the outcome.

use std::sync::{Arc, Mutex};

use crate::bounded::{DEFAULT_MAX_VALUE_BYTES, bound_payload};
use transcript_domain::{EventDraft, Payload, Recorder, RunId};

/// An optional recorder shared by a run's steps, the router and the agent seam.
#[derive(Clone)]
pub struct Emitter {
    recorder: Option<Arc<dyn Recorder>>,
    errors: Arc<Mutex<Vec<String>>>,
    max_value_bytes: usize,
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

impl Emitter {
    /// Emits through `recorder`, or nowhere when `None`.
    pub fn new(recorder: Option<Arc<dyn Recorder>>) -> Self {
        Self {
            recorder,
            errors: Arc::default(),
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
        }
    }

    /// Bounds every large value of what it records to `limit` bytes
    /// (default 1 MiB; see [`crate::bounded`]).
    pub fn with_max_value_bytes(mut self, limit: usize) -> Self {
        self.max_value_bytes = limit;
        self
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
        bound_payload(&mut draft.payload, self.max_value_bytes);
        if let Err(e) = r.record(draft).await {
            self.note_error(format!("record failed: {e}"));
        }
    }

    /// Closes the recorder (idempotent), keeping any error.
    pub async fn close(&self) {
        if let Some(r) = &self.recorder
            && let Err(e) = r.close().await
        {
            self.note_error(format!("close failed: {e}"));
        }
    }

    /// Keeps a recorder failure for the run outcome.
    pub fn note_error(&self, message: String) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(message);
        }
    }

    /// Recorder failures so far.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }
}
