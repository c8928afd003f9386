//! [`ServiceBuilder`]: the service's configuration (workspace, recorder
//! factory, clock, observers, router, custom steps, agent runners, limits)
//! and the shared state every run of a built service reads.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use transcript_domain::{Clock, ManualClock, Recorder, RecorderFactory, RunIdGenerator, Timestamp};

use super::{ExecError, ExecutionService};
use crate::agent::{AgentRunner, AgentRunners};
use crate::audit::{AuditTrail, DisplaySink, Observers, TextMask};
use crate::custom::{CustomStep, CustomSteps};
use crate::process::ProcessLimits;
use crate::tools::ToolRouter;

/// What every run of a built service shares.
pub(super) struct Inner {
    pub(super) workspace: PathBuf,
    pub(super) deterministic: bool,
    pub(super) recorder_factory: Option<Arc<dyn RecorderFactory>>,
    pub(super) run_ids: Arc<dyn RunIdGenerator>,
    pub(super) observers: Observers,
    pub(super) router: Arc<ToolRouter>,
    pub(super) custom: CustomSteps,
    pub(super) agents: AgentRunners,
    pub(super) max_call_depth: usize,
    pub(super) cancel_grace: Duration,
    pub(super) limits: ProcessLimits,
    pub(super) max_line_bytes: usize,
    pub(super) mcp_gateway: Option<Arc<dyn crate::mcp::McpGateway>>,
    pub(super) model_endpoints: Option<Arc<dyn crate::model_endpoint::ModelEndpoints>>,
    pub(super) recorded_commands: Option<Arc<dyn crate::model_endpoint::RecordedCommands>>,
    pub(super) replay_of: Option<String>,
    pub(super) forked_at: Option<String>,
    pub(super) sandbox: crate::sandbox::SandboxPolicy,
}

impl Inner {
    /// A run's emitter on `recorder`, its values and lines bounded as configured.
    pub(super) fn emitter(&self, recorder: Option<Arc<dyn Recorder>>) -> crate::Emitter {
        crate::Emitter::new(recorder)
            .with_max_value_bytes(self.limits.max_output_bytes)
            .with_max_line_bytes(self.max_line_bytes)
    }
}

/// Configures an [`ExecutionService`].
pub struct ServiceBuilder {
    workspace: PathBuf,
    deterministic: bool,
    recorder_factory: Option<Arc<dyn RecorderFactory>>,
    run_ids: Arc<dyn RunIdGenerator>,
    clock: Arc<dyn Clock>,
    audit_path: Option<PathBuf>,
    audit_mask: Option<Arc<dyn TextMask>>,
    display: Option<Arc<dyn DisplaySink>>,
    router: ToolRouter,
    custom: CustomSteps,
    agents: AgentRunners,
    max_call_depth: usize,
    cancel_grace: Duration,
    limits: ProcessLimits,
    max_line_bytes: usize,
    mcp_gateway: Option<Arc<dyn crate::mcp::McpGateway>>,
    model_endpoints: Option<Arc<dyn crate::model_endpoint::ModelEndpoints>>,
    recorded_commands: Option<Arc<dyn crate::model_endpoint::RecordedCommands>>,
    replay_of: Option<String>,
    forked_at: Option<String>,
    sandbox: crate::sandbox::SandboxPolicy,
}

impl ServiceBuilder {
    /// How the run's processes are confined (#56, [`crate::sandbox`]): by default every
    /// process of every step is confined by Landlock, the audit file hidden from them; the
    /// composition root hides its storage too, or turns confinement off
    /// ([`crate::sandbox::SandboxPolicy::off`]). A confined service refuses to build on a
    /// kernel without Landlock ([`ExecError::Sandbox`]).
    pub fn sandbox(mut self, policy: crate::sandbox::SandboxPolicy) -> Self {
        self.sandbox = policy;
        self
    }

    /// Marks every root run of the service as a replay of `run` (`run.started`'s `replay_of`,
    /// wire decision 16); child runs do not carry it.
    pub fn replay_of(mut self, run: transcript_domain::RunId) -> Self {
        self.replay_of = Some(run.to_string());
        self
    }

    /// Marks every root run of the service as a trial of the recording it replays, forked at
    /// `step` (`run.started`'s `forked_at`, wire decision 22; written only with
    /// [`ServiceBuilder::replay_of`]).
    pub fn forked_at(mut self, step: impl Into<String>) -> Self {
        self.forked_at = Some(step.into());
        self
    }

    /// Runs parallel branches (and loop iterations, always sequential) one
    /// at a time in declaration order, for byte-stable tests and goldens; `run.started` then
    /// records no workspace root (a machine path, wire decision 20).
    pub fn deterministic(mut self, on: bool) -> Self {
        self.deterministic = on;
        self
    }

    /// Opens a transcript per run (root and `call_workflow` children,
    /// decision 7). Without one, runs emit no transcript.
    pub fn recorder_factory(mut self, factory: Arc<dyn RecorderFactory>) -> Self {
        self.recorder_factory = Some(factory);
        self
    }

    /// Replaces the run id source.
    pub fn run_ids(mut self, ids: Arc<dyn RunIdGenerator>) -> Self {
        self.run_ids = ids;
        self
    }

    /// Replaces the clock of the audit trail and display events, which
    /// agent runners read too ([`crate::AgentSeam::now`]: an HTTP agent's
    /// `Retry-After` date). Give them their own instance: the recorder's
    /// clock reads must not move it.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Appends the audit trail to `path` (usually `<storage>/audit.jsonl`).
    pub fn audit_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit_path = Some(path.into());
        self
    }

    /// Masks the text (path, name, kind, error) of every audit record, as
    /// the recorder's `EventMask` masks the transcript. The same mask is
    /// applied to a failing command's whole stderr before its last line
    /// becomes the step's error, so a multi-line secret cannot slip out as
    /// an unrecognisable last line.
    pub fn audit_mask(mut self, mask: Arc<dyn TextMask>) -> Self {
        self.audit_mask = Some(mask);
        self
    }

    /// Sends display events to `sink`.
    pub fn display(mut self, sink: Arc<dyn DisplaySink>) -> Self {
        self.display = Some(sink);
        self
    }

    /// The tools router (default: builtins only).
    pub fn router(mut self, router: ToolRouter) -> Self {
        self.router = router;
        self
    }

    /// Adds one tool to the service's router, beside the tools it already has (the built-in
    /// ones unless [`ServiceBuilder::router`] replaced them); a tool of the same name is
    /// replaced. The everyday way to give workflows a custom tool: no [`ToolRouter`] to build
    /// by hand. Its calls are recorded like every router call (`tool.call` / `tool.result`,
    /// fidelity `router`).
    pub fn tool(mut self, name: impl Into<String>, tool: Arc<dyn crate::tools::Tool>) -> Self {
        self.router.register(name, tool);
        self
    }

    /// Registers a custom step type; a built-in kind's name or an empty
    /// name is refused.
    pub fn custom_step(
        mut self,
        type_name: impl Into<String>,
        step: Arc<dyn CustomStep>,
    ) -> Result<Self, crate::custom::RegisterError> {
        self.custom.register(type_name, step)?;
        Ok(self)
    }

    /// Registers the agent runner of `provider`.
    pub fn agent_runner(
        mut self,
        provider: impl Into<String>,
        runner: Arc<dyn AgentRunner>,
    ) -> Self {
        self.agents.register(provider, runner);
        self
    }

    /// Sets the runner for providers without their own.
    pub fn fallback_agent_runner(mut self, runner: Arc<dyn AgentRunner>) -> Self {
        self.agents.set_fallback(runner);
        self
    }

    /// Starts the MCP proxy of agent steps with `mcp_servers:` ([`crate::mcp`]); without
    /// one, such a step fails saying so.
    pub fn mcp_gateway(mut self, gateway: Arc<dyn crate::mcp::McpGateway>) -> Self {
        self.mcp_gateway = Some(gateway);
        self
    }

    /// Points every agent execution at a model endpoint of its own
    /// ([`crate::model_endpoint`]; `transcript replay` serves a recorded run this way).
    pub fn model_endpoints(
        mut self,
        endpoints: Arc<dyn crate::model_endpoint::ModelEndpoints>,
    ) -> Self {
        self.model_endpoints = Some(endpoints);
        self
    }

    /// Serves command steps their recorded outcome instead of running them
    /// ([`crate::model_endpoint::RecordedCommands`]; `transcript replay --commands record`).
    pub fn recorded_commands(
        mut self,
        commands: Arc<dyn crate::model_endpoint::RecordedCommands>,
    ) -> Self {
        self.recorded_commands = Some(commands);
        self
    }

    /// Maximum `call_workflow` nesting (default 8); deeper calls fail the
    /// calling step with a clear error.
    pub fn max_call_depth(mut self, depth: usize) -> Self {
        self.max_call_depth = depth;
        self
    }

    /// How long a cancelled custom step or agent may keep running to close
    /// what it opened before it is dropped (default 5 s).
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// How long a cancelled or timed-out subprocess (command step,
    /// `run_command`, CLI agent) and its process group get between
    /// `SIGTERM` and `SIGKILL` (default 2 s; see [`crate::process`]).
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.limits.kill_grace = grace;
        self
    }

    /// Per-value cap of what is recorded and of each captured subprocess
    /// output stream (default 1 MiB): larger command output, tool inputs and
    /// outputs, step results and message block text are cut with the
    /// truncation stub (size and sha256 of the original, see
    /// [`crate::bounded`]), so no line exceeds
    /// [`transcript_domain::MAX_LINE_BYTES`] and a command printing 50 MB
    /// holds at most this much of it in memory.
    pub fn max_value_bytes(mut self, limit: usize) -> Self {
        self.limits.max_output_bytes = limit;
        self
    }

    /// The largest line a recorded event may take (default and at most
    /// [`transcript_domain::MAX_LINE_BYTES`]): a storage whose messages are smaller (a NATS
    /// server's `max_payload`) sets it, and an event of many values, each within
    /// [`Self::max_value_bytes`] but too large together, has its values cut further so its
    /// line fits ([`crate::bounded::bound_payload_within`]).
    pub fn max_line_bytes(mut self, limit: usize) -> Self {
        self.max_line_bytes = limit;
        self
    }

    /// Variables of the runner's environment that no process of a run inherits (command
    /// steps, `run_command`, CLI agents): what the composition root consumed for its own
    /// storage connection (`NATS_TOKEN`, …). A step's own `env:` may still set them. See
    /// [`crate::withheld_env`].
    pub fn withheld_env(mut self, names: crate::WithheldEnv) -> Self {
        self.limits.withheld_env = names;
        self
    }

    /// Builds the service; the workspace must be an existing directory.
    pub fn build(self) -> Result<ExecutionService, ExecError> {
        let workspace = self
            .workspace
            .canonicalize()
            .map_err(|e| ExecError::Workspace {
                path: self.workspace.display().to_string(),
                message: e.to_string(),
            })?;
        let mut sandbox = self.sandbox.clone();
        if sandbox.mode == crate::sandbox::SandboxMode::Confined {
            crate::sandbox::probe().map_err(ExecError::Sandbox)?;
            if let Some(audit) = &self.audit_path {
                sandbox = sandbox.hide(audit);
            }
        }
        if !workspace.is_dir() {
            return Err(ExecError::Workspace {
                path: workspace.display().to_string(),
                message: "not a directory".into(),
            });
        }
        // Opened on the first record: a run refused before it starts
        // leaves no audit file behind.
        let mask = self.audit_mask;
        let audit = self.audit_path.map(|p| {
            let trail = AuditTrail::lazy(p);
            Arc::new(match &mask {
                Some(m) => trail.with_mask(Arc::clone(m)),
                None => trail,
            })
        });
        Ok(ExecutionService {
            inner: Arc::new(Inner {
                workspace,
                deterministic: self.deterministic,
                recorder_factory: self.recorder_factory,
                run_ids: self.run_ids,
                observers: Observers {
                    clock: self.clock,
                    audit,
                    display: self.display,
                    mask,
                },
                router: Arc::new(self.router),
                custom: self.custom,
                agents: self.agents,
                max_call_depth: self.max_call_depth,
                cancel_grace: self.cancel_grace,
                limits: self.limits,
                max_line_bytes: self.max_line_bytes,
                mcp_gateway: self.mcp_gateway,
                model_endpoints: self.model_endpoints,
                recorded_commands: self.recorded_commands,
                forked_at: self.replay_of.as_ref().and(self.forked_at),
                replay_of: self.replay_of,
                sandbox,
            }),
        })
    }
}

impl ExecutionService {
    /// A builder for a service whose runs work in `workspace`, taking run
    /// ids from `run_ids` and audit/display times from `clock` (this crate
    /// reads no wall clock and makes no randomness: the composition root
    /// passes the system adapters, tests pass deterministic ones).
    pub fn builder(
        workspace: impl Into<PathBuf>,
        clock: Arc<dyn Clock>,
        run_ids: Arc<dyn RunIdGenerator>,
    ) -> ServiceBuilder {
        ServiceBuilder {
            workspace: workspace.into(),
            deterministic: false,
            recorder_factory: None,
            run_ids,
            clock,
            audit_path: None,
            audit_mask: None,
            display: None,
            router: ToolRouter::with_builtins(),
            custom: CustomSteps::default(),
            agents: AgentRunners::default(),
            max_call_depth: 8,
            cancel_grace: Duration::from_secs(5),
            limits: ProcessLimits::default(),
            max_line_bytes: transcript_domain::MAX_LINE_BYTES,
            mcp_gateway: None,
            model_endpoints: None,
            recorded_commands: None,
            replay_of: None,
            forked_at: None,
            sandbox: crate::sandbox::SandboxPolicy::confined(),
        }
    }

    /// A deterministic service for tests: sequential branches, sequential
    /// run ids, a manual clock frozen at `start`.
    pub fn deterministic_builder(
        workspace: impl Into<PathBuf>,
        start: Timestamp,
    ) -> ServiceBuilder {
        Self::builder(
            workspace,
            Arc::new(ManualClock::new(start)),
            Arc::new(transcript_domain::SequentialRunIds::new()),
        )
        .deterministic(true)
    }
}
