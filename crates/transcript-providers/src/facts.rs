//! What an import needs beyond the agent's reply (issue #18): the
//! provider's time of each record, the user's prompts, the run's duration,
//! and whether the capture ends with its provider's terminal record.
//!
//! The plain [`crate::Normalizer::feed`] stream is unchanged (the agent seam
//! of a live run writes `message.user` and takes time from its own clock);
//! [`crate::Normalizer::feed_items`] interleaves these [`Fact`]s with the
//! outputs, each placed before the first output it applies to.
//!
//! # Clocks
//!
//! An import says in its transcript which clock its times come from
//! ([`ClockSource`]), chosen per capture:
//!
//! - `provider`: the records carry times (Claude Code session logs and
//!   Codex rollouts `timestamp`, Gemini stream-json `timestamp`, Copilot
//!   `timestamp`, OpenAI `created`). Each output gets the time of the record
//!   that produced it; a record without a time keeps the previous one. Times
//!   are monotonic per file: a record earlier than the previous one keeps
//!   the previous time and yields a [`crate::DiagnosticKind::Warning`].
//! - `duration`: only the run's length is known (Claude Code stream-json
//!   `result.duration_ms`): the run starts at the import time and its
//!   terminal record, and everything after it, is placed `duration_ms` later.
//! - `import`: neither (Codex `exec --json`, Anthropic and OpenAI bodies
//!   without `created`): the import's own clock.

use transcript_domain::Timestamp;

use crate::output::Output;

/// Where an import's times come from (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSource {
    /// The records' own times.
    Provider,
    /// The import time, plus the run's reported duration at its end.
    Duration,
    /// The import's own clock.
    Import,
}

impl ClockSource {
    /// The name written in the transcript (`"provider"`, `"duration"`, `"import"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ClockSource::Provider => "provider",
            ClockSource::Duration => "duration",
            ClockSource::Import => "import",
        }
    }
}

/// A fact about the capture, placed in the item stream before the first
/// output it applies to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Fact {
    /// The provider's time of the record producing the next outputs
    /// (already monotonic: never earlier than the previous `Time`).
    Time(Timestamp),
    /// A user prompt (one `message.user`, decision 11: blocks
    /// `[text(prompt), text(system)?]`).
    Prompt {
        /// What the user asked.
        text: String,
        /// The system prompt the capture shows for it, if any.
        system: Option<String>,
    },
    /// The run's length as the provider reported it (`duration_ms`).
    Duration(u64),
    /// The final answer a terminal record repeats (Claude Code
    /// `result.result`), kept in the agent step's result.
    ResultText(String),
    /// The capture ends without its provider's terminal record (named
    /// here, e.g. "`result`"): the run is incomplete.
    Unfinished(&'static str),
    /// The capture's last record is torn (no terminal newline and not
    /// parsable): the framer's description of it.
    Torn(String),
}

/// One item of [`crate::Normalizer::feed_items`]: an output or a fact.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// What [`crate::Normalizer::feed`] would emit.
    Output(Output),
    /// What an import needs besides.
    Fact(Fact),
}
