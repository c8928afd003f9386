//! Content blocks: the typed content of message payloads.

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::raw::RawJson;
use crate::vocab::{BlockType, Fidelity};

/// One typed block of agent exchange content.
///
/// The body is an enum per block type, so a block cannot carry fields of
/// another type. On the wire it is 000's flat object: `type`, `fidelity`,
/// then the active fields of its type (always written, even when empty);
/// fields of other types never appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentBlock {
    /// Who produced the block.
    pub fidelity: Fidelity,
    /// The typed content.
    pub body: BlockBody,
}

/// The type-specific content of a [`ContentBlock`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockBody {
    /// `text`: verbatim text (NUL bytes preserved).
    Text {
        /// The text.
        text: String,
    },
    /// `thinking`: verbatim reasoning output.
    Thinking {
        /// The reasoning text.
        thinking: String,
    },
    /// `tool_use`: a tool invocation reported inside a message.
    ToolUse {
        /// Tool name as advertised by the provider.
        tool_name: String,
        /// Correlation token linking it to its `tool_result` block.
        tool_id: String,
        /// Arguments, verbatim.
        tool_input: RawJson,
    },
    /// `tool_result`: a tool's output inside a message.
    ToolResult {
        /// The `tool_id` of the `tool_use` block it answers.
        tool_id: String,
        /// Output as observed: a string, structured value, or `null`.
        tool_content: RawJson,
    },
    /// `command`: a resolved shell command.
    Command {
        /// The command string after template interpolation.
        command: String,
    },
    /// `stream`: one provider stream chunk, carried in `text` (decision 1).
    Stream {
        /// The chunk.
        text: String,
    },
}

impl BlockBody {
    /// The block type of this body.
    pub const fn block_type(&self) -> BlockType {
        match self {
            BlockBody::Text { .. } => BlockType::Text,
            BlockBody::Thinking { .. } => BlockType::Thinking,
            BlockBody::ToolUse { .. } => BlockType::ToolUse,
            BlockBody::ToolResult { .. } => BlockType::ToolResult,
            BlockBody::Command { .. } => BlockType::Command,
            BlockBody::Stream { .. } => BlockType::Stream,
        }
    }
}

impl ContentBlock {
    /// The block type.
    pub const fn block_type(&self) -> BlockType {
        self.body.block_type()
    }

    /// A `text` block.
    pub fn text(fidelity: Fidelity, text: impl Into<String>) -> Self {
        Self {
            fidelity,
            body: BlockBody::Text { text: text.into() },
        }
    }

    /// A `thinking` block.
    pub fn thinking(fidelity: Fidelity, thinking: impl Into<String>) -> Self {
        Self {
            fidelity,
            body: BlockBody::Thinking {
                thinking: thinking.into(),
            },
        }
    }

    /// A `tool_use` block.
    pub fn tool_use(
        fidelity: Fidelity,
        tool_name: impl Into<String>,
        tool_id: impl Into<String>,
        tool_input: RawJson,
    ) -> Self {
        Self {
            fidelity,
            body: BlockBody::ToolUse {
                tool_name: tool_name.into(),
                tool_id: tool_id.into(),
                tool_input,
            },
        }
    }

    /// A `tool_result` block.
    pub fn tool_result(
        fidelity: Fidelity,
        tool_id: impl Into<String>,
        tool_content: RawJson,
    ) -> Self {
        Self {
            fidelity,
            body: BlockBody::ToolResult {
                tool_id: tool_id.into(),
                tool_content,
            },
        }
    }

    /// A `command` block.
    pub fn command(fidelity: Fidelity, command: impl Into<String>) -> Self {
        Self {
            fidelity,
            body: BlockBody::Command {
                command: command.into(),
            },
        }
    }

    /// A `stream` block.
    pub fn stream(fidelity: Fidelity, chunk: impl Into<String>) -> Self {
        Self {
            fidelity,
            body: BlockBody::Stream { text: chunk.into() },
        }
    }

    /// The textual content of text, thinking, command and stream blocks.
    pub fn as_text(&self) -> Option<&str> {
        match &self.body {
            BlockBody::Text { text } | BlockBody::Stream { text } => Some(text),
            BlockBody::Thinking { thinking } => Some(thinking),
            BlockBody::Command { command } => Some(command),
            BlockBody::ToolUse { .. } | BlockBody::ToolResult { .. } => None,
        }
    }

    /// The `tool_id` of tool_use and tool_result blocks.
    pub fn tool_id(&self) -> Option<&str> {
        match &self.body {
            BlockBody::ToolUse { tool_id, .. } | BlockBody::ToolResult { tool_id, .. } => {
                Some(tool_id)
            }
            _ => None,
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = match &self.body {
            BlockBody::ToolUse { .. } => 5,
            BlockBody::ToolResult { .. } => 4,
            _ => 3,
        };
        let mut map = serializer.serialize_map(Some(fields))?;
        map.serialize_entry("type", self.block_type().as_str())?;
        map.serialize_entry("fidelity", &self.fidelity)?;
        match &self.body {
            BlockBody::Text { text } | BlockBody::Stream { text } => {
                map.serialize_entry("text", text)?
            }
            BlockBody::Thinking { thinking } => map.serialize_entry("thinking", thinking)?,
            BlockBody::ToolUse {
                tool_name,
                tool_id,
                tool_input,
            } => {
                map.serialize_entry("tool_name", tool_name)?;
                map.serialize_entry("tool_id", tool_id)?;
                map.serialize_entry("tool_input", tool_input)?;
            }
            BlockBody::ToolResult {
                tool_id,
                tool_content,
            } => {
                map.serialize_entry("tool_id", tool_id)?;
                map.serialize_entry("tool_content", tool_content)?;
            }
            BlockBody::Command { command } => map.serialize_entry("command", command)?,
        }
        map.end()
    }
}
