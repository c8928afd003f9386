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
//! fidelity `router`). A call id the router executed is never recorded
//! again at `agent_emitted` fidelity (US3: no double counting).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use transcript_domain::{Fidelity, MessagePayload, Payload, RawJson, ToolPayload};

use crate::tools::{CallScope, ToolError, ToolRouter};

/// A resolved agent invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRequest {
    /// Step name.
    pub step: String,
    /// Provider registry name.
    pub provider: String,
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
    /// Router tools offered to the agent.
    pub tools: Vec<String>,
    /// The run's workspace.
    pub workspace: PathBuf,
}

/// What an agent run produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentReply {
    /// The agent's final answer (`{{steps.NAME.output}}`).
    pub output: String,
}

/// Why an agent run failed (non-zero exit, stderr, timeout, protocol…).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AgentError(pub String);

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
    routed: Mutex<HashSet<String>>,
    agent_calls: Mutex<HashSet<String>>,
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
            routed: Mutex::default(),
            agent_calls: Mutex::default(),
        }
    }

    /// Cancelled when the run is cancelled or the step times out.
    pub fn cancel(&self) -> &CancellationToken {
        &self.scope.cancel
    }

    /// Writes one `message.assistant` (provider filled in when missing).
    pub async fn assistant(&self, mut message: MessagePayload) {
        if message.provider.is_none() {
            message.provider = Some(self.provider.clone());
        }
        self.scope
            .emitter
            .emit(&self.scope.path, self.scope.iteration, || {
                Payload::MessageAssistant(message)
            })
            .await;
    }

    /// Records a tool call the agent reported (fidelity `agent_emitted`),
    /// unless the router executed that call id or it was already recorded.
    pub async fn agent_tool_call(&self, name: &str, call_id: &str, input: RawJson) {
        if self.is_routed(call_id) || !self.first_agent_call(call_id) {
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

    /// Records the result of an agent-reported call (same rules).
    pub async fn agent_tool_result(
        &self,
        name: &str,
        call_id: &str,
        output: RawJson,
        error: Option<String>,
    ) {
        if self.is_routed(call_id) {
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

    /// Executes a tool through the router on the agent's behalf
    /// (recorded at `router` fidelity under `call_id`).
    pub async fn call_tool(
        &self,
        name: &str,
        input: Value,
        call_id: Option<String>,
    ) -> Result<Value, ToolError> {
        if let (Some(id), Ok(mut routed)) = (&call_id, self.routed.lock()) {
            routed.insert(id.clone());
        }
        self.router
            .call_tool(&self.scope, name, input, call_id)
            .await
    }

    fn is_routed(&self, call_id: &str) -> bool {
        self.routed
            .lock()
            .map(|r| r.contains(call_id))
            .unwrap_or(false)
    }

    fn first_agent_call(&self, call_id: &str) -> bool {
        self.agent_calls
            .lock()
            .map(|mut c| c.insert(call_id.to_owned()))
            .unwrap_or(true)
    }
}
