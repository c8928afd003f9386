//! Storage adapters for canonical agent exchange transcripts.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod clock;
mod factory;
mod fanout;
mod fs;
mod loader;
mod reader;
mod recorder;
mod resume;
mod sink;
mod verify;

pub use clock::{RandomRunIds, SystemClock};
pub use factory::JsonlRecorderFactory;
pub use fanout::{DEFAULT_SUBSCRIBER_BUFFER, FanOutStats, JsonlSubscription, SubscriberStats};
pub use loader::{LoadError, LoadedRun, load_run_tree};
pub use reader::{
    DEFAULT_MAX_LINE_BYTES, MalformedCause, MalformedLine, ReadError, ReadEvent, ReadItem,
    ReadWarning, ReadWarningKind, TranscriptReader,
};
pub use recorder::{Durability, JsonlRecorder, JsonlRecorderBuilder};
pub use resume::{ResumeInfo, ResumeWarning};
pub use verify::{
    FileReport, Finding, FindingCode, RunReport, verify_file, verify_reader, verify_run,
};
