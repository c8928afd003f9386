//! The proxy's side of the [`Recorder`] port: `tool.call` / `tool.result` pairs at `router`
//! fidelity, at the agent step's path and iteration (decision 5), with proxy-unique call ids.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use transcript_domain::{
    EventDraft, Fidelity, Payload, RawJson, RecordError, Recorder, ToolPayload,
};

/// Where the proxy's observations go: the run's recorder and the agent step they belong to.
#[derive(Clone)]
pub struct RecordTarget {
    /// The run's recorder.
    pub recorder: Arc<dyn Recorder>,
    /// Path of the agent step whose CLI talks to the proxy.
    pub path: String,
    /// Its iteration.
    pub iteration: u64,
    /// Prefix of the proxy's call ids, unique per agent execution in the run (the exec step
    /// passes `<path>#<iteration>`, as for the CLI's own ids). Ids are `<prefix>/mcp-<n>`.
    pub call_id_prefix: String,
}

impl std::fmt::Debug for RecordTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordTarget")
            .field("run_id", &self.recorder.run_id())
            .field("path", &self.path)
            .field("iteration", &self.iteration)
            .field("call_id_prefix", &self.call_id_prefix)
            .finish()
    }
}

/// Writes the proxy's events and remembers the first write that failed, so the run can
/// refuse to report success after losing one (the proxy itself keeps serving the agent).
pub(crate) struct Recording {
    target: RecordTarget,
    counter: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl Recording {
    pub(crate) fn new(target: RecordTarget) -> Self {
        Self {
            target,
            counter: AtomicU64::new(0),
            first_failure: Mutex::new(None),
        }
    }

    /// A fresh call id.
    pub(crate) fn next_call_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}/mcp-{n}", self.target.call_id_prefix)
    }

    /// Records `tool.call` (output `null`, decision 6).
    pub(crate) async fn call(&self, name: &str, call_id: &str, input: RawJson) {
        let payload = ToolPayload::call(name, call_id, input, Fidelity::Router);
        self.write(Payload::ToolCall(payload)).await;
    }

    /// Records `tool.result` (input `null`, decision 6).
    pub(crate) async fn result(
        &self,
        name: &str,
        call_id: &str,
        output: RawJson,
        error: Option<String>,
    ) {
        let payload = ToolPayload::result(name, call_id, output, error, Fidelity::Router);
        self.write(Payload::ToolResult(payload)).await;
    }

    async fn write(&self, payload: Payload) {
        let draft = EventDraft::new(&self.target.path, self.target.iteration, payload);
        if let Err(e) = self.target.recorder.record(draft).await {
            self.failed(&e);
        }
    }

    fn failed(&self, e: &RecordError) {
        tracing::error!(error = %e, "the MCP proxy could not record an event");
        let mut first = self.first_failure.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| e.to_string());
    }

    /// The first failed write, if any.
    pub(crate) fn first_failure(&self) -> Option<String> {
        self.first_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
