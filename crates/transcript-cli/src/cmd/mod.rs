//! One module per subcommand.

pub mod check;
pub mod diff;
pub mod export;
pub mod import;
pub mod list;
pub mod mirror;
pub mod otel;
pub mod progress;
pub mod receipts;
pub mod replay;
pub mod run;
mod run_report;
pub mod serve;
pub mod show;
pub mod signals;
pub mod stats;
pub mod tail;
pub mod tap;
pub mod tree;
pub mod validate;

/// Pretty JSON for `--json` outputs.
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, crate::CliError> {
    serde_json::to_string_pretty(value).map_err(|e| crate::CliError::Failed(e.to_string()))
}
