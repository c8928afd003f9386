//! The reader-side types: what a decoded line can hold that the writer side cannot.

use super::*;

/// The `type` of a decoded line: one of the ten, or kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A type of the closed vocabulary.
    Known(EventType),
    /// A type outside it (a newer writer); the string is kept verbatim.
    Unknown(String),
}

impl EventKind {
    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            EventKind::Known(t) => t.as_str(),
            EventKind::Unknown(s) => s,
        }
    }

    /// The known type, if any.
    pub fn known(&self) -> Option<EventType> {
        match self {
            EventKind::Known(t) => Some(*t),
            EventKind::Unknown(_) => None,
        }
    }
}

/// A decoded transcript line (reader side).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedEvent {
    /// Sequence number as written.
    pub seq: Seq,
    /// The run id.
    pub run_id: RunId,
    /// The invoking run, if any.
    pub parent_run_id: Option<RunId>,
    /// The spawned run, if any.
    pub child_run_id: Option<RunId>,
    /// The event type, known or not.
    pub kind: EventKind,
    /// Step path (`""` when absent).
    pub path: String,
    /// Loop iteration (0 when absent).
    pub iteration: u64,
    /// Timestamp, normalized to UTC milliseconds.
    pub timestamp: Timestamp,
    /// The payload, typed where it fits.
    pub payload: DecodedPayload,
}

/// A payload as decoded: the typed form the event type (or the shape probe)
/// selected, or the raw JSON kept verbatim.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodedPayload {
    /// `null` or absent.
    Null,
    /// A step payload.
    Step(StepPayload),
    /// A message payload.
    Message(DecodedMessage),
    /// A tool payload.
    Tool(ToolPayload),
    /// A bare array of blocks (shape probe rule 1).
    Blocks(Vec<DecodedBlock>),
    /// Anything else, verbatim.
    Raw(RawJson),
}

/// A message payload whose blocks may include unknown ones.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedMessage {
    /// The role as written (`user`, `assistant`, or something newer).
    pub role: String,
    /// Blocks in order.
    pub blocks: Vec<DecodedBlock>,
    /// Provider registry name (decision 10).
    pub provider: Option<String>,
    /// Model name (decision 10).
    pub model: Option<String>,
    /// Usage (decision 10).
    pub usage: Option<Usage>,
    /// The provider's request identity (decision 17).
    pub request_id: Option<String>,
}

/// A block as decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodedBlock {
    /// A block of the closed vocabulary.
    Known(ContentBlock),
    /// A block with an unknown type, or a known type that does not fit; kept verbatim.
    Unknown(UnknownBlock),
}

/// A block the reader could not type; its JSON is kept verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownBlock {
    /// The `type` string as written (`""` when absent).
    pub block_type: String,
    /// The block's JSON, verbatim.
    pub raw: RawJson,
}

impl DecodedBlock {
    /// The known block, if any.
    pub fn known(&self) -> Option<&ContentBlock> {
        match self {
            DecodedBlock::Known(b) => Some(b),
            DecodedBlock::Unknown(_) => None,
        }
    }

    /// The type string as written.
    pub fn type_str(&self) -> &str {
        match self {
            DecodedBlock::Known(b) => b.block_type().as_str(),
            DecodedBlock::Unknown(u) => &u.block_type,
        }
    }
}
