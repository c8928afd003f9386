//! The tolerant, type-directed line decoder (decision 14) and the
//! reader-side types that can hold what the writer-side types cannot:
//! unknown event and block types, payloads that do not fit their type.
//!
//! Files: `types` (the reader-side types), this module (the envelope, errors and warnings),
//! `one_pass` (the fast path for lines whose type precedes their payload), `payload`
//! (type-directed payload dispatch and 000's shape probe), `blocks` (messages and content
//! blocks), `canonical` (back to the writer side, and re-encoding).

mod blocks;
mod canonical;
mod one_pass;
mod payload;
mod types;

pub(crate) use blocks::{decode_block_strict, decode_message_strict};
use blocks::{decode_blocks, decode_message};
pub use canonical::NotCanonical;
use payload::decode_payload;
pub use types::{
    DecodedBlock, DecodedEvent, DecodedMessage, DecodedPayload, EventKind, UnknownBlock,
};

use std::borrow::Cow;

use serde::Deserialize;
use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};
use serde_json::value::RawValue;

use crate::block::{BlockBody, ContentBlock};
use crate::event::ExchangeEvent;
use crate::ids::{InvalidRunId, RunId, Seq};
use crate::payload::{MessagePayload, Payload, RunEdge, StepPayload, ToolPayload, Usage};
use crate::raw::RawJson;
use crate::timestamp::{InvalidTimestamp, Timestamp};
use crate::vocab::{BlockType, EventType, Fidelity, PayloadKind, Role};

/// A line plus the forward-compatibility warnings met while decoding it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The event.
    pub event: DecodedEvent,
    /// Warnings (never errors): the event is complete and nothing was dropped.
    pub warnings: Vec<DecodeWarning>,
}

/// A condition a tolerant reader reports but does not fail on.
///
/// Match on the variant to decide policy, e.g. treat
/// [`DecodeWarning::UnknownEventType`] as informational.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeWarning {
    /// The line's `type` is outside the closed vocabulary.
    #[error("unknown event type {type_name:?}")]
    UnknownEventType {
        /// The type as written.
        type_name: String,
    },
    /// A block's `type` is outside the closed vocabulary.
    #[error("unknown block type {type_name:?} at block {index}")]
    UnknownBlockType {
        /// Index of the block in its list.
        index: usize,
        /// The type as written.
        type_name: String,
    },
    /// A block of a known type could not be typed (e.g. no fidelity).
    #[error("block {index} of type {type_name:?} kept raw: {reason}")]
    InvalidBlock {
        /// Index of the block in its list.
        index: usize,
        /// The type as written.
        type_name: String,
        /// Why.
        reason: String,
    },
    /// A known event type whose payload does not fit its payload type; the
    /// shape probe decided instead.
    #[error("payload of {event_type} is not a {expected}: {reason}")]
    PayloadMismatch {
        /// The event type.
        event_type: EventType,
        /// What the type calls for.
        expected: PayloadKind,
        /// Why it did not fit.
        reason: String,
    },
}

/// A line that is not an event: the reader reports it as malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not UTF-8.
    #[error("invalid UTF-8 at byte {valid_up_to}")]
    InvalidUtf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// The line is empty or only whitespace.
    #[error("empty line")]
    Empty,
    /// Not JSON (truncated, garbage, raw control characters).
    #[error("invalid JSON at column {column}: {message}")]
    Syntax {
        /// 1-based column (byte) in the line.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// JSON, but not an envelope: missing field, wrong field type.
    #[error("not a transcript event: {message}")]
    Shape {
        /// The parser's message (names the field).
        message: String,
    },
    /// A run id field that is not a hyphenated UUID (decision 9).
    #[error("{field}: {source}")]
    InvalidRunId {
        /// `run_id`, `parent_run_id` or `child_run_id`.
        field: &'static str,
        /// The cause.
        #[source]
        source: InvalidRunId,
    },
    /// A timestamp that is not RFC 3339.
    #[error("timestamp: {0}")]
    InvalidTimestamp(#[from] InvalidTimestamp),
}

impl DecodeError {
    fn from_json(err: &serde_json::Error) -> Self {
        use serde_json::error::Category;
        let message = strip_position(err.to_string());
        match err.classify() {
            Category::Data => DecodeError::Shape { message },
            Category::Syntax | Category::Eof | Category::Io => DecodeError::Syntax {
                column: err.column(),
                message,
            },
        }
    }
}

fn strip_position(message: String) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message,
    }
}

#[derive(Deserialize)]
struct WireEnvelope<'a> {
    seq: u64,
    #[serde(borrow)]
    run_id: Cow<'a, str>,
    #[serde(default, borrow)]
    parent_run_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    child_run_id: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default, borrow)]
    path: Option<Cow<'a, str>>,
    #[serde(default)]
    iteration: Option<u64>,
    #[serde(borrow)]
    timestamp: Cow<'a, str>,
    #[serde(default, borrow)]
    payload: Option<&'a RawValue>,
}

/// Decodes one line (without or with its trailing newline).
///
/// Never panics. A line that is not an event is a [`DecodeError`]; a line that
/// is an event but uses vocabulary or shapes this version does not know
/// decodes completely and carries [`DecodeWarning`]s.
pub fn decode_line(line: &[u8]) -> Result<Decoded, DecodeError> {
    let text = std::str::from_utf8(line).map_err(|e| DecodeError::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    decode_str(text)
}

/// [`decode_line`] for text already known to be UTF-8.
pub fn decode_str(text: &str) -> Result<Decoded, DecodeError> {
    if text.trim().is_empty() {
        return Err(DecodeError::Empty);
    }
    // A line whose type precedes its payload (every line of ours) in one pass; anything the
    // one-pass path cannot decide exactly like `two_pass` (every error among them) is decoded
    // there, as before.
    match one_pass::decode(text) {
        Some(decoded) => Ok(decoded),
        None => two_pass(text),
    }
}

/// The envelope with its payload kept raw, then the payload typed from that text.
fn two_pass(text: &str) -> Result<Decoded, DecodeError> {
    let wire: WireEnvelope<'_> =
        serde_json::from_str(text).map_err(|e| DecodeError::from_json(&e))?;
    let run_id = parse_id("run_id", &wire.run_id)?;
    let parent_run_id = optional_id("parent_run_id", wire.parent_run_id.as_deref())?;
    let child_run_id = optional_id("child_run_id", wire.child_run_id.as_deref())?;
    let timestamp = Timestamp::parse(&wire.timestamp)?;
    let mut warnings = Vec::new();
    let kind = match EventType::from_wire(&wire.ty) {
        Some(t) => EventKind::Known(t),
        None => {
            warnings.push(DecodeWarning::UnknownEventType {
                type_name: wire.ty.clone().into_owned(),
            });
            EventKind::Unknown(wire.ty.into_owned())
        }
    };
    let payload = decode_payload(&kind, wire.payload, &mut warnings);
    Ok(Decoded {
        event: DecodedEvent {
            seq: wire.seq,
            run_id,
            parent_run_id,
            child_run_id,
            kind,
            path: wire.path.map(Cow::into_owned).unwrap_or_default(),
            iteration: wire.iteration.unwrap_or(0),
            timestamp,
            payload,
        },
        warnings,
    })
}

fn parse_id(field: &'static str, text: &str) -> Result<RunId, DecodeError> {
    RunId::parse(text).map_err(|source| DecodeError::InvalidRunId { field, source })
}

fn optional_id(field: &'static str, text: Option<&str>) -> Result<Option<RunId>, DecodeError> {
    match text {
        None | Some("") => Ok(None),
        Some(t) => parse_id(field, t).map(Some),
    }
}
