//! Wire contract of canonical agent exchange transcripts (docs: see below).
#![forbid(unsafe_code)]

mod block;
mod decode;
mod event;
mod ids;
mod payload;
mod port;
mod raw;
mod timestamp;
pub mod tree;
mod vocab;

pub use block::{BlockBody, ContentBlock};
pub use decode::{
    DecodeError, DecodeWarning, Decoded, DecodedBlock, DecodedEvent, DecodedMessage,
    DecodedPayload, EventKind, NotCanonical, UnknownBlock, decode_line, decode_str,
};
pub use event::{EventDraft, ExchangeEvent, PreEncoded};
pub use ids::{InvalidRunId, RunId, Seq};
pub use payload::{MessagePayload, Payload, StepPayload, ToolPayload, Usage};
pub use port::{
    Clock, EventMask, ManualClock, RecordError, Recorder, RecorderFactory, RunIdGenerator,
    SequentialRunIds, Subscription,
};
pub use raw::RawJson;
pub use timestamp::{InvalidTimestamp, Timestamp};
pub use vocab::{BlockType, EventType, Fidelity, PayloadKind, Role};
