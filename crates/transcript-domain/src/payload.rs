//! Payload shapes: `StepPayload`, `MessagePayload`, `ToolPayload`, and the
//! writer-side [`Payload`] that ties each to its event type.

use serde::{Deserialize, Deserializer, Serialize};

use crate::block::ContentBlock;
use crate::raw::RawJson;
use crate::vocab::{EventType, Fidelity, Role};

/// Payload of `run.*` and `step.*` events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct StepPayload {
    /// Step name from the workflow, or the workflow name for `run.*`.
    pub name: String,
    /// Step kind (`agent`, `command`, …, a custom type name) or `workflow` for `run.*`.
    pub kind: String,
    /// Failure description on `*.completed`; absent on success. An empty
    /// string reads as absent (Go's `omitempty`).
    #[serde(
        default,
        skip_serializing_if = "is_absent_text",
        deserialize_with = "non_empty_string"
    )]
    pub error: Option<String>,
    /// Kind-dependent result on `*.completed`, verbatim; absent when none.
    /// A present `null` is kept as `Some(null)`, so lines re-encode exactly.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub result: Option<RawJson>,
    /// `run.started` only (decision 16): the workflow file as run, its path and the sha256
    /// of its bytes; absent when unknown (a workflow built in Rust) and on every other event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowSource>,
    /// `run.started` only (decision 16): the run's inputs as an object, an input declared
    /// `secret` written `"***"`; absent when unknown.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub inputs: Option<RawJson>,
    /// `run.started` only (decision 16): the id of the run this run replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// `run.started` only (decision 22, #61): for a trial of a recording (a replay forked at a
    /// step), the step it was forked at as named (`path`, or `path#N` for iteration N): the
    /// root-run steps that started before it in the recording were served from the recording
    /// (not spend), it and the rest ran live. Absent for a plain run or replay; only with
    /// `replay_of`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<String>,
    /// `run.started` only (decision 20, #58): the run's workspace root as an absolute path,
    /// so a replay in another checkout maps the recorded root to its own; absent when
    /// unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// `step.started` only (decision 18, #56): `"off"` when the step's processes run without
    /// the kernel's confinement (`sandbox: off` or `--sandbox off`); absent when confined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// `step.started` only (decision 19, #57): `"all"` when the step's processes use the
    /// host's network (`network: all` or `--network all`); absent when they run in a network
    /// namespace reaching only what the step declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// `step.completed` only (decision 19, #57): the destinations the step's processes tried
    /// to reach and were refused; absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_refused: Option<NetworkRefused>,
}

/// The destinations a step's processes tried and were refused (decision 19): how many
/// distinct `host:port`, and the first of them in the order they were tried (at most 20).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct NetworkRefused {
    /// Distinct destinations refused.
    pub count: u64,
    /// The first of them, `host:port` (`[v6]:port` for an IPv6 address).
    pub first: Vec<String>,
}

/// The workflow file a run ran (decision 16): the path as the runner was given it and the
/// lowercase hex sha256 of the bytes it loaded, so a replay finds the file and knows whether
/// it changed since; and (decision 20, #58) its text, so a replay runs it from any checkout
/// and a diff compares step definitions. A text past [`WORKFLOW_TEXT_MAX`] bytes is not
/// written: `text_omitted_bytes` (its size) stands in for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct WorkflowSource {
    /// The file's path as given to the runner (or, for a `call_workflow` child, as resolved
    /// from its parent's directory).
    pub path: String,
    /// Lowercase hex sha256 of the file's bytes.
    pub sha256: String,
    /// The file's text as loaded (decision 20); absent when too large (see
    /// `text_omitted_bytes`) and in runs recorded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The stub of a text past [`WORKFLOW_TEXT_MAX`] bytes: its size in bytes (the text
    /// itself is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_omitted_bytes: Option<u64>,
}

/// The largest workflow text `run.started` carries (decision 20): 256 KiB. A larger file is
/// recorded by path, sha256 and size only.
pub const WORKFLOW_TEXT_MAX: usize = 256 * 1024;

impl WorkflowSource {
    /// The source of a file shown as `path` whose text is `text`: its sha256, and the text
    /// itself when it is at most [`WORKFLOW_TEXT_MAX`] bytes (else its size).
    pub fn of_text(path: impl Into<String>, sha256: impl Into<String>, text: &str) -> Self {
        let fits = text.len() <= WORKFLOW_TEXT_MAX;
        Self {
            path: path.into(),
            sha256: sha256.into(),
            text: fits.then(|| text.to_owned()),
            text_omitted_bytes: (!fits).then_some(text.len() as u64),
        }
    }
}

impl StepPayload {
    /// The provider an agent step's result names (`{"provider": "<registry name>", …}`: an
    /// imported session's step says which provider produced it, so a step that failed before
    /// any reply still names it); `None` for any other result.
    pub fn result_provider(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Named {
            provider: Option<String>,
        }
        let named: Named = self.result.as_ref()?.parse().ok()?;
        named.provider.filter(|p| !p.is_empty())
    }

    /// A payload with name and kind only (the `*.started` form).
    pub fn new(name: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
            error: None,
            result: None,
            workflow: None,
            inputs: None,
            replay_of: None,
            forked_at: None,
            workspace: None,
            sandbox: None,
            network: None,
            network_refused: None,
        }
    }

    /// Sets the run's provenance (decision 16; `run.started` only): the workflow file, the
    /// inputs (secret ones already masked by the caller) and the run it replays.
    pub fn with_provenance(
        mut self,
        workflow: Option<WorkflowSource>,
        inputs: Option<RawJson>,
        replay_of: Option<String>,
    ) -> Self {
        self.workflow = workflow;
        self.inputs = inputs;
        self.replay_of = replay_of;
        self
    }

    /// Names the step a trial was forked at (decision 22; `run.started` only, with
    /// `replay_of`), or none.
    pub fn with_forked_at(mut self, step: Option<String>) -> Self {
        self.forked_at = step;
        self
    }

    /// Sets the run's workspace root (decision 20; `run.started` only), or none.
    pub fn with_workspace_opt(mut self, workspace: Option<String>) -> Self {
        self.workspace = workspace;
        self
    }

    /// Sets the error (an empty message is treated as no error).
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        let error = error.into();
        self.error = (!error.is_empty()).then_some(error);
        self
    }

    /// Sets the result.
    pub fn with_result(mut self, result: RawJson) -> Self {
        self.result = Some(result);
        self
    }
}

/// Token usage and cost reported by a provider for one turn (decision 10).
/// Every field is omitted when the provider did not report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct Usage {
    /// Input (prompt) tokens, excluding cache reads and writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Tokens written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Of [`Usage::cache_write_tokens`], those written with the 5-minute lifetime, when the
    /// provider reports the split (Anthropic's `cache_creation.ephemeral_5m_input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_5m_tokens: Option<u64>,
    /// Of [`Usage::cache_write_tokens`], those written with the 1-hour lifetime (Anthropic's
    /// `cache_creation.ephemeral_1h_input_tokens`), priced at their own rate. Absent: the
    /// split is unknown and every cache write is priced at the 5-minute rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h_tokens: Option<u64>,
    /// Reasoning tokens (often a subset of output tokens; see the provider row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Cost in US dollars, when the provider reported one. JSON has no NaN
    /// or infinity: a non-finite cost is written as absent.
    #[serde(default, skip_serializing_if = "is_absent_cost")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// Adds `other` field by field (a field set on either side is set).
    pub fn accumulate(&mut self, other: &Usage) {
        fn add(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0).saturating_add(b));
            }
        }
        add(&mut self.input_tokens, other.input_tokens);
        add(&mut self.output_tokens, other.output_tokens);
        add(&mut self.cache_read_tokens, other.cache_read_tokens);
        add(&mut self.cache_write_tokens, other.cache_write_tokens);
        add(&mut self.cache_write_5m_tokens, other.cache_write_5m_tokens);
        add(&mut self.cache_write_1h_tokens, other.cache_write_1h_tokens);
        add(&mut self.reasoning_tokens, other.reasoning_tokens);
        if let Some(c) = other.cost_usd {
            self.cost_usd = Some(crate::money::add_usd(self.cost_usd.unwrap_or(0.0), c));
        }
    }
}

/// Payload of `message.user` and `message.assistant`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct MessagePayload {
    /// `user` or `assistant`.
    pub role: Role,
    /// Ordered content blocks (decision 11).
    pub blocks: Vec<ContentBlock>,
    /// Provider registry name (`claude`, `codex`, …) of an assistant turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name, when the provider reported one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Usage reported for this turn, deduplicated per provider message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The provider's identity of the API request that produced this assistant turn
    /// (decision 17): Claude `<message.id>/<requestId>` (the message id alone when the log has
    /// no request id), OpenAI Responses the response id, Gemini the session file's message
    /// id. Every turn of one request carries the same value; receipts bill one request once
    /// across everything they read by this key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl MessagePayload {
    /// A message with blocks and no agent metadata.
    pub fn new(role: Role, blocks: Vec<ContentBlock>) -> Self {
        Self {
            role,
            blocks,
            provider: None,
            model: None,
            usage: None,
            request_id: None,
        }
    }
}

/// Payload of `tool.call` and `tool.result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
pub struct ToolPayload {
    /// Tool name.
    pub name: String,
    /// Correlation token pairing a call with its result.
    pub call_id: String,
    /// Arguments; `null` on `tool.result` (decision 6).
    #[serde(default)]
    pub input: RawJson,
    /// Return value; `null` on `tool.call` (decision 6).
    #[serde(default)]
    pub output: RawJson,
    /// Failure description on `tool.result`; absent on success.
    #[serde(
        default,
        skip_serializing_if = "is_absent_text",
        deserialize_with = "non_empty_string"
    )]
    pub error: Option<String>,
    /// Who captured the call.
    pub fidelity: Fidelity,
}

impl ToolPayload {
    /// A `tool.call` payload (output `null`).
    pub fn call(
        name: impl Into<String>,
        call_id: impl Into<String>,
        input: RawJson,
        fidelity: Fidelity,
    ) -> Self {
        Self {
            name: name.into(),
            call_id: call_id.into(),
            input,
            output: RawJson::null(),
            error: None,
            fidelity,
        }
    }

    /// A `tool.result` payload (input `null`).
    pub fn result(
        name: impl Into<String>,
        call_id: impl Into<String>,
        output: RawJson,
        error: Option<String>,
        fidelity: Fidelity,
    ) -> Self {
        Self {
            name: name.into(),
            call_id: call_id.into(),
            input: RawJson::null(),
            output,
            error: error.filter(|e| !e.is_empty()),
            fidelity,
        }
    }
}

fn present_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RawJson>, D::Error> {
    RawJson::deserialize(d).map(Some)
}

fn non_empty_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.is_empty()))
}

// An empty `error` reads as absent, so it is written as absent: every line
// decodes back to the payload that wrote it.
#[allow(clippy::ref_option)] // serde's skip_serializing_if passes a reference.
fn is_absent_text(v: &Option<String>) -> bool {
    v.as_deref().is_none_or(str::is_empty)
}

#[allow(clippy::ref_option)] // serde's skip_serializing_if passes a reference.
fn is_absent_cost(v: &Option<f64>) -> bool {
    !v.is_some_and(f64::is_finite)
}

/// The writer-side payload: one variant per event type, so an event type and
/// its payload can never disagree.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// `run.started` (decision 2: name = workflow, kind = `workflow`; our
    /// writer never writes `null` here, readers accept it).
    RunStarted(StepPayload),
    /// `run.completed` (decision 2: `error` on failure or cancellation,
    /// `result` = the workflow's outputs when it has any).
    RunCompleted(StepPayload),
    /// `step.started`.
    StepStarted(StepPayload),
    /// `step.completed`.
    StepCompleted(StepPayload),
    /// `step.call_workflow.started`.
    CallWorkflowStarted(StepPayload),
    /// `step.call_workflow.completed`.
    CallWorkflowCompleted(StepPayload),
    /// `message.user`.
    MessageUser(MessagePayload),
    /// `message.assistant`.
    MessageAssistant(MessagePayload),
    /// `tool.call`.
    ToolCall(ToolPayload),
    /// `tool.result`.
    ToolResult(ToolPayload),
    /// `run.started` / `run.completed` with `"payload": null`, which seed 000 allows for run
    /// lifecycle events. Foreign files hold it and it converts and re-encodes exactly; our own
    /// writers never write it (decision 2: [`crate::EventDraft::validate`] refuses it).
    RunNull(RunEdge),
}

/// Which end of a run a [`Payload::RunNull`] marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunEdge {
    /// `run.started`.
    Started,
    /// `run.completed`.
    Completed,
}

impl Payload {
    /// The event type this payload belongs to.
    pub const fn event_type(&self) -> EventType {
        match self {
            Payload::RunStarted(_) => EventType::RunStarted,
            Payload::RunCompleted(_) => EventType::RunCompleted,
            Payload::StepStarted(_) => EventType::StepStarted,
            Payload::StepCompleted(_) => EventType::StepCompleted,
            Payload::CallWorkflowStarted(_) => EventType::CallWorkflowStarted,
            Payload::CallWorkflowCompleted(_) => EventType::CallWorkflowCompleted,
            Payload::MessageUser(_) => EventType::MessageUser,
            Payload::MessageAssistant(_) => EventType::MessageAssistant,
            Payload::ToolCall(_) => EventType::ToolCall,
            Payload::ToolResult(_) => EventType::ToolResult,
            Payload::RunNull(RunEdge::Started) => EventType::RunStarted,
            Payload::RunNull(RunEdge::Completed) => EventType::RunCompleted,
        }
    }

    /// The step payload of `run.*` / `step.*` events.
    pub fn as_step(&self) -> Option<&StepPayload> {
        match self {
            Payload::RunStarted(p)
            | Payload::RunCompleted(p)
            | Payload::StepStarted(p)
            | Payload::StepCompleted(p)
            | Payload::CallWorkflowStarted(p)
            | Payload::CallWorkflowCompleted(p) => Some(p),
            _ => None,
        }
    }

    /// The message payload of `message.*` events.
    pub fn as_message(&self) -> Option<&MessagePayload> {
        match self {
            Payload::MessageUser(p) | Payload::MessageAssistant(p) => Some(p),
            _ => None,
        }
    }

    /// The tool payload of `tool.*` events.
    pub fn as_tool(&self) -> Option<&ToolPayload> {
        match self {
            Payload::ToolCall(p) | Payload::ToolResult(p) => Some(p),
            _ => None,
        }
    }

    /// Makes the payload equal to what decoding its encoded line gives
    /// back: an empty `error` becomes absent, and so does a non-finite
    /// `cost_usd` (both are written as absent). Writers call it before
    /// encoding so that an event built from a draft and the same event read
    /// back from the file never differ.
    pub fn canonicalize(&mut self) {
        match self {
            Payload::RunStarted(p)
            | Payload::RunCompleted(p)
            | Payload::StepStarted(p)
            | Payload::StepCompleted(p)
            | Payload::CallWorkflowStarted(p)
            | Payload::CallWorkflowCompleted(p) => {
                if is_absent_text(&p.error) {
                    p.error = None;
                }
            }
            Payload::MessageUser(p) | Payload::MessageAssistant(p) => {
                if let Some(usage) = &mut p.usage
                    && is_absent_cost(&usage.cost_usd)
                {
                    usage.cost_usd = None;
                }
            }
            Payload::ToolCall(p) | Payload::ToolResult(p) => {
                if is_absent_text(&p.error) {
                    p.error = None;
                }
            }
            Payload::RunNull(_) => {}
        }
    }

    /// Mutable access to the message payload (used by masking stages).
    pub fn as_message_mut(&mut self) -> Option<&mut MessagePayload> {
        match self {
            Payload::MessageUser(p) | Payload::MessageAssistant(p) => Some(p),
            _ => None,
        }
    }

    /// Mutable access to the tool payload (used by masking stages).
    pub fn as_tool_mut(&mut self) -> Option<&mut ToolPayload> {
        match self {
            Payload::ToolCall(p) | Payload::ToolResult(p) => Some(p),
            _ => None,
        }
    }

    /// Mutable access to the step payload (used by masking stages).
    pub fn as_step_mut(&mut self) -> Option<&mut StepPayload> {
        match self {
            Payload::RunStarted(p)
            | Payload::RunCompleted(p)
            | Payload::StepStarted(p)
            | Payload::StepCompleted(p)
            | Payload::CallWorkflowStarted(p)
            | Payload::CallWorkflowCompleted(p) => Some(p),
            _ => None,
        }
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::RunStarted(p)
            | Payload::RunCompleted(p)
            | Payload::StepStarted(p)
            | Payload::StepCompleted(p)
            | Payload::CallWorkflowStarted(p)
            | Payload::CallWorkflowCompleted(p) => p.serialize(serializer),
            Payload::MessageUser(p) | Payload::MessageAssistant(p) => p.serialize(serializer),
            Payload::ToolCall(p) | Payload::ToolResult(p) => p.serialize(serializer),
            Payload::RunNull(_) => serializer.serialize_unit(),
        }
    }
}
