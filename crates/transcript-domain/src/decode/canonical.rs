//! Back to the writer side (`to_event`), and the tolerant re-encoding of decoded lines.

use super::*;

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
            request_id: self.request_id.clone(),
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
                    request_id: m.request_id,
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
        if let Some(r) = &self.request_id {
            map.serialize_entry("request_id", r)?;
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
