//! Progress for humans: [`DisplayEvent`]s handed to a [`DisplaySink`]
//! (a terminal display, a TUI, [`CollectDisplay`] in tests). Like the audit
//! trail, they read the service's own clock and never depend on whether a
//! transcript is recorded.

use std::sync::Mutex;

use serde::Serialize;
use transcript_domain::{RunId, Timestamp};

use crate::status::Status;

/// A progress event for humans (a terminal display, a TUI).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum DisplayEvent {
    /// A run began.
    RunStarted {
        /// Display clock reading.
        at: Timestamp,
        /// The run.
        run_id: RunId,
        /// Workflow name.
        workflow: String,
    },
    /// A step began.
    StepStarted {
        /// Display clock reading.
        at: Timestamp,
        /// Step path.
        path: String,
        /// Iteration.
        iteration: u64,
        /// Step kind.
        kind: String,
    },
    /// A step ended.
    StepFinished {
        /// Display clock reading.
        at: Timestamp,
        /// Step path.
        path: String,
        /// Iteration.
        iteration: u64,
        /// How it ended.
        status: Status,
        /// Milliseconds on the display clock.
        elapsed_ms: i64,
        /// Why it failed.
        error: Option<String>,
    },
    /// A run ended.
    RunFinished {
        /// Display clock reading.
        at: Timestamp,
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: Status,
        /// Why it failed.
        error: Option<String>,
    },
}

impl DisplayEvent {
    /// One human-readable line.
    pub fn render(&self) -> String {
        match self {
            DisplayEvent::RunStarted {
                run_id, workflow, ..
            } => format!("run {workflow} ({run_id}) started"),
            DisplayEvent::StepStarted {
                path,
                iteration,
                kind,
                ..
            } => format!("  > {path}[{iteration}] ({kind})"),
            DisplayEvent::StepFinished {
                path,
                iteration,
                status,
                elapsed_ms,
                error,
                ..
            } => {
                let mark = match status {
                    Status::Succeeded => "ok",
                    Status::Failed | Status::Incomplete => "FAILED",
                    Status::Cancelled => "cancelled",
                };
                match error {
                    Some(e) => format!("  < {path}[{iteration}] {mark} in {elapsed_ms}ms: {e}"),
                    None => format!("  < {path}[{iteration}] {mark} in {elapsed_ms}ms"),
                }
            }
            DisplayEvent::RunFinished {
                run_id,
                status,
                error,
                ..
            } => match error {
                Some(e) => format!("run {run_id} {}: {e}", status.as_str()),
                None => format!("run {run_id} {}", status.as_str()),
            },
        }
    }
}

/// Receives display events.
pub trait DisplaySink: Send + Sync {
    /// Called in emission order (per branch when branches run concurrently).
    fn display(&self, event: DisplayEvent);
}

impl DisplaySink for tokio::sync::mpsc::UnboundedSender<DisplayEvent> {
    fn display(&self, event: DisplayEvent) {
        // A closed receiver just means nobody is watching.
        let _ = self.send(event);
    }
}

/// A sink that keeps every event (tests, goldens).
#[derive(Debug, Default)]
pub struct CollectDisplay {
    events: Mutex<Vec<DisplayEvent>>,
}

impl CollectDisplay {
    /// The events so far.
    pub fn events(&self) -> Vec<DisplayEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl DisplaySink for CollectDisplay {
    fn display(&self, event: DisplayEvent) {
        if let Ok(mut e) = self.events.lock() {
            e.push(event);
        }
    }
}
