//! The CLI's taps (the live progress view, the live OTLP exporter) are transcript-infra's public
//! [`TapFactory`]: every run the factory opens, root and child runs, is handed to a consumer
//! from seq 1. This module only adapts its typed errors to the command's messages.

pub use transcript_infra::TapFactory;

/// How a task ended: `Err` naming `what` and its panic message when it panicked.
pub fn joined(what: &str, result: Result<(), tokio::task::JoinError>) -> Result<(), String> {
    transcript_infra::joined(what, result).map_err(|e| e.to_string())
}
