//! The versioned JSON export document (`schema_version` 1.x).
//!
//! Readers of this document must accept unknown fields and unknown block
//! types within the same major version: every struct ignores unknown fields
//! and [`ExportBlock::Unknown`] absorbs block types added later.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use transcript_domain::{Fidelity, Role, Usage};

/// The schema version this crate writes.
pub const SCHEMA_VERSION: &str = "1.2.0";

/// One exported run with its child runs, step tree and content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExportDocument {
    /// Semver of this document's schema; readers accept any `1.x`.
    pub schema_version: String,
    /// What produced the document.
    pub generator: String,
    /// Options that shaped the content.
    pub options: ExportOptionsRecord,
    /// The root run.
    pub run: RunExport,
    /// Costs, when the document was priced (1.1: absent in an unpriced document, and then
    /// no `cost_usd` of a run, step or message is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostSummary>,
}

/// The costs of a priced document: per model and in total, over the root run and its child
/// runs, priced per turn with one price table (the receipts' rule: one request, one bill,
/// each turn under its own model, else its step's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostSummary {
    /// The price table used (e.g. `LiteLLM 1.110.2`, or the file given).
    pub price_table: String,
    /// Cost of every billed turn; `null` when a turn's model has no price (never $0).
    pub total_usd: Option<f64>,
    /// What the agent CLIs reported themselves (`total_cost_usd`), summed; `null` when none
    /// did. It may differ from the priced figure (their own price table, cache-write
    /// durations, helper-model calls that are not messages).
    pub reported_usd: Option<f64>,
    /// Usage and cost per model, sorted by model.
    pub by_model: Vec<ModelCost>,
    /// Models of billed turns the table has no price for (sorted).
    pub unpriced_models: Vec<String>,
}

/// Usage and cost of one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelCost {
    /// The model (`(none)` for turns whose step names none either).
    pub model: String,
    /// Turns that reported usage.
    pub turns: u64,
    /// Their summed usage.
    #[schemars(with = "UsageSchema")]
    pub usage: Usage,
    /// Their cost; `null` when the table has no price for the model.
    pub cost_usd: Option<f64>,
}

/// The options recorded in a document, so a reader knows what was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExportOptionsRecord {
    /// Whether thinking blocks were kept.
    pub reasoning_included: bool,
    /// The byte limit tool inputs and outputs were truncated to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate_outputs_bytes: Option<usize>,
    /// Whether content was masked.
    #[serde(default)]
    pub redacted: bool,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunExport {
    /// Run id.
    pub run_id: String,
    /// Parent run id, for a child run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// Workflow name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// `succeeded`, `failed` or `incomplete`.
    pub status: String,
    /// RFC 3339 start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// RFC 3339 completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// Milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Run error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Run result (workflow outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Total usage of the run's assistant turns (this run only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<UsageSchema>")]
    pub usage: Option<Usage>,
    /// Priced cost of the run's agent steps (this run only; absent when unpriced or when a
    /// turn's model has no price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Top-level steps.
    pub steps: Vec<StepExport>,
    /// Messages and tool calls at run level (outside any step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<Entry>,
    /// Inconsistencies found while rebuilding the tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// One step execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepExport {
    /// Dot-separated path.
    pub path: String,
    /// Step name.
    pub name: String,
    /// Step kind.
    pub kind: String,
    /// Loop iteration.
    pub iteration: u64,
    /// `succeeded`, `failed` or `incomplete`.
    pub status: String,
    /// RFC 3339 start.
    pub started_at: String,
    /// RFC 3339 completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// Milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Step error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Step result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Usage of this step's assistant turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<UsageSchema>")]
    pub usage: Option<Usage>,
    /// The destinations its processes tried and were refused (decision 19, #57; 1.2: absent
    /// when none was, and in documents of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<NetworkRefusedSchema>")]
    pub network_refused: Option<transcript_domain::NetworkRefused>,
    /// Priced cost of this step's own turns (absent when unpriced or when a turn's model has
    /// no price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Messages and tool calls of this step, in seq order.
    #[serde(default)]
    pub entries: Vec<Entry>,
    /// Nested steps.
    #[serde(default)]
    pub steps: Vec<StepExport>,
    /// The child run of a `call_workflow` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_run: Option<Box<RunExport>>,
    /// The child run id when its file was not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<String>,
}

/// A message or a tool call, in seq order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum Entry {
    /// A `message.user` or `message.assistant`.
    Message(MessageExport),
    /// A `tool.call` with its `tool.result`.
    ToolCall(ToolCallExport),
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageExport {
    /// Seq of the event.
    pub seq: u64,
    /// `user` or `assistant`.
    pub role: String,
    /// RFC 3339 time.
    pub timestamp: String,
    /// Provider name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Usage of this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<UsageSchema>")]
    pub usage: Option<Usage>,
    /// Priced cost of this turn (absent when unpriced or when its model has no price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The provider's identity of the request this turn answered (wire decision 17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Typed content blocks.
    pub blocks: Vec<ExportBlock>,
}

impl MessageExport {
    /// The role as a kind: `None` for a role newer than this crate (kept as written in
    /// [`MessageExport::role`]).
    pub fn role_kind(&self) -> Option<Role> {
        Role::from_wire(&self.role)
    }
}

/// A typed content block. Block types added in later 1.x versions read as
/// [`ExportBlock::Unknown`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExportBlock {
    /// Text.
    Text {
        /// `router` or `agent_emitted`.
        fidelity: String,
        /// The text.
        text: String,
    },
    /// Reasoning.
    Thinking {
        /// Fidelity.
        fidelity: String,
        /// The reasoning text.
        thinking: String,
    },
    /// A tool invocation inside a message.
    ToolUse {
        /// Fidelity.
        fidelity: String,
        /// Tool name.
        tool_name: String,
        /// Correlation id.
        tool_id: String,
        /// Arguments (possibly a truncation stub).
        tool_input: Value,
    },
    /// A tool output inside a message.
    ToolResult {
        /// Fidelity.
        fidelity: String,
        /// Correlation id.
        tool_id: String,
        /// Output (possibly a truncation stub).
        tool_content: Value,
    },
    /// A shell command.
    Command {
        /// Fidelity.
        fidelity: String,
        /// The command.
        command: String,
    },
    /// A stream chunk.
    Stream {
        /// Fidelity.
        fidelity: String,
        /// The chunk.
        text: String,
    },
    /// A block the transcript itself did not know, kept as recorded.
    Other {
        /// The block's `type` in the transcript.
        original_type: String,
        /// The block as recorded.
        raw: Value,
    },
    /// A block type added by a later 1.x writer; a reader of this version
    /// skips its content.
    #[serde(other)]
    Unknown,
}

/// A tool call paired with its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallExport {
    /// Seq of the `tool.call` event (or of the result when the call is missing).
    pub seq: u64,
    /// Correlation id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// `router` or `agent_emitted`.
    pub fidelity: String,
    /// Arguments (possibly a truncation stub).
    pub input: Value,
    /// Output (possibly a truncation stub); `null` when no result was recorded.
    pub output: Value,
    /// Error of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether a result was recorded.
    pub completed: bool,
    /// RFC 3339 call time.
    pub started_at: String,
    /// RFC 3339 result time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

impl ToolCallExport {
    /// The fidelity as a kind: `None` for one newer than this crate (kept as written in
    /// [`ToolCallExport::fidelity`]).
    pub fn fidelity_kind(&self) -> Option<Fidelity> {
        Fidelity::from_wire(&self.fidelity)
    }
}

/// Schema stand-in for [`transcript_domain::NetworkRefused`] (decision 19).
#[derive(Serialize, JsonSchema)]
#[allow(dead_code)]
pub struct NetworkRefusedSchema {
    /// Distinct destinations refused.
    count: u64,
    /// The first of them (at most 20), `host:port`.
    first: Vec<String>,
}

/// Schema stand-in for [`transcript_domain::Usage`] (decision 10 fields;
/// each omitted when not reported).
#[derive(Serialize, JsonSchema)]
#[allow(dead_code)]
pub struct UsageSchema {
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_read_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_write_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_usd: Option<f64>,
}

/// The JSON Schema (draft 2020-12) of [`ExportDocument`].
pub fn export_schema() -> Value {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<ExportDocument>()
        .to_value()
}
