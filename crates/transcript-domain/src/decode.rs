//! The tolerant, type-directed line decoder (decision 14) and the
//! reader-side types that can hold what the writer-side types cannot:
//! unknown event and block types, payloads that do not fit their type.

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

fn decode_payload(
    kind: &EventKind,
    raw: Option<&RawValue>,
    warnings: &mut Vec<DecodeWarning>,
) -> DecodedPayload {
    let Some(raw) = raw else {
        if let EventKind::Known(t) = kind {
            let expected = t.payload_kind();
            if expected != PayloadKind::StepOrNull {
                warnings.push(DecodeWarning::PayloadMismatch {
                    event_type: *t,
                    expected,
                    reason: "payload is null or absent".to_owned(),
                });
            }
        }
        return DecodedPayload::Null;
    };
    let EventKind::Known(event_type) = kind else {
        return probe(raw, warnings);
    };
    let expected = event_type.payload_kind();
    let typed = match expected {
        PayloadKind::StepOrNull | PayloadKind::Step => {
            serde_json::from_str::<StepPayload>(raw.get()).map(DecodedPayload::Step)
        }
        PayloadKind::Tool => {
            serde_json::from_str::<ToolPayload>(raw.get()).map(DecodedPayload::Tool)
        }
        PayloadKind::Message => {
            let mut block_warnings = Vec::new();
            let result =
                decode_message(raw.get(), &mut block_warnings).map(DecodedPayload::Message);
            if result.is_ok() {
                warnings.append(&mut block_warnings);
            }
            result
        }
    };
    match typed {
        Ok(payload) => payload,
        Err(err) => {
            warnings.push(DecodeWarning::PayloadMismatch {
                event_type: *event_type,
                expected,
                reason: strip_position(err.to_string()),
            });
            probe(raw, warnings)
        }
    }
}

#[derive(Deserialize)]
struct Probe {
    role: Option<serde::de::IgnoredAny>,
    call_id: Option<serde::de::IgnoredAny>,
    kind: Option<serde::de::IgnoredAny>,
}

/// 000's shape probe: array → blocks, `role` → message, `call_id` → tool,
/// `kind` → step, otherwise raw.
fn probe(raw: &RawValue, warnings: &mut Vec<DecodeWarning>) -> DecodedPayload {
    let text = raw.get().trim_start();
    let verbatim = || DecodedPayload::Raw(RawJson::from_raw(raw.to_owned()));
    if text.starts_with('[') {
        return match serde_json::from_str::<Vec<&RawValue>>(text) {
            Ok(items) => DecodedPayload::Blocks(decode_blocks(&items, warnings)),
            Err(_) => verbatim(),
        };
    }
    if text.starts_with("null") {
        return DecodedPayload::Null;
    }
    if !text.starts_with('{') {
        return verbatim();
    }
    let Ok(shape) = serde_json::from_str::<Probe>(text) else {
        return verbatim();
    };
    if shape.role.is_some() {
        let mut block_warnings = Vec::new();
        if let Ok(m) = decode_message(text, &mut block_warnings) {
            warnings.append(&mut block_warnings);
            return DecodedPayload::Message(m);
        }
        return verbatim();
    }
    if shape.call_id.is_some() {
        return serde_json::from_str::<ToolPayload>(text)
            .map(DecodedPayload::Tool)
            .unwrap_or_else(|_| verbatim());
    }
    if shape.kind.is_some() {
        return serde_json::from_str::<StepPayload>(text)
            .map(DecodedPayload::Step)
            .unwrap_or_else(|_| verbatim());
    }
    verbatim()
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    role: String,
    #[serde(default, borrow)]
    blocks: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

fn decode_message(
    text: &str,
    warnings: &mut Vec<DecodeWarning>,
) -> Result<DecodedMessage, serde_json::Error> {
    let wire: WireMessage<'_> = serde_json::from_str(text)?;
    let blocks = decode_blocks(wire.blocks.as_deref().unwrap_or(&[]), warnings);
    Ok(DecodedMessage {
        role: wire.role,
        blocks,
        provider: wire.provider,
        model: wire.model,
        usage: wire.usage,
    })
}

#[derive(Deserialize)]
struct WireBlock {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    fidelity: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    chunk: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_id: Option<String>,
    #[serde(default)]
    tool_input: Option<RawJson>,
    #[serde(default)]
    tool_content: Option<RawJson>,
    #[serde(default)]
    command: Option<String>,
}

/// [`decode_message`] for the strict `Deserialize` impls.
pub(crate) fn decode_message_strict(
    text: &str,
    warnings: &mut Vec<DecodeWarning>,
) -> Result<DecodedMessage, serde_json::Error> {
    decode_message(text, warnings)
}

/// [`decode_block`] for the strict `Deserialize` impls.
pub(crate) fn decode_block_strict(
    raw: &RawValue,
    warnings: &mut Vec<DecodeWarning>,
) -> DecodedBlock {
    decode_block(0, raw, warnings)
}

fn decode_blocks(items: &[&RawValue], warnings: &mut Vec<DecodeWarning>) -> Vec<DecodedBlock> {
    items
        .iter()
        .enumerate()
        .map(|(index, raw)| decode_block(index, raw, warnings))
        .collect()
}

fn decode_block(index: usize, raw: &RawValue, warnings: &mut Vec<DecodeWarning>) -> DecodedBlock {
    let keep = |block_type: String| {
        DecodedBlock::Unknown(UnknownBlock {
            block_type,
            raw: RawJson::from_raw(raw.to_owned()),
        })
    };
    let wire: WireBlock = match serde_json::from_str(raw.get()) {
        Ok(w) => w,
        Err(err) => {
            // Recover the type string for the report when there is one.
            let type_name = serde_json::from_str::<serde_json::Value>(raw.get())
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                .unwrap_or_default();
            warnings.push(DecodeWarning::InvalidBlock {
                index,
                type_name: type_name.clone(),
                reason: strip_position(err.to_string()),
            });
            return keep(type_name);
        }
    };
    let Some(block_type) = BlockType::from_wire(&wire.ty) else {
        warnings.push(DecodeWarning::UnknownBlockType {
            index,
            type_name: wire.ty.clone(),
        });
        return keep(wire.ty);
    };
    let fidelity = match wire.fidelity.as_deref().map(Fidelity::from_wire) {
        Some(Some(f)) => f,
        other => {
            let reason = match other {
                None => "missing fidelity".to_owned(),
                Some(_) => format!(
                    "unknown fidelity {:?}",
                    wire.fidelity.as_deref().unwrap_or_default()
                ),
            };
            warnings.push(DecodeWarning::InvalidBlock {
                index,
                type_name: wire.ty.clone(),
                reason,
            });
            return keep(wire.ty);
        }
    };
    let body = match block_type {
        BlockType::Text => BlockBody::Text {
            text: wire.text.unwrap_or_default(),
        },
        BlockType::Thinking => BlockBody::Thinking {
            thinking: wire.thinking.unwrap_or_default(),
        },
        BlockType::ToolUse => BlockBody::ToolUse {
            tool_name: wire.tool_name.unwrap_or_default(),
            tool_id: wire.tool_id.unwrap_or_default(),
            tool_input: wire.tool_input.unwrap_or_default(),
        },
        BlockType::ToolResult => BlockBody::ToolResult {
            tool_id: wire.tool_id.unwrap_or_default(),
            tool_content: wire.tool_content.unwrap_or_default(),
        },
        BlockType::Command => BlockBody::Command {
            command: wire.command.unwrap_or_default(),
        },
        BlockType::Stream => BlockBody::Stream {
            text: wire.text.or(wire.chunk).unwrap_or_default(),
        },
    };
    DecodedBlock::Known(ContentBlock { fidelity, body })
}

/// Why a decoded line has no writer-side equivalent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCanonical {
    /// The event type is outside the vocabulary.
    #[error("unknown event type {0:?}")]
    UnknownEventType(String),
    /// The payload does not fit the event type (or is `null` where our writer never writes it).
    #[error("payload does not fit {event_type}")]
    PayloadMismatch {
        /// The event type.
        event_type: EventType,
    },
    /// A block is unknown or invalid.
    #[error("block {index} of type {type_name:?} is not canonical")]
    Block {
        /// Its index.
        index: usize,
        /// Its type string.
        type_name: String,
    },
    /// The message role is not `user` / `assistant`.
    #[error("unknown message role {0:?}")]
    Role(String),
}

impl DecodedEvent {
    /// The writer-side event, when every part is canonical.
    pub fn to_event(&self) -> Result<ExchangeEvent, NotCanonical> {
        let EventKind::Known(event_type) = &self.kind else {
            return Err(NotCanonical::UnknownEventType(
                self.kind.as_str().to_owned(),
            ));
        };
        let mismatch = || NotCanonical::PayloadMismatch {
            event_type: *event_type,
        };
        let payload = match (event_type, &self.payload) {
            (EventType::RunStarted, DecodedPayload::Step(p)) => Payload::RunStarted(p.clone()),
            (EventType::RunCompleted, DecodedPayload::Step(p)) => Payload::RunCompleted(p.clone()),
            (EventType::StepStarted, DecodedPayload::Step(p)) => Payload::StepStarted(p.clone()),
            (EventType::StepCompleted, DecodedPayload::Step(p)) => {
                Payload::StepCompleted(p.clone())
            }
            (EventType::CallWorkflowStarted, DecodedPayload::Step(p)) => {
                Payload::CallWorkflowStarted(p.clone())
            }
            (EventType::CallWorkflowCompleted, DecodedPayload::Step(p)) => {
                Payload::CallWorkflowCompleted(p.clone())
            }
            (EventType::MessageUser, DecodedPayload::Message(m)) => {
                Payload::MessageUser(m.to_message()?)
            }
            (EventType::MessageAssistant, DecodedPayload::Message(m)) => {
                Payload::MessageAssistant(m.to_message()?)
            }
            (EventType::ToolCall, DecodedPayload::Tool(t)) => Payload::ToolCall(t.clone()),
            (EventType::ToolResult, DecodedPayload::Tool(t)) => Payload::ToolResult(t.clone()),
            // Seed 000: "May be null for run lifecycle events".
            (EventType::RunStarted, DecodedPayload::Null) => Payload::RunNull(RunEdge::Started),
            (EventType::RunCompleted, DecodedPayload::Null) => Payload::RunNull(RunEdge::Completed),
            _ => return Err(mismatch()),
        };
        Ok(ExchangeEvent {
            seq: self.seq,
            run_id: self.run_id,
            parent_run_id: self.parent_run_id,
            child_run_id: self.child_run_id,
            path: self.path.clone(),
            iteration: self.iteration,
            timestamp: self.timestamp,
            payload,
        })
    }

    /// Re-encodes the line tolerantly (unknown parts verbatim), with `\n`.
    /// For a canonical line this equals [`ExchangeEvent::encode_line`].
    pub fn encode_line(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        serde_json::to_writer(&mut *out, self)?;
        out.push(b'\n');
        Ok(())
    }

    /// The step payload, if the payload decoded as one.
    pub fn step(&self) -> Option<&StepPayload> {
        match &self.payload {
            DecodedPayload::Step(p) => Some(p),
            _ => None,
        }
    }

    /// The message payload, if the payload decoded as one.
    pub fn message(&self) -> Option<&DecodedMessage> {
        match &self.payload {
            DecodedPayload::Message(m) => Some(m),
            _ => None,
        }
    }

    /// The tool payload, if the payload decoded as one.
    pub fn tool(&self) -> Option<&ToolPayload> {
        match &self.payload {
            DecodedPayload::Tool(t) => Some(t),
            _ => None,
        }
    }
}

impl DecodedMessage {
    /// The writer-side message, when the role and every block are canonical.
    pub fn to_message(&self) -> Result<MessagePayload, NotCanonical> {
        let role =
            Role::from_wire(&self.role).ok_or_else(|| NotCanonical::Role(self.role.clone()))?;
        let blocks = self
            .blocks
            .iter()
            .enumerate()
            .map(|(index, b)| match b {
                DecodedBlock::Known(b) => Ok(b.clone()),
                DecodedBlock::Unknown(u) => Err(NotCanonical::Block {
                    index,
                    type_name: u.block_type.clone(),
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(MessagePayload {
            role,
            blocks,
            provider: self.provider.clone(),
            model: self.model.clone(),
            usage: self.usage.clone(),
        })
    }

    /// The known blocks, skipping unknown ones.
    pub fn known_blocks(&self) -> impl Iterator<Item = &ContentBlock> {
        self.blocks.iter().filter_map(DecodedBlock::known)
    }
}

impl From<ExchangeEvent> for DecodedEvent {
    fn from(e: ExchangeEvent) -> Self {
        let kind = EventKind::Known(e.event_type());
        let payload = match e.payload {
            Payload::RunStarted(p)
            | Payload::RunCompleted(p)
            | Payload::StepStarted(p)
            | Payload::StepCompleted(p)
            | Payload::CallWorkflowStarted(p)
            | Payload::CallWorkflowCompleted(p) => DecodedPayload::Step(p),
            Payload::MessageUser(m) | Payload::MessageAssistant(m) => {
                DecodedPayload::Message(DecodedMessage {
                    role: m.role.as_str().to_owned(),
                    blocks: m.blocks.into_iter().map(DecodedBlock::Known).collect(),
                    provider: m.provider,
                    model: m.model,
                    usage: m.usage,
                })
            }
            Payload::ToolCall(t) | Payload::ToolResult(t) => DecodedPayload::Tool(t),
            Payload::RunNull(_) => DecodedPayload::Null,
        };
        DecodedEvent {
            seq: e.seq,
            run_id: e.run_id,
            parent_run_id: e.parent_run_id,
            child_run_id: e.child_run_id,
            kind,
            path: e.path,
            iteration: e.iteration,
            timestamp: e.timestamp,
            payload,
        }
    }
}

impl Serialize for DecodedEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 7
            + usize::from(self.parent_run_id.is_some())
            + usize::from(self.child_run_id.is_some());
        let mut s = serializer.serialize_struct("ExchangeEvent", len)?;
        s.serialize_field("seq", &self.seq)?;
        s.serialize_field("run_id", &self.run_id)?;
        if let Some(parent) = &self.parent_run_id {
            s.serialize_field("parent_run_id", parent)?;
        }
        if let Some(child) = &self.child_run_id {
            s.serialize_field("child_run_id", child)?;
        }
        s.serialize_field("type", self.kind.as_str())?;
        s.serialize_field("path", &self.path)?;
        s.serialize_field("iteration", &self.iteration)?;
        s.serialize_field("timestamp", &self.timestamp)?;
        s.serialize_field("payload", &self.payload)?;
        s.end()
    }
}

impl Serialize for DecodedPayload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            DecodedPayload::Null => serializer.serialize_unit(),
            DecodedPayload::Step(p) => p.serialize(serializer),
            DecodedPayload::Message(m) => m.serialize(serializer),
            DecodedPayload::Tool(t) => t.serialize(serializer),
            DecodedPayload::Blocks(b) => b.serialize(serializer),
            DecodedPayload::Raw(r) => r.serialize(serializer),
        }
    }
}

impl Serialize for DecodedMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("role", &self.role)?;
        map.serialize_entry("blocks", &self.blocks)?;
        if let Some(p) = &self.provider {
            map.serialize_entry("provider", p)?;
        }
        if let Some(m) = &self.model {
            map.serialize_entry("model", m)?;
        }
        if let Some(u) = &self.usage {
            map.serialize_entry("usage", u)?;
        }
        map.end()
    }
}

impl Serialize for DecodedBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            DecodedBlock::Known(b) => b.serialize(serializer),
            DecodedBlock::Unknown(u) => u.raw.serialize(serializer),
        }
    }
}
