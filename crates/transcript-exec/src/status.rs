//! How a step or a run ended ([`Status`]), as the audit trail, the display events,
//! `parallel` and `terminal` results and [`crate::RunOutcome`] say it: the domain's one
//! status vocabulary (`succeeded`, `failed`, `cancelled`; `incomplete` only in a tree rebuilt
//! from a file whose run never completed), re-exported so the engine and the tree cannot
//! drift apart.

pub use transcript_domain::tree::{CANCELLED, Status};
