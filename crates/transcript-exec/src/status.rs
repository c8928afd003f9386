//! How a step or a run ended ([`Status`]), as the audit trail, the
//! display events and [`crate::RunOutcome`] say it.

use serde::Serialize;

/// How a step or run ended, as shown to humans and written to the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Succeeded.
    Success,
    /// Failed.
    Failure,
    /// Cancelled (run cancellation).
    Cancelled,
}

impl Status {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failure => "failure",
            Status::Cancelled => "cancelled",
        }
    }
}
