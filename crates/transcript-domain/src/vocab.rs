//! The closed vocabularies of the wire contract: event types, block types,
//! fidelity and message roles.

use std::fmt;

macro_rules! closed_vocabulary {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident => $wire:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value of the vocabulary, in wire-contract order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant ),+ ];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $( $name::$variant => $wire ),+ }
            }

            /// Looks up a wire spelling; `None` for a value outside the vocabulary.
            pub fn from_wire(text: &str) -> Option<Self> {
                match text { $( $wire => Some($name::$variant), )+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // A visitor, not `Cow<str>::deserialize`: serde's `Cow` always allocates an
                // owned String (2.5% of the tolerant reader's instructions, #29).
                struct WireName;
                impl serde::de::Visitor<'_> for WireName {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<$name, E> {
                        $name::from_wire(text).ok_or_else(|| {
                            E::custom(format_args!(
                                concat!("unknown ", stringify!($name), " {:?}"), text
                            ))
                        })
                    }
                }
                d.deserialize_str(WireName)
            }
        }
    };
}

closed_vocabulary! {
    /// The ten event types. Writers never emit anything else; readers keep
    /// unknown types (see [`crate::EventKind`]).
    EventType {
        /// A workflow run begins.
        RunStarted => "run.started",
        /// A workflow run ends.
        RunCompleted => "run.completed",
        /// A step begins (every kind but `call_workflow`).
        StepStarted => "step.started",
        /// A step ends, successfully or not.
        StepCompleted => "step.completed",
        /// The parent starts a sub-workflow; the envelope carries `child_run_id`.
        CallWorkflowStarted => "step.call_workflow.started",
        /// The parent observes the sub-workflow's completion.
        CallWorkflowCompleted => "step.call_workflow.completed",
        /// The resolved prompt (and system prompt) sent to an agent.
        MessageUser => "message.user",
        /// One provider turn of an agent's reply.
        MessageAssistant => "message.assistant",
        /// A tool invocation begins.
        ToolCall => "tool.call",
        /// A tool invocation completes.
        ToolResult => "tool.result",
    }
}

closed_vocabulary! {
    /// The six content block types.
    BlockType {
        /// Plain text.
        Text => "text",
        /// Reasoning output.
        Thinking => "thinking",
        /// A tool invocation inside a message.
        ToolUse => "tool_use",
        /// A tool's output inside a message.
        ToolResult => "tool_result",
        /// A shell command executed by a step.
        Command => "command",
        /// A provider stream chunk (reserved for partial-output replay).
        Stream => "stream",
    }
}

closed_vocabulary! {
    /// Who produced a block or tool event.
    Fidelity {
        /// Synthesized at the tools router seam: authoritative for in-process calls.
        Router => "router",
        /// Reported by the agent itself (its stream output).
        AgentEmitted => "agent_emitted",
    }
}

closed_vocabulary! {
    /// The role of a message payload.
    Role {
        /// The prompt side (`message.user`).
        User => "user",
        /// The agent side (`message.assistant`).
        Assistant => "assistant",
    }
}

impl EventType {
    /// Which payload a known event type carries (decision 14's type direction).
    pub const fn payload_kind(self) -> PayloadKind {
        match self {
            EventType::RunStarted | EventType::RunCompleted => PayloadKind::StepOrNull,
            EventType::StepStarted
            | EventType::StepCompleted
            | EventType::CallWorkflowStarted
            | EventType::CallWorkflowCompleted => PayloadKind::Step,
            EventType::MessageUser | EventType::MessageAssistant => PayloadKind::Message,
            EventType::ToolCall | EventType::ToolResult => PayloadKind::Tool,
        }
    }
}

/// The payload family an event type is dispatched to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadKind {
    /// `StepPayload` or `null` (`run.*`).
    StepOrNull,
    /// `StepPayload` (`step.*`).
    Step,
    /// `MessagePayload` (`message.*`).
    Message,
    /// `ToolPayload` (`tool.*`).
    Tool,
}

impl fmt::Display for PayloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PayloadKind::StepOrNull => "StepPayload or null",
            PayloadKind::Step => "StepPayload",
            PayloadKind::Message => "MessagePayload",
            PayloadKind::Tool => "ToolPayload",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_are_exactly_the_wire_contract() {
        let events: Vec<_> = EventType::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(
            events,
            [
                "run.started",
                "run.completed",
                "step.started",
                "step.completed",
                "step.call_workflow.started",
                "step.call_workflow.completed",
                "message.user",
                "message.assistant",
                "tool.call",
                "tool.result"
            ]
        );
        let blocks: Vec<_> = BlockType::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(
            blocks,
            [
                "text",
                "thinking",
                "tool_use",
                "tool_result",
                "command",
                "stream"
            ]
        );
        assert_eq!(Fidelity::ALL.len(), 2);
        for e in EventType::ALL {
            assert_eq!(EventType::from_wire(e.as_str()), Some(*e));
        }
        assert_eq!(EventType::from_wire("step.retried"), None);
        assert_eq!(BlockType::from_wire("image"), None);
    }

    #[test]
    fn serde_rejects_values_outside_the_vocabulary() {
        assert!(serde_json::from_str::<Fidelity>("\"proxy\"").is_err());
        assert_eq!(
            serde_json::from_str::<Fidelity>("\"agent_emitted\"").unwrap(),
            Fidelity::AgentEmitted
        );
        assert_eq!(serde_json::to_string(&Role::User).unwrap(), "\"user\"");
    }
}
