//! The agent seam: what an agent runner gets ([`AgentRequest`],
//! [`AgentSeam`]) and returns ([`AgentReply`]).
//!
//! The service writes `message.user` (decision 11: the resolved prompt,
//! then the composed system prompt when non-empty, fidelity `router`)
//! before the runner starts. The runner reports each provider turn through
//! [`AgentSeam::assistant`] (`message.assistant`, decision 10 metadata),
//! the agent's own tool calls through [`AgentSeam::agent_tool_call`] /
//! [`AgentSeam::agent_tool_result`] (fidelity `agent_emitted`), and runs
//! tools it executes itself through [`AgentSeam::call_tool`] (the router,
//! fidelity `router`).
//!
//! No double counting (US3), whatever the order of the reports: each call
//! id gets one `tool.call` and one `tool.result`, written by whichever
//! report comes first (the router's when it routes first, the agent's when
//! the runner reports the call before routing it; the tool still runs).
//!
//! Tool allowlist: the service builds each agent's seam with the step's
//! `tools:` ([`AgentSeam::with_offered_tools`]). A call to any other tool,
//! unknown names included, is never executed: it is recorded as a
//! `tool.call` plus a `tool.result` carrying the error, and the runner gets
//! [`ToolError::NotOffered`] to hand back to the model.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use transcript_domain::{
    BlockBody, Clock, Fidelity, MessagePayload, Payload, RawJson, Timestamp, ToolPayload,
};

use crate::provider::AgentProvider;
use crate::tools::{CallScope, Gate, ToolError, ToolRouter};

/// A resolved agent invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRequest {
    /// Step name.
    pub step: String,
    /// The step's provider.
    pub provider: AgentProvider,
    /// Resolved argv (CLI agents).
    pub command: Vec<String>,
    /// Resolved prompt.
    pub prompt: String,
    /// Composed system prompt (empty when none).
    pub system_prompt: String,
    /// Model, when given.
    pub model: Option<String>,
    /// Turn limit for tool loops.
    pub max_turns: Option<u32>,
    /// Router tools offered to the agent (for a CLI preset: what the CLI
    /// may run without asking, see [`crate::preset`]).
    pub tools: Vec<String>,
    /// Resolved extra environment of a CLI agent's process (on top of the
    /// runner's own); endpoint and credentials of a preset go here.
    pub env: BTreeMap<String, String>,
    /// The run's workspace.
    pub workspace: PathBuf,
    /// Directories the runner made for this execution (its MCP wiring, its model endpoint's
    /// files): a confined CLI reads and writes them like its workspace ([`crate::sandbox`]).
    pub private_dirs: Vec<PathBuf>,
    /// Destinations the runner opened for this execution (its MCP proxy): a bounded CLI
    /// reaches them besides its model endpoint and the step's `network:` (#57).
    pub reach: Vec<crate::sandbox::net::Destination>,
}

/// What an agent run produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentReply {
    /// The agent's final answer (`{{steps.NAME.output}}`).
    pub output: String,
    /// Errors the provider reported and the agent survived (e.g. Codex's
    /// "Model metadata ... not found" item): kept in the step's result,
    /// never a failure.
    pub warnings: Vec<String>,
}

/// Why an agent run failed; its text is the step's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The step was cancelled (or timed out) while the agent ran.
    #[error("cancelled")]
    Cancelled,
    /// The agent could not be set up: no command or preset, no normalizer
    /// for the provider, a setting that does not parse, a binary or client
    /// that cannot be started.
    #[error("{0}")]
    Setup(String),
    /// Talking to the agent failed: reading its output, waiting for it, an
    /// HTTP request (the message names the URL).
    #[error("{0}")]
    Transport(String),
    /// The agent's process exited unsuccessfully.
    #[error("agent exited with code {}{}", code.map_or_else(|| "signal".to_owned(), |c| c.to_string()), if reasons.is_empty() { String::new() } else { format!(": {}", reasons.join("; ")) })]
    Exited {
        /// Its exit code (`None` when a signal ended it).
        code: Option<i32>,
        /// Why, in order: the provider's own message, then the tail of
        /// its stderr (each only when there is one).
        reasons: Vec<String>,
    },
    /// The provider reported an error in its output.
    #[error("provider reported an error: {0}")]
    Provider(String),
    /// The answer cannot be used: incomplete, or without a message.
    #[error("{0}")]
    Answer(String),
    /// The agent used its turns without a final answer.
    #[error("turn limit of {0} reached without a final answer")]
    TurnLimit(u32),
    /// Any other failure (for runners outside this crate).
    #[error("{0}")]
    Other(String),
}

/// Runs agents of one provider (or one transport).
#[async_trait]
pub trait AgentRunner: Send + Sync {
    /// Runs the agent, reporting through `seam` as it goes.
    async fn run(&self, request: AgentRequest, seam: &AgentSeam) -> Result<AgentReply, AgentError>;
}

/// Agent runners by provider name, with an optional fallback.
#[derive(Clone, Default)]
pub struct AgentRunners {
    by_provider: BTreeMap<String, Arc<dyn AgentRunner>>,
    fallback: Option<Arc<dyn AgentRunner>>,
}

impl std::fmt::Debug for AgentRunners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRunners")
            .field("providers", &self.by_provider.keys().collect::<Vec<_>>())
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl AgentRunners {
    /// Registers the runner of `provider`.
    pub fn register(&mut self, provider: impl Into<String>, runner: Arc<dyn AgentRunner>) {
        self.by_provider.insert(provider.into(), runner);
    }

    /// Sets the runner used for providers without their own.
    pub fn set_fallback(&mut self, runner: Arc<dyn AgentRunner>) {
        self.fallback = Some(runner);
    }

    /// The runner for `provider`.
    pub fn get(&self, provider: &str) -> Option<&Arc<dyn AgentRunner>> {
        self.by_provider.get(provider).or(self.fallback.as_ref())
    }
}

/// The runner's handle on the transcript and the tools router.
pub struct AgentSeam {
    scope: CallScope,
    router: Arc<ToolRouter>,
    provider: String,
    /// `None`: every router tool (a seam built outside the service).
    offered: Option<BTreeSet<String>>,
    /// Call ids whose `tool.call` is recorded.
    calls: Mutex<HashSet<String>>,
    /// Call ids whose `tool.result` is recorded.
    results: Mutex<HashSet<String>>,
    /// Recorded call ids a router execution has used: a later execution
    /// reusing one gets a fresh id (#28).
    executed: Mutex<HashSet<String>>,
    /// Qualifies provider call ids so they are unique per run file.
    call_prefix: Option<String>,
    /// The step's configured model: recorded on a turn whose provider
    /// reported none.
    configured_model: Option<String>,
    /// The service's clock (`None` for a seam built outside the service).
    clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for AgentSeam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSeam")
            .field("path", &self.scope.path)
            .field("provider", &self.provider)
            .finish()
    }
}

impl AgentSeam {
    /// A seam for the agent step at `scope`.
    pub fn new(scope: CallScope, router: Arc<ToolRouter>, provider: impl Into<String>) -> Self {
        Self {
            scope,
            router,
            provider: provider.into(),
            offered: None,
            calls: Mutex::default(),
            results: Mutex::default(),
            executed: Mutex::default(),
            call_prefix: None,
            configured_model: None,
            clock: None,
        }
    }

    /// The clock a runner reads the time from (the service's, the port
    /// [`crate::ServiceBuilder::clock`] sets): an HTTP agent reads a
    /// `Retry-After` date against it.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The current time by the seam's clock (`None` without one).
    pub fn now(&self) -> Option<Timestamp> {
        self.clock.as_ref().map(|c| c.now())
    }

    /// The model the step names (`model:`), recorded on every assistant
    /// turn whose provider reported no model (Codex's `exec --json`
    /// carries none). A model the provider reported always wins: it is
    /// what actually answered.
    pub fn with_configured_model(mut self, model: Option<String>) -> Self {
        self.configured_model = model;
        self
    }

    /// Records every provider call id as `<prefix>/<id>` (tool events and
    /// tool_use / tool_result blocks alike). Providers number their ids per
    /// execution (Codex: `item_1`, …), so two agent executions in one run
    /// would share ids; the service passes a prefix unique per execution
    /// (`<path>#<iteration>`, see [`crate::service`]), keeping the
    /// provider's id visible after the `/`.
    pub fn with_call_id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.call_prefix = Some(prefix.into());
        self
    }

    /// `call_id` as recorded (qualified when a prefix is set).
    pub fn recorded_call_id(&self, call_id: &str) -> String {
        match &self.call_prefix {
            Some(p) => format!("{p}/{call_id}"),
            None => call_id.to_owned(),
        }
    }

    /// Limits [`AgentSeam::call_tool`] to `tools` (the step's `tools:`);
    /// without it every router tool may be called.
    pub fn with_offered_tools(mut self, tools: impl IntoIterator<Item = String>) -> Self {
        self.offered = Some(tools.into_iter().collect());
        self
    }

    /// Whether the agent may call router tool `name`.
    pub fn offers(&self, name: &str) -> bool {
        self.router.has(name) && self.offered.as_ref().is_none_or(|o| o.contains(name))
    }

    /// What an offered tool does (for the model's function declarations);
    /// `None` when the tool is not offered or says nothing.
    pub fn tool_description(&self, name: &str) -> Option<String> {
        self.offers(name)
            .then(|| self.router.description(name))
            .flatten()
    }

    /// The JSON Schema of an offered tool's input (for the model's
    /// function declarations); `None` when the tool is not offered.
    pub fn tool_parameters(&self, name: &str) -> Option<Value> {
        self.offers(name)
            .then(|| self.router.parameters(name))
            .flatten()
    }

    /// Cancelled when the run is cancelled or the step times out.
    pub fn cancel(&self) -> &CancellationToken {
        &self.scope.cancel
    }

    /// How subprocesses the runner starts are ended and captured.
    pub fn process_limits(&self) -> crate::process::ProcessLimits {
        self.scope.limits.clone()
    }

    /// Writes one `message.assistant` (provider filled in when missing, and
    /// the step's configured model when the provider reported none).
    pub async fn assistant(&self, mut message: MessagePayload) {
        if message.provider.is_none() {
            message.provider = Some(self.provider.clone());
        }
        if message.model.is_none() {
            message.model = self.configured_model.clone();
        }
        if self.call_prefix.is_some() {
            for block in &mut message.blocks {
                match &mut block.body {
                    BlockBody::ToolUse { tool_id, .. } | BlockBody::ToolResult { tool_id, .. } => {
                        *tool_id = self.recorded_call_id(tool_id);
                    }
                    _ => {}
                }
            }
        }
        self.scope
            .emitter
            .emit(&self.scope.path, self.scope.iteration, || {
                Payload::MessageAssistant(message)
            })
            .await;
    }

    /// Records a tool call the agent reported (fidelity `agent_emitted`),
    /// unless a `tool.call` with that id is already recorded (by the router
    /// or an earlier report).
    pub async fn agent_tool_call(&self, name: &str, call_id: &str, input: RawJson) {
        let call_id = self.recorded_call_id(call_id);
        if !claim(&self.calls, &call_id) {
            return;
        }
        self.scope
            .emitter
            .emit(&self.scope.path, self.scope.iteration, || {
                Payload::ToolCall(ToolPayload::call(
                    name,
                    call_id,
                    input,
                    Fidelity::AgentEmitted,
                ))
            })
            .await;
    }

    /// Records the result of an agent-reported call, unless a
    /// `tool.result` with that id is already recorded.
    pub async fn agent_tool_result(
        &self,
        name: &str,
        call_id: &str,
        output: RawJson,
        error: Option<String>,
    ) {
        let call_id = self.recorded_call_id(call_id);
        if !claim(&self.results, &call_id) {
            return;
        }
        self.scope
            .emitter
            .emit(&self.scope.path, self.scope.iteration, || {
                Payload::ToolResult(ToolPayload::result(
                    name,
                    call_id,
                    output,
                    error,
                    Fidelity::AgentEmitted,
                ))
            })
            .await;
    }

    /// Executes an offered tool through the router on the agent's behalf
    /// (recorded at `router` fidelity under `call_id`, each half unless a
    /// report of that id came first). A tool the step does not offer is not
    /// run: the call and a [`ToolError::NotOffered`] result are recorded
    /// and the error returned.
    ///
    /// Every execution is recorded (#28): when `call_id` was already used
    /// by an earlier execution or refusal, or its result is already
    /// recorded (a report that came first), the call is recorded under a
    /// fresh id, `<id>~2`, `<id>~3`, …, with both its `tool.call` and its
    /// `tool.result`. A model reusing an id never runs a tool unrecorded.
    pub async fn call_tool(
        &self,
        name: &str,
        input: Value,
        call_id: Option<String>,
    ) -> Result<Value, ToolError> {
        let refuse = (!self.offers(name)).then(|| ToolError::NotOffered {
            tool: name.to_owned(),
            offered: match &self.offered {
                Some(o) => o.iter().cloned().collect(),
                None => self.router.names(),
            },
        });
        let call_id = call_id.map(|id| self.execution_id(&self.recorded_call_id(&id)));
        // Router-generated ids are fresh: nothing else can claim them.
        let record_call = call_id.as_deref().is_none_or(|id| claim(&self.calls, id));
        let id = call_id.clone();
        let record_result = move || id.as_deref().is_none_or(|id| claim(&self.results, id));
        let gate = Gate {
            refuse,
            record_call,
            record_result: &record_result,
        };
        self.router
            .call_tool_gated(&self.scope, name, input, call_id, gate)
            .await
    }
}

impl AgentSeam {
    /// The id an execution of `recorded` is recorded under: `recorded`
    /// itself the first time (sharing it with an agent's report of the call
    /// that has no result yet), else the first free `recorded~N`.
    fn execution_id(&self, recorded: &str) -> String {
        let mut executed = self.executed.lock().unwrap_or_else(|p| p.into_inner());
        let taken = |id: &str| {
            executed.contains(id) || self.results.lock().map(|r| r.contains(id)).unwrap_or(true)
        };
        let id = if taken(recorded) {
            let mut n = 2u64;
            loop {
                let candidate = format!("{recorded}~{n}");
                let in_calls = self
                    .calls
                    .lock()
                    .map(|c| c.contains(&candidate))
                    .unwrap_or(true);
                if !taken(&candidate) && !in_calls {
                    break candidate;
                }
                n += 1;
            }
        } else {
            recorded.to_owned()
        };
        executed.insert(id.clone());
        id
    }
}

/// Marks `call_id` as recorded in `set`; true when this caller is first.
fn claim(set: &Mutex<HashSet<String>>, call_id: &str) -> bool {
    set.lock()
        .map(|mut s| s.insert(call_id.to_owned()))
        .unwrap_or(true)
}
