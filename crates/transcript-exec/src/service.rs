//! The [`ExecutionService`]: runs a [`WorkflowSet`] on tokio, emitting
//! lifecycle, message and tool events only through the Recorder port, and
//! the audit trail and display events through their own channels.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{
    Clock, ContentBlock, EventDraft, Fidelity, ManualClock, MessagePayload, Payload, RawJson,
    RecordError, Recorder, RecorderFactory, Role, RunId, RunIdGenerator, StepPayload, Timestamp,
};

use crate::agent::{AgentRequest, AgentRunner, AgentRunners, AgentSeam};
use crate::audit::{
    AuditRecord, AuditTrail, DisplayEvent, DisplaySink, Observers, Status, TextMask,
};
use crate::custom::{CustomStep, CustomStepContext, CustomSteps};
use crate::emit::Emitter;
use crate::process::ProcessLimits;
use crate::template::{
    LoopFrame, Scope, StepValue, Template, eval_condition, render_json, render_str,
};
use crate::tools::{
    CallScope, CatchUnwind, SHELL_TOOL, ToolError, ToolRouter, run_argv_with, run_shell_with,
};
use crate::workflow::{
    CommandLine, Items, ParallelMode, Step, StepKind, Workflow, WorkflowError, WorkflowSet,
};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a run could not start (nothing was emitted).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The workflow set failed validation.
    #[error(transparent)]
    Invalid(#[from] WorkflowError),
    /// A required input was not given.
    #[error("workflow '{workflow}': required input '{input}' not given")]
    MissingInput {
        /// Workflow name.
        workflow: String,
        /// Input name.
        input: String,
    },
    /// An input the workflow does not declare was given.
    #[error("workflow '{workflow}': unknown input '{input}'")]
    UnknownInput {
        /// Workflow name.
        workflow: String,
        /// Input name.
        input: String,
    },
    /// The recorder factory could not open the run's transcript.
    #[error("cannot open the transcript: {0}")]
    Recorder(#[from] RecordError),
    /// The workspace directory is not usable.
    #[error("workspace {path}: {message}")]
    Workspace {
        /// The directory.
        path: String,
        /// Why.
        message: String,
    },
}

/// One executed step, as the service ran it: the tree a transcript must
/// rebuild to (US1).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecNode {
    /// Step name.
    pub name: String,
    /// Step kind.
    pub kind: String,
    /// Dotted path (decision 4).
    pub path: String,
    /// Innermost loop iteration.
    pub iteration: u64,
    /// How it ended.
    pub status: Status,
    /// Why it failed.
    pub error: Option<String>,
    /// Nested steps in execution order (parallel branches in declaration order).
    pub children: Vec<ExecNode>,
    /// For `call_workflow`: the child run.
    pub child: Option<Box<RunOutcome>>,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The run id (the transcript file name).
    pub run_id: RunId,
    /// Workflow name.
    pub workflow: String,
    /// How the run ended.
    pub status: Status,
    /// Why it failed or `cancelled`.
    pub error: Option<String>,
    /// Rendered outputs (successful runs).
    pub outputs: Map<String, Value>,
    /// The executed step tree.
    pub steps: Vec<ExecNode>,
    /// Recorder failures, this run's and its child runs' (a run with any
    /// never reports success; see the crate docs).
    pub transcript_errors: Vec<String>,
    /// Audit trail write failures.
    pub audit_errors: Vec<String>,
}

impl RunOutcome {
    /// Whether the run succeeded.
    pub fn succeeded(&self) -> bool {
        self.status == Status::Success
    }
}

struct Inner {
    workspace: PathBuf,
    deterministic: bool,
    recorder_factory: Option<Arc<dyn RecorderFactory>>,
    run_ids: Arc<dyn RunIdGenerator>,
    observers: Observers,
    router: Arc<ToolRouter>,
    custom: CustomSteps,
    agents: AgentRunners,
    max_call_depth: usize,
    cancel_grace: Duration,
    limits: ProcessLimits,
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
}

impl ServiceBuilder {
    /// Runs parallel branches (and loop iterations, always sequential) one
    /// at a time in declaration order, for byte-stable tests and goldens.
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

    /// Replaces the clock of the audit trail and display events. Give them
    /// their own instance: the recorder's clock reads must not move it.
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
    /// the recorder's `EventMask` masks the transcript.
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

    /// Registers a custom step type.
    pub fn custom_step(
        mut self,
        type_name: impl Into<String>,
        step: Arc<dyn CustomStep>,
    ) -> Result<Self, String> {
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

    /// Builds the service; the workspace must be an existing directory.
    pub fn build(self) -> Result<ExecutionService, ExecError> {
        let workspace = self
            .workspace
            .canonicalize()
            .map_err(|e| ExecError::Workspace {
                path: self.workspace.display().to_string(),
                message: e.to_string(),
            })?;
        if !workspace.is_dir() {
            return Err(ExecError::Workspace {
                path: workspace.display().to_string(),
                message: "not a directory".into(),
            });
        }
        // Opened on the first record: a run refused before it starts
        // leaves no audit file behind.
        let audit = self.audit_path.map(|p| {
            let trail = AuditTrail::lazy(p);
            Arc::new(match self.audit_mask {
                Some(m) => trail.with_mask(m),
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
                },
                router: Arc::new(self.router),
                custom: self.custom,
                agents: self.agents,
                max_call_depth: self.max_call_depth,
                cancel_grace: self.cancel_grace,
                limits: self.limits,
            }),
        })
    }
}

/// Runs workflows. Cheap to clone; runs may proceed concurrently.
#[derive(Clone)]
pub struct ExecutionService {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ExecutionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionService")
            .field("workspace", &self.inner.workspace)
            .field("deterministic", &self.inner.deterministic)
            .field("router", &self.inner.router)
            .finish()
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

    /// The canonical workspace directory.
    pub fn workspace(&self) -> &Path {
        &self.inner.workspace
    }

    /// The tools router.
    pub fn router(&self) -> &Arc<ToolRouter> {
        &self.inner.router
    }

    /// Validates the set against this service: structure and templates,
    /// custom kinds registered here, and the router tools that operation
    /// and agent steps name.
    pub fn validate(&self, set: &WorkflowSet) -> Result<(), WorkflowError> {
        let custom = &self.inner.custom;
        set.validate(&|k| custom.contains(k))?;
        let router = &self.inner.router;
        set.check_steps(&|step| match &step.kind {
            StepKind::Operation { tool, .. } if !router.has(tool) => Some(format!(
                "unknown tool '{tool}' (not registered with the router)"
            )),
            // A preset's tools are the CLI's own (mapped, crate::preset).
            StepKind::Agent(a)
                if a.command.is_empty() && crate::preset::Preset::of(&a.provider).is_some() =>
            {
                None
            }
            StepKind::Agent(a) => a
                .tools
                .iter()
                .find(|t| !router.has(t))
                .map(|t| format!("agent tool '{t}' is not registered with the router")),
            _ => None,
        })
    }

    /// Runs the set's root workflow with a new run id; its transcript (and
    /// its children's) come from the recorder factory, if any, and are
    /// closed at the end. Errors only when the run cannot start.
    pub async fn run(
        &self,
        set: &WorkflowSet,
        inputs: Map<String, Value>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ExecError> {
        let (wf, inputs) = self.prepare(set, inputs)?;
        let run_id = self.inner.run_ids.next_run_id();
        let recorder = match &self.inner.recorder_factory {
            Some(f) => Some(f.create(run_id, None).await?),
            None => None,
        };
        let emitter =
            Emitter::new(recorder).with_max_value_bytes(self.inner.limits.max_output_bytes);
        let outcome = run_workflow(
            self.inner.clone(),
            Arc::new(set.clone()),
            wf,
            run_id,
            emitter.clone(),
            inputs,
            0,
            cancel,
        )
        .await;
        emitter.close().await;
        Ok(with_transcript_errors(outcome, &emitter))
    }

    /// Runs the root workflow into `recorder` (its run id is the run's);
    /// the caller closes the recorder. Children still come from the factory.
    pub async fn run_with_recorder(
        &self,
        set: &WorkflowSet,
        inputs: Map<String, Value>,
        recorder: Arc<dyn Recorder>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ExecError> {
        let (wf, inputs) = self.prepare(set, inputs)?;
        let run_id = recorder.run_id();
        let emitter =
            Emitter::new(Some(recorder)).with_max_value_bytes(self.inner.limits.max_output_bytes);
        let outcome = run_workflow(
            self.inner.clone(),
            Arc::new(set.clone()),
            wf,
            run_id,
            emitter.clone(),
            inputs,
            0,
            cancel,
        )
        .await;
        Ok(with_transcript_errors(outcome, &emitter))
    }

    fn prepare(
        &self,
        set: &WorkflowSet,
        inputs: Map<String, Value>,
    ) -> Result<(Arc<Workflow>, Map<String, Value>), ExecError> {
        self.validate(set)?;
        let wf = set.root().cloned().ok_or_else(|| WorkflowError {
            file: set.root_key().to_owned(),
            step: None,
            reason: "root workflow missing".into(),
        })?;
        let inputs = resolve_inputs(&wf, inputs)?;
        Ok((wf, inputs))
    }
}

/// Attaches the recorder failures to `outcome`; a run with any never
/// reports success (a failed close surfaces only here).
fn with_transcript_errors(mut outcome: RunOutcome, emitter: &Emitter) -> RunOutcome {
    outcome.transcript_errors = emitter.errors();
    if outcome.status == Status::Success
        && let Some(first) = outcome.transcript_errors.first()
    {
        outcome.status = Status::Failure;
        outcome.error = Some(emitter.failure().unwrap_or_else(|| first.clone()));
        outcome.outputs = Map::new();
    }
    outcome
}

fn resolve_inputs(
    wf: &Workflow,
    mut given: Map<String, Value>,
) -> Result<Map<String, Value>, ExecError> {
    if let Some(unknown) = given
        .keys()
        .find(|k| !wf.inputs.iter().any(|i| &i.name == *k))
    {
        return Err(ExecError::UnknownInput {
            workflow: wf.name.clone(),
            input: unknown.clone(),
        });
    }
    let mut out = Map::new();
    for i in &wf.inputs {
        match given.remove(&i.name).or_else(|| i.default.clone()) {
            Some(v) => {
                out.insert(i.name.clone(), v);
            }
            None => {
                return Err(ExecError::MissingInput {
                    workflow: wf.name.clone(),
                    input: i.name.clone(),
                });
            }
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------ running

struct RunCtx {
    inner: Arc<Inner>,
    set: Arc<WorkflowSet>,
    run_id: RunId,
    emitter: Emitter,
    depth: usize,
    calls: Arc<AtomicU64>,
    audit_errors: Mutex<Vec<String>>,
    /// Agent executions per `<path>#<iteration>` (call id prefixes).
    agent_runs: Mutex<std::collections::HashMap<String, u64>>,
}

impl RunCtx {
    /// `<path>#<iteration>`, made unique within the run: an execution of
    /// the same path and iteration seen before (an inner loop inside an
    /// outer one) gets `~<n>` appended (decision 5 qualified call ids).
    fn agent_call_prefix(&self, path: &str, iteration: u64) -> String {
        let base = format!("{path}#{iteration}");
        let n = self
            .agent_runs
            .lock()
            .map(|mut seen| {
                let n = seen.entry(base.clone()).or_insert(0);
                *n += 1;
                *n - 1
            })
            .unwrap_or(0);
        if n == 0 { base } else { format!("{base}~{n}") }
    }

    fn audit(&self, record: AuditRecord) {
        if let Some(e) = self.inner.observers.audit(record)
            && let Ok(mut errs) = self.audit_errors.lock()
        {
            errs.push(e);
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Flow {
    Done,
    Failed(String),
    Cancelled,
    Terminate { success: bool, message: String },
}

struct StepRun {
    node: ExecNode,
    value: StepValue,
    flow: Flow,
    /// Extra scope entries for the enclosing sequence (parallel branches).
    exports: Vec<(String, StepValue)>,
}

struct KindOut {
    value: StepValue,
    result: Option<Value>,
    flow: Flow,
    children: Vec<ExecNode>,
    child: Option<Box<RunOutcome>>,
    exports: Vec<(String, StepValue)>,
}

impl KindOut {
    fn flow(flow: Flow) -> Self {
        Self {
            value: StepValue::default(),
            result: None,
            flow,
            children: Vec::new(),
            child: None,
            exports: Vec::new(),
        }
    }

    fn done(output: Value, result: Option<Value>) -> Self {
        Self {
            value: StepValue {
                output,
                ..StepValue::default()
            },
            result,
            ..Self::flow(Flow::Done)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_workflow(
    inner: Arc<Inner>,
    set: Arc<WorkflowSet>,
    wf: Arc<Workflow>,
    run_id: RunId,
    emitter: Emitter,
    inputs: Map<String, Value>,
    depth: usize,
    cancel: CancellationToken,
) -> BoxFuture<'static, RunOutcome> {
    Box::pin(async move {
        // The run stops at its first failed transcript write (see emit.rs).
        let cancel = cancel.child_token();
        let emitter = emitter.stopping(cancel.clone());
        let ctx = Arc::new(RunCtx {
            inner: inner.clone(),
            set,
            run_id,
            emitter: emitter.clone(),
            depth,
            calls: Arc::default(),
            audit_errors: Mutex::default(),
            agent_runs: Mutex::default(),
        });
        let obs = &inner.observers;
        emitter
            .emit_draft(|| {
                EventDraft::run_level(Payload::RunStarted(StepPayload::new(
                    wf.name.clone(),
                    "workflow",
                )))
            })
            .await;
        let t0 = obs.now();
        ctx.audit(AuditRecord {
            ts: t0,
            run_id,
            event: "run_start",
            path: String::new(),
            iteration: 0,
            name: wf.name.clone(),
            kind: "workflow".into(),
            status: None,
            error: None,
            child_run_id: None,
        });
        obs.display(DisplayEvent::RunStarted {
            at: t0,
            run_id,
            workflow: wf.name.clone(),
        });

        let mut scope = Scope::new(inputs).with_workflow_dir(wf.dir.as_deref());
        let seq = run_seq(&ctx, &wf.steps, "", 0, &mut scope, &cancel).await;
        let (status, error) = match seq.flow {
            Flow::Done | Flow::Terminate { success: true, .. } => (Status::Success, None),
            Flow::Failed(e) => (Status::Failure, Some(e)),
            Flow::Terminate { message, .. } => (
                Status::Failure,
                Some(if message.is_empty() {
                    "terminated with failure".to_owned()
                } else {
                    message
                }),
            ),
            Flow::Cancelled => (Status::Cancelled, Some("cancelled".to_owned())),
        };
        let (status, error) = match emitter.failure() {
            Some(failure) => (Status::Failure, Some(failure)),
            None => (status, error),
        };
        let mut outputs = Map::new();
        if status == Status::Success {
            for (name, text) in &wf.outputs {
                let v = match crate::template::Template::parse(text) {
                    Ok(t) => t.render_value(&scope),
                    Err(_) => Value::String(text.clone()),
                };
                outputs.insert(name.clone(), v);
            }
        }
        emitter
            .emit_draft(|| {
                let mut p = StepPayload::new(wf.name.clone(), "workflow");
                if let Some(e) = &error {
                    p = p.with_error(e.clone());
                }
                if !outputs.is_empty() {
                    p = p.with_result(RawJson::from_value(&outputs).unwrap_or_default());
                }
                EventDraft::run_level(Payload::RunCompleted(p))
            })
            .await;
        let t1 = obs.now();
        ctx.audit(AuditRecord {
            ts: t1,
            run_id,
            event: "run_end",
            path: String::new(),
            iteration: 0,
            name: wf.name.clone(),
            kind: "workflow".into(),
            status: Some(status),
            error: error.clone(),
            child_run_id: None,
        });
        obs.display(DisplayEvent::RunFinished {
            at: t1,
            run_id,
            status,
            error: error.clone(),
        });
        let audit_errors = ctx
            .audit_errors
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default();
        RunOutcome {
            run_id,
            workflow: wf.name.clone(),
            status,
            error,
            outputs,
            steps: seq.nodes,
            transcript_errors: Vec::new(),
            audit_errors,
        }
    })
}

struct SeqOut {
    nodes: Vec<ExecNode>,
    flow: Flow,
    last: Value,
}

async fn run_seq(
    ctx: &Arc<RunCtx>,
    steps: &[Step],
    prefix: &str,
    iteration: u64,
    scope: &mut Scope,
    cancel: &CancellationToken,
) -> SeqOut {
    let mut nodes = Vec::with_capacity(steps.len());
    let mut last = Value::Null;
    for step in steps {
        if cancel.is_cancelled() {
            return SeqOut {
                nodes,
                flow: Flow::Cancelled,
                last,
            };
        }
        let r = run_step(ctx, step, prefix, iteration, scope, cancel).await;
        let path = r.node.path.clone();
        nodes.push(r.node);
        for (name, v) in r.exports {
            scope.set_step(&name, v);
        }
        match r.flow {
            Flow::Done => {
                last = r.value.output.clone();
                scope.set_step(&step.name, r.value);
            }
            Flow::Failed(e) if step.continue_on_error => {
                last = r.value.output.clone();
                scope.set_step(
                    &step.name,
                    StepValue {
                        error: Some(e),
                        ..r.value
                    },
                );
            }
            Flow::Failed(e) => {
                return SeqOut {
                    nodes,
                    flow: Flow::Failed(format!("step '{path}' failed: {e}")),
                    last,
                };
            }
            flow @ (Flow::Cancelled | Flow::Terminate { .. }) => {
                return SeqOut { nodes, flow, last };
            }
        }
    }
    SeqOut {
        nodes,
        flow: Flow::Done,
        last,
    }
}

fn run_step<'a>(
    ctx: &'a Arc<RunCtx>,
    step: &'a Step,
    prefix: &'a str,
    iteration: u64,
    scope: &'a Scope,
    cancel: &'a CancellationToken,
) -> BoxFuture<'a, StepRun> {
    Box::pin(async move {
        let path = crate::workflow::join_path(prefix, &step.name);
        let kind = step.kind.kind_name();
        let is_call = matches!(step.kind, StepKind::CallWorkflow { .. });
        // Past the nesting limit no child run starts, so none is named.
        let child_run_id = (is_call && ctx.depth < ctx.inner.max_call_depth)
            .then(|| ctx.inner.run_ids.next_run_id());
        let obs = &ctx.inner.observers;

        ctx.emitter
            .emit_draft(|| {
                let p = StepPayload::new(step.name.clone(), kind);
                let draft = if is_call {
                    EventDraft::new(path.clone(), iteration, Payload::CallWorkflowStarted(p))
                } else {
                    EventDraft::new(path.clone(), iteration, Payload::StepStarted(p))
                };
                match child_run_id {
                    Some(child) => draft.with_child(child),
                    None => draft,
                }
            })
            .await;
        let t0 = obs.now();
        ctx.audit(AuditRecord {
            ts: t0,
            run_id: ctx.run_id,
            event: "step_start",
            path: path.clone(),
            iteration,
            name: step.name.clone(),
            kind: kind.to_owned(),
            status: None,
            error: None,
            child_run_id,
        });
        obs.display(DisplayEvent::StepStarted {
            at: t0,
            path: path.clone(),
            iteration,
            kind: kind.to_owned(),
        });

        let step_cancel = cancel.child_token();
        let body = run_kind(
            ctx,
            step,
            &path,
            iteration,
            scope,
            &step_cancel,
            child_run_id,
        );
        let (mut out, timed_out) = match step.timeout {
            None => (body.await, false),
            Some(limit) => {
                let mut body = std::pin::pin!(body);
                let first = tokio::select! {
                    r = &mut body => Some(r),
                    _ = tokio::time::sleep(limit) => None,
                };
                match first {
                    Some(r) => (r, false),
                    None => {
                        // Cancel inside the step and let it close what it opened.
                        step_cancel.cancel();
                        (body.await, true)
                    }
                }
            }
        };
        if timed_out && !cancel.is_cancelled() && !matches!(out.flow, Flow::Terminate { .. }) {
            let limit = step.timeout.map(|d| d.as_millis()).unwrap_or_default();
            out.flow = Flow::Failed(format!("timed out after {limit}ms"));
        }
        let (status, error) = match &out.flow {
            Flow::Done | Flow::Terminate { success: true, .. } => (Status::Success, None),
            Flow::Failed(e) => (Status::Failure, Some(e.clone())),
            Flow::Terminate { message, .. } => (Status::Failure, Some(message.clone())),
            Flow::Cancelled => (Status::Cancelled, Some("cancelled".to_owned())),
        };
        if let Some(e) = &error
            && out.value.error.is_none()
            && status == Status::Failure
        {
            out.value.error = Some(e.clone());
        }

        ctx.emitter
            .emit_draft(|| {
                let mut p = StepPayload::new(step.name.clone(), kind);
                if let Some(e) = &error {
                    p = p.with_error(e.clone());
                }
                if let Some(r) = &out.result {
                    p = p.with_result(RawJson::from_value(r).unwrap_or_default());
                }
                let draft = if is_call {
                    EventDraft::new(path.clone(), iteration, Payload::CallWorkflowCompleted(p))
                } else {
                    EventDraft::new(path.clone(), iteration, Payload::StepCompleted(p))
                };
                match child_run_id {
                    Some(child) => draft.with_child(child),
                    None => draft,
                }
            })
            .await;
        let t1 = obs.now();
        ctx.audit(AuditRecord {
            ts: t1,
            run_id: ctx.run_id,
            event: "step_end",
            path: path.clone(),
            iteration,
            name: step.name.clone(),
            kind: kind.to_owned(),
            status: Some(status),
            error: error.clone(),
            child_run_id,
        });
        obs.display(DisplayEvent::StepFinished {
            at: t1,
            path: path.clone(),
            iteration,
            status,
            elapsed_ms: t1.millis_since(t0),
            error: error.clone(),
        });

        StepRun {
            node: ExecNode {
                name: step.name.clone(),
                kind: kind.to_owned(),
                path,
                iteration,
                status,
                error,
                children: out.children,
                child: out.child,
            },
            value: out.value,
            flow: out.flow,
            exports: out.exports,
        }
    })
}

/// Renders an operation's input; the string `command` of `run_command` is
/// a shell line, so its values are shell-quoted like a `command` step's.
fn render_operation_input(
    tool: &str,
    input: &Value,
    scope: &Scope,
) -> Result<Value, crate::template::TemplateError> {
    let mut rendered = render_json(input, scope);
    if tool == SHELL_TOOL
        && let Some(Value::String(text)) = input.get("command")
    {
        let line = Template::parse(text)?.render_shell(scope)?;
        rendered["command"] = Value::String(line);
    }
    Ok(rendered)
}

fn call_scope(ctx: &RunCtx, path: &str, iteration: u64, cancel: &CancellationToken) -> CallScope {
    CallScope {
        emitter: ctx.emitter.clone(),
        path: path.to_owned(),
        iteration,
        workspace: ctx.inner.workspace.clone(),
        cancel: cancel.clone(),
        call_counter: ctx.calls.clone(),
        limits: ctx.inner.limits,
    }
}

/// Awaits `fut` (a custom step or an agent); on cancellation it gets
/// `grace` to finish (closing what it opened) before it is dropped.
async fn with_grace<T>(
    fut: impl Future<Output = T>,
    cancel: &CancellationToken,
    grace: Duration,
) -> Option<T> {
    let mut fut = std::pin::pin!(fut);
    tokio::select! {
        r = &mut fut => return Some(r),
        _ = cancel.cancelled() => {}
    }
    tokio::time::timeout(grace, fut).await.ok()
}

#[allow(clippy::too_many_arguments)]
async fn run_kind(
    ctx: &Arc<RunCtx>,
    step: &Step,
    path: &str,
    iteration: u64,
    scope: &Scope,
    cancel: &CancellationToken,
    child_run_id: Option<RunId>,
) -> KindOut {
    match &step.kind {
        StepKind::Command { command } => {
            let ws = &ctx.inner.workspace;
            // The resolved command is part of the result: what ran, not
            // only what it printed (#20).
            let (ran, resolved) = match command {
                CommandLine::Shell(text) => {
                    match Template::parse(text).and_then(|t| t.render_shell(scope)) {
                        Ok(line) => (
                            run_shell_with(&line, ws, cancel, ctx.inner.limits).await,
                            Value::String(line),
                        ),
                        Err(e) => (Err(ToolError::InvalidInput(e.to_string())), Value::Null),
                    }
                }
                CommandLine::Argv(argv) => {
                    let argv: Vec<String> = argv.iter().map(|a| render_str(a, scope)).collect();
                    let ran = run_argv_with(&argv, ws, cancel, ctx.inner.limits).await;
                    (ran, json!(argv))
                }
            };
            match ran {
                Ok(out) => {
                    let result = json!({
                        "command": resolved,
                        "stdout": out.stdout,
                        "exit_code": out.exit_code,
                    });
                    let value = StepValue {
                        output: Value::String(
                            out.stdout
                                .strip_suffix('\n')
                                .unwrap_or(&out.stdout)
                                .to_owned(),
                        ),
                        exit_code: Some(out.exit_code),
                        error: None,
                    };
                    let flow = if out.exit_code == 0 {
                        Flow::Done
                    } else {
                        let tail = out
                            .stderr
                            .trim_end()
                            .lines()
                            .last()
                            .unwrap_or("")
                            .to_owned();
                        Flow::Failed(if tail.is_empty() {
                            format!("command exited with code {}", out.exit_code)
                        } else {
                            format!("command exited with code {}: {tail}", out.exit_code)
                        })
                    };
                    KindOut {
                        value,
                        result: Some(result),
                        ..KindOut::flow(flow)
                    }
                }
                Err(ToolError::Cancelled) => KindOut::flow(Flow::Cancelled),
                Err(e) => KindOut::flow(Flow::Failed(e.to_string())),
            }
        }
        StepKind::Operation { tool, input } => {
            let input = match render_operation_input(tool, input, scope) {
                Ok(i) => i,
                Err(e) => return KindOut::flow(Flow::Failed(e.to_string())),
            };
            let cs = call_scope(ctx, path, iteration, cancel);
            match ctx.inner.router.call_tool(&cs, tool, input, None).await {
                Ok(v) => KindOut::done(v.clone(), Some(v)),
                Err(ToolError::Cancelled) => KindOut::flow(Flow::Cancelled),
                Err(e) => {
                    let out = e.output();
                    KindOut {
                        result: (!out.is_null()).then(|| out.clone()),
                        value: StepValue {
                            output: out,
                            ..StepValue::default()
                        },
                        ..KindOut::flow(Flow::Failed(e.to_string()))
                    }
                }
            }
        }
        StepKind::Terminal { success, message } => {
            let message = render_str(message, scope);
            let result = json!({
                "status": if *success { "success" } else { "failure" },
                "message": message,
            });
            KindOut {
                value: StepValue {
                    output: Value::String(message.clone()),
                    ..StepValue::default()
                },
                result: Some(result),
                ..KindOut::flow(Flow::Terminate {
                    success: *success,
                    message,
                })
            }
        }
        StepKind::Custom { type_name, params } => {
            let Some(custom) = ctx.inner.custom.get(type_name).cloned() else {
                return KindOut::flow(Flow::Failed(format!("unknown step kind '{type_name}'")));
            };
            let cctx = CustomStepContext::new(
                step.name.clone(),
                render_json(params, scope),
                ctx.inner.router.clone(),
                call_scope(ctx, path, iteration, cancel),
            );
            let fut = CatchUnwind::new(async move { custom.run(cctx).await });
            match with_grace(fut, cancel, ctx.inner.cancel_grace).await {
                _ if cancel.is_cancelled() => KindOut::flow(Flow::Cancelled),
                Some(Ok(Ok(v))) => KindOut::done(v.clone(), Some(v)),
                Some(Ok(Err(e))) => KindOut::flow(Flow::Failed(e)),
                Some(Err(panic)) => KindOut::flow(Flow::Failed(format!(
                    "custom step '{type_name}' panicked: {panic}"
                ))),
                None => KindOut::flow(Flow::Cancelled),
            }
        }
        StepKind::Agent(spec) => {
            let prompt = render_str(&spec.prompt, scope);
            let system_prompt = spec
                .system_prompt
                .as_deref()
                .map(|s| render_str(s, scope))
                .unwrap_or_default();
            let request = AgentRequest {
                step: step.name.clone(),
                provider: spec.provider.clone(),
                command: spec.command.iter().map(|a| render_str(a, scope)).collect(),
                prompt: prompt.clone(),
                system_prompt: system_prompt.clone(),
                model: spec.model.clone(),
                max_turns: spec.max_turns,
                tools: spec.tools.clone(),
                env: spec
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), render_str(v, scope)))
                    .collect(),
                workspace: ctx.inner.workspace.clone(),
            };
            ctx.emitter
                .emit(path, iteration, || {
                    let mut blocks = vec![ContentBlock::text(Fidelity::Router, prompt)];
                    if !system_prompt.is_empty() {
                        blocks.push(ContentBlock::text(Fidelity::Router, system_prompt));
                    }
                    Payload::MessageUser(MessagePayload::new(Role::User, blocks))
                })
                .await;
            // CLI agents (a command, or a provider preset) need no registration.
            let runner = match ctx.inner.agents.get(&spec.provider) {
                Some(r) => r.clone(),
                None if !spec.command.is_empty()
                    || crate::preset::Preset::of(&spec.provider).is_some() =>
                {
                    Arc::new(crate::cli_agent::CliAgentRunner) as Arc<dyn AgentRunner>
                }
                None => {
                    return KindOut::flow(Flow::Failed(format!(
                        "no agent runner for provider '{}'",
                        spec.provider
                    )));
                }
            };
            let seam = AgentSeam::new(
                call_scope(ctx, path, iteration, cancel),
                ctx.inner.router.clone(),
                spec.provider.clone(),
            )
            .with_offered_tools(spec.tools.iter().cloned())
            .with_call_id_prefix(ctx.agent_call_prefix(path, iteration));
            let fut = CatchUnwind::new(async { runner.run(request, &seam).await });
            match with_grace(fut, cancel, ctx.inner.cancel_grace).await {
                Some(Ok(Ok(reply))) if !cancel.is_cancelled() => {
                    // Warnings the agent survived stay visible in the result.
                    let result = if reply.warnings.is_empty() {
                        Value::String(reply.output.clone())
                    } else {
                        serde_json::json!({"output": reply.output.clone(), "warnings": reply.warnings})
                    };
                    KindOut::done(Value::String(reply.output), Some(result))
                }
                _ if cancel.is_cancelled() => KindOut::flow(Flow::Cancelled),
                Some(Ok(Ok(_))) => KindOut::flow(Flow::Cancelled),
                Some(Ok(Err(e))) => KindOut::flow(Flow::Failed(e.0)),
                Some(Err(panic)) => KindOut::flow(Flow::Failed(format!("agent panicked: {panic}"))),
                None => KindOut::flow(Flow::Cancelled),
            }
        }
        StepKind::Parallel { mode, branches } => {
            run_parallel(ctx, *mode, branches, path, iteration, scope, cancel).await
        }
        StepKind::ForEach { items, steps } => {
            let items: Vec<Value> = match items {
                Items::List(list) => list.iter().map(|v| render_json(v, scope)).collect(),
                Items::Template(t) => {
                    match crate::template::Template::parse(t).map(|t| t.render_value(scope)) {
                        Ok(Value::Array(a)) => a,
                        Ok(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
                            Ok(Value::Array(a)) => a,
                            _ => s
                                .lines()
                                .filter(|l| !l.trim().is_empty())
                                .map(|l| Value::String(l.to_owned()))
                                .collect(),
                        },
                        Ok(Value::Null) => Vec::new(),
                        Ok(other) => vec![other],
                        Err(e) => return KindOut::flow(Flow::Failed(e.to_string())),
                    }
                }
            };
            let mut children = Vec::new();
            let mut outputs = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                if cancel.is_cancelled() {
                    return KindOut {
                        children,
                        ..KindOut::flow(Flow::Cancelled)
                    };
                }
                let mut s = scope.clone();
                s.set_loop(LoopFrame {
                    item,
                    index: i as u64,
                });
                let out = run_seq(ctx, steps, path, i as u64, &mut s, cancel).await;
                children.extend(out.nodes);
                match out.flow {
                    Flow::Done => outputs.push(out.last),
                    Flow::Failed(e) => {
                        return KindOut {
                            children,
                            ..KindOut::flow(Flow::Failed(format!("iteration {i}: {e}")))
                        };
                    }
                    flow => {
                        return KindOut {
                            children,
                            ..KindOut::flow(flow)
                        };
                    }
                }
            }
            // The result refers to the iterations (recorded as children)
            // instead of repeating their outputs.
            let n = outputs.len();
            KindOut {
                children,
                ..KindOut::done(Value::Array(outputs), Some(json!({ "iterations": n })))
            }
        }
        StepKind::While {
            condition,
            max_iterations,
            steps,
        } => {
            let mut s = scope.clone();
            let mut children = Vec::new();
            let mut last = Value::Null;
            let mut i = 0u64;
            loop {
                s.set_loop(LoopFrame {
                    item: Value::Null,
                    index: i,
                });
                if !eval_condition(condition, &s) {
                    break;
                }
                if i >= *max_iterations {
                    return KindOut {
                        children,
                        ..KindOut::flow(Flow::Failed(format!(
                            "condition still true after {max_iterations} iterations"
                        )))
                    };
                }
                if cancel.is_cancelled() {
                    return KindOut {
                        children,
                        ..KindOut::flow(Flow::Cancelled)
                    };
                }
                let out = run_seq(ctx, steps, path, i, &mut s, cancel).await;
                children.extend(out.nodes);
                match out.flow {
                    Flow::Done => last = out.last,
                    Flow::Failed(e) => {
                        return KindOut {
                            children,
                            ..KindOut::flow(Flow::Failed(format!("iteration {i}: {e}")))
                        };
                    }
                    flow => {
                        return KindOut {
                            children,
                            ..KindOut::flow(flow)
                        };
                    }
                }
                i += 1;
            }
            KindOut {
                children,
                ..KindOut::done(last, Some(json!({ "iterations": i })))
            }
        }
        StepKind::CallWorkflow { workflow, inputs } => {
            run_call(ctx, workflow, inputs, scope, cancel, child_run_id).await
        }
    }
}

async fn run_call(
    ctx: &Arc<RunCtx>,
    workflow: &str,
    inputs: &std::collections::BTreeMap<String, Value>,
    scope: &Scope,
    cancel: &CancellationToken,
    child_run_id: Option<RunId>,
) -> KindOut {
    let max = ctx.inner.max_call_depth;
    let Some(child_id) = child_run_id.filter(|_| ctx.depth < max) else {
        return KindOut::flow(Flow::Failed(format!(
            "call_workflow nesting limit of {max} exceeded (calling '{workflow}' at depth {})",
            ctx.depth + 1
        )));
    };
    let Some(target) = ctx.set.get(workflow).cloned() else {
        return KindOut::flow(Flow::Failed(format!("unknown workflow '{workflow}'")));
    };
    let given: Map<String, Value> = inputs
        .iter()
        .map(|(k, v)| (k.clone(), render_json(v, scope)))
        .collect();
    let child_inputs = match resolve_inputs(&target, given) {
        Ok(i) => i,
        Err(e) => return KindOut::flow(Flow::Failed(e.to_string())),
    };
    let recorder = match &ctx.inner.recorder_factory {
        Some(f) => match f.create(child_id, Some(ctx.run_id)).await {
            Ok(r) => Some(r),
            Err(e) => {
                // Same policy as a failed write: the child does not run
                // without its transcript.
                let message = format!(
                    "transcript write failed: cannot open the transcript of child run {child_id}: {}",
                    crate::emit::error_chain(&e)
                );
                ctx.emitter.note_error(message.clone());
                return KindOut::flow(Flow::Failed(message));
            }
        },
        None => None,
    };
    let child_emitter =
        Emitter::new(recorder).with_max_value_bytes(ctx.inner.limits.max_output_bytes);
    let outcome = run_workflow(
        ctx.inner.clone(),
        ctx.set.clone(),
        target,
        child_id,
        child_emitter.clone(),
        child_inputs,
        ctx.depth + 1,
        cancel.child_token(),
    )
    .await;
    child_emitter.close().await;
    let outcome = with_transcript_errors(outcome, &child_emitter);
    // The parent reports its children's transcript failures too.
    for e in &outcome.transcript_errors {
        ctx.emitter.note_error(format!("child run {child_id}: {e}"));
    }
    let outputs = Value::Object(outcome.outputs.clone());
    let flow = match outcome.status {
        Status::Success => Flow::Done,
        Status::Failure => Flow::Failed(format!(
            "workflow '{}' failed: {}",
            outcome.workflow,
            outcome.error.clone().unwrap_or_default()
        )),
        Status::Cancelled => Flow::Cancelled,
    };
    KindOut {
        value: StepValue {
            output: outputs.clone(),
            ..StepValue::default()
        },
        result: (outcome.status == Status::Success).then_some(outputs),
        child: Some(Box::new(outcome)),
        ..KindOut::flow(flow)
    }
}

async fn run_parallel(
    ctx: &Arc<RunCtx>,
    mode: ParallelMode,
    branches: &[Step],
    path: &str,
    iteration: u64,
    scope: &Scope,
    cancel: &CancellationToken,
) -> KindOut {
    let block_cancel = cancel.child_token();
    let mut results: Vec<Option<StepRun>> = (0..branches.len()).map(|_| None).collect();
    if ctx.inner.deterministic {
        for (i, b) in branches.iter().enumerate() {
            if block_cancel.is_cancelled() {
                break;
            }
            let r = run_step(ctx, b, path, iteration, scope, &block_cancel).await;
            let stop = match &r.flow {
                Flow::Done => mode == ParallelMode::FirstSuccess,
                Flow::Terminate { .. } => true,
                _ => false,
            };
            results[i] = Some(r);
            if stop {
                break;
            }
        }
    } else {
        let mut set = tokio::task::JoinSet::new();
        let mut ids = std::collections::HashMap::new();
        for (i, b) in branches.iter().enumerate() {
            let ctx = ctx.clone();
            let b = b.clone();
            let path = path.to_owned();
            let scope = scope.clone();
            let bc = block_cancel.clone();
            let handle = set.spawn(async move {
                let r = run_step(&ctx, &b, &path, iteration, &scope, &bc).await;
                (i, r)
            });
            ids.insert(handle.id(), i);
        }
        while let Some(joined) = set.join_next_with_id().await {
            match joined {
                Ok((_, (i, r))) => {
                    let stop = match &r.flow {
                        Flow::Done => mode == ParallelMode::FirstSuccess,
                        Flow::Terminate { .. } => true,
                        _ => false,
                    };
                    if stop {
                        block_cancel.cancel();
                    }
                    results[i] = Some(r);
                }
                Err(e) => {
                    // run_step catches user panics; this is a bug, keep going.
                    if let Some(&i) = ids.get(&e.id()) {
                        let b = &branches[i];
                        results[i] = Some(StepRun {
                            node: ExecNode {
                                name: b.name.clone(),
                                kind: b.kind.kind_name().to_owned(),
                                path: crate::workflow::join_path(path, &b.name),
                                iteration,
                                status: Status::Failure,
                                error: Some(format!("branch task failed: {e}")),
                                children: Vec::new(),
                                child: None,
                            },
                            value: StepValue::default(),
                            flow: Flow::Failed(format!("branch task failed: {e}")),
                            exports: Vec::new(),
                        });
                    }
                }
            }
        }
    }

    let mut children = Vec::new();
    let mut exports = Vec::new();
    let mut outputs = Map::new();
    let mut failures = Vec::new();
    let mut terminate = None;
    let mut any_success = false;
    let mut statuses = Map::new();
    for (b, r) in branches.iter().zip(results) {
        let Some(r) = r else { continue };
        statuses.insert(b.name.clone(), Value::from(r.node.status.as_str()));
        children.push(r.node);
        match r.flow {
            Flow::Done => {
                any_success = true;
                outputs.insert(b.name.clone(), r.value.output.clone());
                exports.push((b.name.clone(), r.value));
            }
            Flow::Failed(e) => {
                if b.continue_on_error {
                    outputs.insert(b.name.clone(), r.value.output.clone());
                    exports.push((
                        b.name.clone(),
                        StepValue {
                            error: Some(e),
                            ..r.value
                        },
                    ));
                } else {
                    failures.push(format!("branch '{}': {e}", b.name));
                }
            }
            f @ Flow::Terminate { .. } => {
                if terminate.is_none() {
                    terminate = Some(f);
                }
            }
            Flow::Cancelled => {}
        }
    }
    let flow = if let Some(t) = terminate {
        t
    } else if cancel.is_cancelled() {
        Flow::Cancelled
    } else {
        match mode {
            ParallelMode::FirstSuccess if any_success => Flow::Done,
            ParallelMode::FirstSuccess => {
                Flow::Failed(format!("no branch succeeded ({})", failures.join("; ")))
            }
            ParallelMode::AllSucceed if failures.is_empty() => Flow::Done,
            ParallelMode::AllSucceed => Flow::Failed(failures.join("; ")),
        }
    };
    KindOut {
        value: StepValue {
            output: Value::Object(outputs),
            ..StepValue::default()
        },
        // The branches' outputs are in their own step.completed events: the
        // block's result names how each ended, so the file grows linearly.
        result: Some(json!({ "branches": statuses })),
        flow,
        children,
        child: None,
        exports,
    }
}
