//! The tools router: one [`ToolRouter::call_tool`] seam for operation steps
//! and agents, builtin tools confined to the run's workspace
//! ([`crate::builtins`]), and plugins
//! (Rust [`Plugin`]s and external NDJSON plugins, see [`crate::plugin`]).
//!
//! Every call emits `tool.call` (output `null`) before the tool runs and
//! `tool.result` (input `null`, decision 6) after it, with the same
//! `call_id`, fidelity `router`, at the path and iteration of the calling
//! step (decision 5). Tools are never modified to be observed: capture
//! happens at this boundary (NFR-003).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use transcript_domain::{Fidelity, Payload, RawJson, ToolPayload};

use crate::catch_unwind::CatchUnwind;
use crate::emit::Emitter;
use crate::process::ProcessLimits;

pub use crate::tool::{Plugin, Tool, ToolContext, any_object};
pub use crate::tool_error::ToolError;

pub use crate::builtins::{
    ListDir, ReadFile, RunCommand, SHELL_TOOL, ShellOutput, WriteFile, run_argv, run_shell,
};
pub use crate::process::{run_argv_with, run_shell_with};

struct PluginTool {
    plugin: Arc<dyn Plugin>,
    operation: String,
}

#[async_trait]
impl Tool for PluginTool {
    fn parameters(&self) -> Value {
        self.plugin.parameters(&self.operation)
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        self.plugin.call(&self.operation, ctx, input).await
    }
}

/// Where a call happens: the run's emitter, the calling step's location
/// and workspace, and the cancellation of the step.
#[derive(Debug, Clone)]
pub struct CallScope {
    /// The run's transcript emitter.
    pub emitter: Emitter,
    /// Path of the step during which the tool runs (decision 5).
    pub path: String,
    /// Its iteration.
    pub iteration: u64,
    /// The run's workspace directory.
    pub workspace: PathBuf,
    /// Cancellation of the calling step.
    pub cancel: CancellationToken,
    /// Counter for router-generated call ids (shared per run).
    pub call_counter: Arc<AtomicU64>,
    /// How subprocesses started for the call are ended and captured.
    pub limits: ProcessLimits,
}

impl CallScope {
    /// A scope with a fresh call counter.
    pub fn new(
        emitter: Emitter,
        path: impl Into<String>,
        iteration: u64,
        workspace: PathBuf,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            emitter,
            path: path.into(),
            iteration,
            workspace,
            cancel,
            call_counter: Arc::default(),
            limits: ProcessLimits::default(),
        }
    }

    fn next_call_id(&self) -> String {
        let n = self.call_counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("router-{n}")
    }
}

/// The tools router.
#[derive(Clone, Default)]
pub struct ToolRouter {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRouter")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRouter {
    /// A router without tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// A router with the builtin tools `read_file`, `write_file`,
    /// `list_dir` and `run_command`.
    pub fn with_builtins() -> Self {
        let mut r = Self::new();
        r.register("read_file", Arc::new(ReadFile));
        r.register("write_file", Arc::new(WriteFile));
        r.register("list_dir", Arc::new(ListDir));
        r.register(SHELL_TOOL, Arc::new(RunCommand));
        r
    }

    /// Registers (or replaces) a tool.
    pub fn register(&mut self, name: impl Into<String>, tool: Arc<dyn Tool>) {
        self.tools.insert(name.into(), tool);
    }

    /// Registers each operation of a plugin as a tool of the same name.
    /// Fails without registering anything if a name is already taken.
    pub fn register_plugin(&mut self, plugin: Arc<dyn Plugin>) -> Result<(), ToolError> {
        let ops = plugin.operations();
        if let Some(taken) = ops.iter().find(|op| self.tools.contains_key(*op)) {
            return Err(ToolError::Plugin {
                plugin: plugin.name().to_owned(),
                message: format!("operation '{taken}' is already a registered tool"),
            });
        }
        for op in ops {
            self.tools.insert(
                op.clone(),
                Arc::new(PluginTool {
                    plugin: plugin.clone(),
                    operation: op,
                }),
            );
        }
        Ok(())
    }

    /// Whether `name` is registered.
    pub fn has(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// What tool `name` does, if registered and described.
    pub fn description(&self, name: &str) -> Option<String> {
        self.tools.get(name).and_then(|t| t.description())
    }

    /// The input schema of tool `name`, if registered.
    pub fn parameters(&self, name: &str) -> Option<Value> {
        self.tools.get(name).map(|t| t.parameters())
    }

    /// Registered tool names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// The seam: emits `tool.call`, runs the tool (panics caught,
    /// cancellation observed: a cancelled call keeps the kill grace to end
    /// what it started, see [`CANCEL_MARGIN`]), emits `tool.result`. `call_id` is the
    /// model's id for agent-driven calls, else the router generates one.
    pub async fn call_tool(
        &self,
        scope: &CallScope,
        name: &str,
        input: Value,
        call_id: Option<String>,
    ) -> Result<Value, ToolError> {
        let gate = Gate {
            refuse: None,
            record_call: true,
            record_result: &|| true,
        };
        self.call_tool_gated(scope, name, input, call_id, gate)
            .await
    }

    /// [`ToolRouter::call_tool`] with the agent seam's controls: a refusal
    /// recorded in place of running the tool, and whether the call and the
    /// result are still to be recorded (another report may have claimed the
    /// call id first).
    pub(crate) async fn call_tool_gated(
        &self,
        scope: &CallScope,
        name: &str,
        input: Value,
        call_id: Option<String>,
        gate: Gate<'_>,
    ) -> Result<Value, ToolError> {
        let call_id = call_id.unwrap_or_else(|| scope.next_call_id());
        if gate.record_call {
            scope
                .emitter
                .emit(&scope.path, scope.iteration, || {
                    Payload::ToolCall(ToolPayload::call(
                        name,
                        call_id.clone(),
                        RawJson::from_value(&input).unwrap_or_default(),
                        Fidelity::Router,
                    ))
                })
                .await;
        }
        let result = match (gate.refuse, self.tools.get(name)) {
            (Some(refusal), _) => Err(refusal),
            (None, None) => Err(ToolError::UnknownTool(name.to_owned())),
            (None, Some(tool)) => {
                let ctx = ToolContext {
                    workspace: scope.workspace.clone(),
                    cancel: scope.cancel.clone(),
                    call_id: call_id.clone(),
                    limits: scope.limits.clone(),
                };
                let fut = CatchUnwind::new(tool.call(&ctx, input));
                run_to_cancellation(fut, &scope.cancel, scope.limits.kill_grace).await
            }
        };
        if !(gate.record_result)() {
            return result;
        }
        scope
            .emitter
            .emit(&scope.path, scope.iteration, || {
                let (output, error) = match &result {
                    Ok(v) => (RawJson::from_value(v).unwrap_or_default(), None),
                    Err(e) => (
                        RawJson::from_value(&e.output()).unwrap_or_default(),
                        Some(e.to_string()),
                    ),
                };
                Payload::ToolResult(ToolPayload::result(
                    name,
                    call_id.clone(),
                    output,
                    error,
                    Fidelity::Router,
                ))
            })
            .await;
        result
    }
}

/// Time a cancelled tool has, beyond its kill grace, to return after ending
/// what it started (the `SIGKILL` and the reaping after the grace).
pub const CANCEL_MARGIN: Duration = Duration::from_secs(1);

/// Runs a tool call until it returns; once `cancel` fires, the call is not
/// dropped at once (that would skip the kill grace of the processes it
/// started, or cut a plugin request mid-line) but given `grace` plus
/// [`CANCEL_MARGIN`] to observe the cancellation (its [`ToolContext::cancel`])
/// and end what it started; a tool that ignores it is dropped then. A
/// cancelled call is [`ToolError::Cancelled`] whatever it returned.
async fn run_to_cancellation(
    fut: CatchUnwind<'_, Result<Value, ToolError>>,
    cancel: &CancellationToken,
    grace: Duration,
) -> Result<Value, ToolError> {
    let mut fut = std::pin::pin!(fut);
    let finished = tokio::select! {
        r = &mut fut => Some(r),
        _ = cancel.cancelled() => None,
    };
    match finished {
        Some(r) => r.unwrap_or_else(|p| Err(ToolError::Panicked(p))),
        None => {
            let _ = tokio::time::timeout(grace + CANCEL_MARGIN, fut).await;
            Err(ToolError::Cancelled)
        }
    }
}

/// How [`ToolRouter::call_tool_gated`] records and whether it runs.
pub(crate) struct Gate<'a> {
    /// Record this error instead of running the tool.
    pub(crate) refuse: Option<ToolError>,
    /// Record `tool.call`.
    pub(crate) record_call: bool,
    /// Asked once the tool finished: record `tool.result`?
    pub(crate) record_result: &'a (dyn Fn() -> bool + Send + Sync),
}
