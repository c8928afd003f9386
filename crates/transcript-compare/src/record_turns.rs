//! A step's own events read into what a diff and a check compare: its messages as
//! [`TurnRecord`]s and its `tool.*` events as [`ToolCallRecord`]s (a result completes the open
//! call of its id; each call is numbered by the assistant turns before it, so calls made after
//! one turn can be matched as a set).

use serde::Serialize;
use serde_json::Value;
use transcript_domain::{BlockBody, DecodedBlock, DecodedEvent, EventType, Usage};

/// One message of a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnRecord {
    /// `user` or `assistant` (or a newer role, as written).
    pub role: String,
    /// Provider registry name, when reported.
    pub provider: Option<String>,
    /// Model, when reported.
    pub model: Option<String>,
    /// Usage of this request, when reported.
    pub usage: Option<Usage>,
    /// Its content blocks, in order.
    pub blocks: Vec<BlockRecord>,
}

impl TurnRecord {
    /// Whether this is an assistant turn.
    pub fn is_assistant(&self) -> bool {
        self.role == "assistant"
    }
}

/// One content block of a message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockRecord {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning.
    Thinking {
        /// The reasoning text.
        thinking: String,
    },
    /// A tool call the agent made.
    ToolUse {
        /// Tool name.
        name: String,
        /// Call id.
        id: String,
        /// Arguments.
        input: Value,
    },
    /// A tool's result handed back to the agent.
    ToolResult {
        /// The call id it answers.
        id: String,
        /// The result as observed.
        content: Value,
    },
    /// A resolved command.
    Command {
        /// The command.
        command: String,
    },
    /// A stream chunk.
    Stream {
        /// The chunk.
        text: String,
    },
    /// A block of a type this reader does not know, verbatim.
    Unknown {
        /// Its `type` as written.
        block_type: String,
        /// Its JSON.
        raw: Value,
    },
}

impl BlockRecord {
    /// The block's type name (`text`, `tool_use`, …).
    pub fn type_name(&self) -> &str {
        match self {
            BlockRecord::Text { .. } => "text",
            BlockRecord::Thinking { .. } => "thinking",
            BlockRecord::ToolUse { .. } => "tool_use",
            BlockRecord::ToolResult { .. } => "tool_result",
            BlockRecord::Command { .. } => "command",
            BlockRecord::Stream { .. } => "stream",
            BlockRecord::Unknown { block_type, .. } => block_type,
        }
    }

    pub(crate) fn of(block: &DecodedBlock) -> Self {
        let known = match block {
            DecodedBlock::Known(b) => b,
            DecodedBlock::Unknown(u) => {
                return BlockRecord::Unknown {
                    block_type: u.block_type.clone(),
                    raw: u.raw.to_value(),
                };
            }
        };
        match &known.body {
            BlockBody::Text { text } => BlockRecord::Text { text: text.clone() },
            BlockBody::Thinking { thinking } => BlockRecord::Thinking {
                thinking: thinking.clone(),
            },
            BlockBody::ToolUse {
                tool_name,
                tool_id,
                tool_input,
            } => BlockRecord::ToolUse {
                name: tool_name.clone(),
                id: tool_id.clone(),
                input: tool_input.to_value(),
            },
            BlockBody::ToolResult {
                tool_id,
                tool_content,
            } => BlockRecord::ToolResult {
                id: tool_id.clone(),
                content: tool_content.to_value(),
            },
            BlockBody::Command { command } => BlockRecord::Command {
                command: command.clone(),
            },
            BlockBody::Stream { text } => BlockRecord::Stream { text: text.clone() },
        }
    }
}

/// One tool call recorded as `tool.call` / `tool.result` events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// Tool name.
    pub name: String,
    /// Call id.
    pub call_id: String,
    /// `router` (the runner executed it) or `agent_emitted` (the agent reported it).
    pub fidelity: String,
    /// Arguments (`null` when only the result was recorded).
    pub input: Value,
    /// The result's output, once a `tool.result` was recorded.
    pub output: Option<Value>,
    /// The result's error, when the call failed.
    pub error: Option<String>,
    /// Whether a `tool.result` was recorded.
    pub completed: bool,
    /// How many of the step's assistant turns were recorded before the call: the calls of
    /// one turn share it (the diff pairs them as a set).
    pub turn: u64,
}

/// A step's own messages (as turns) and `tool.*` calls (a result completing its open call),
/// each call numbered by the assistant turns before it.
pub(crate) fn turns_and_calls<'e>(
    events: impl IntoIterator<Item = &'e DecodedEvent>,
) -> (Vec<TurnRecord>, Vec<ToolCallRecord>) {
    let mut turns = Vec::new();
    let mut tool_calls: Vec<ToolCallRecord> = Vec::new();
    let mut assistant_turns = 0u64;
    for e in events {
        if let Some(m) = e.message() {
            assistant_turns += u64::from(m.role == "assistant");
            turns.push(TurnRecord {
                role: m.role.clone(),
                provider: m.provider.clone(),
                model: m.model.clone(),
                usage: m.usage.clone(),
                blocks: m.blocks.iter().map(BlockRecord::of).collect(),
            });
        } else if let Some(t) = e.tool() {
            let is_result = e.kind.known() == Some(EventType::ToolResult);
            let open = tool_calls
                .iter_mut()
                .rev()
                .find(|c| c.call_id == t.call_id && !c.completed);
            match (is_result, open) {
                (true, Some(call)) => {
                    call.output = Some(t.output.to_value());
                    call.error = t.error.clone();
                    call.completed = true;
                }
                _ => tool_calls.push(ToolCallRecord {
                    name: t.name.clone(),
                    call_id: t.call_id.clone(),
                    fidelity: t.fidelity.as_str().to_owned(),
                    input: if is_result {
                        Value::Null
                    } else {
                        t.input.to_value()
                    },
                    output: is_result.then(|| t.output.to_value()),
                    error: if is_result { t.error.clone() } else { None },
                    completed: is_result,
                    turn: assistant_turns,
                }),
            }
        }
    }
    (turns, tool_calls)
}
