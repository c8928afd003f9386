//! Driving a run: the run context, the run's and each step's lifecycle
//! events (transcript, audit trail, display), sequences, step timeouts and
//! cancellation; [`run_kind`] hands each step's body to its kind's file in
//! `steps/`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventDraft, Payload, RawJson, RunId, StepPayload};

use super::builder::Inner;
use super::steps;
use super::{ExecNode, RunOutcome};
use crate::audit::{AuditRecord, DisplayEvent, Status};
use crate::emit::Emitter;
use crate::template::{Scope, StepValue};
use crate::tools::CallScope;
use crate::workflow::{Step, StepKind, Workflow, WorkflowSet};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One run's state, shared by its steps (a child run has its own).
pub(super) struct RunCtx {
    pub(super) inner: Arc<Inner>,
    pub(super) set: Arc<WorkflowSet>,
    pub(super) run_id: RunId,
    pub(super) emitter: Emitter,
    pub(super) depth: usize,
    pub(super) calls: Arc<AtomicU64>,
    audit_errors: Mutex<Vec<String>>,
    /// Agent executions per `<path>#<iteration>` (call id prefixes).
    agent_runs: Mutex<std::collections::HashMap<String, u64>>,
}

impl RunCtx {
    /// `<path>#<iteration>`, made unique within the run: an execution of
    /// the same path and iteration seen before (an inner loop inside an
    /// outer one) gets `~<n>` appended (decision 5 qualified call ids).
    pub(super) fn agent_call_prefix(&self, path: &str, iteration: u64) -> String {
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

    /// Appends `record` to the audit trail (off the runtime workers),
    /// keeping a failure for the run's outcome.
    pub(super) async fn audit(&self, record: AuditRecord) {
        if let Some(e) = self.inner.observers.audit(record).await
            && let Ok(mut errs) = self.audit_errors.lock()
        {
            errs.push(e);
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Flow {
    Done,
    Failed(String),
    Cancelled,
    Terminate { success: bool, message: String },
}

pub(super) struct StepRun {
    pub(super) node: ExecNode,
    pub(super) value: StepValue,
    pub(super) flow: Flow,
    /// Extra scope entries for the enclosing sequence (parallel branches).
    pub(super) exports: Vec<(String, StepValue)>,
}

/// What a step kind's body produced, before the lifecycle around it.
pub(super) struct KindOut {
    pub(super) value: StepValue,
    pub(super) result: Option<Value>,
    pub(super) flow: Flow,
    pub(super) children: Vec<ExecNode>,
    pub(super) child: Option<Box<RunOutcome>>,
    pub(super) exports: Vec<(String, StepValue)>,
}

impl KindOut {
    pub(super) fn flow(flow: Flow) -> Self {
        Self {
            value: StepValue::default(),
            result: None,
            flow,
            children: Vec::new(),
            child: None,
            exports: Vec::new(),
        }
    }

    pub(super) fn done(output: Value, result: Option<Value>) -> Self {
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
pub(super) fn run_workflow(
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
        })
        .await;
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
        let outputs = if status == Status::Success {
            render_outputs(&wf, &scope)
        } else {
            Map::new()
        };
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
        })
        .await;
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

pub(super) struct SeqOut {
    pub(super) nodes: Vec<ExecNode>,
    pub(super) flow: Flow,
    pub(super) last: Value,
}

pub(super) async fn run_seq(
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

pub(super) fn run_step<'a>(
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
                let p = started_payload(step, kind, scope);
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
        })
        .await;
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
        let (status, error) = step_status(&out.flow);
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
        })
        .await;
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

pub(super) fn call_scope(
    ctx: &RunCtx,
    path: &str,
    iteration: u64,
    cancel: &CancellationToken,
) -> CallScope {
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

/// How a step ended, from the flow its body returned.
fn step_status(flow: &Flow) -> (Status, Option<String>) {
    match flow {
        Flow::Done | Flow::Terminate { success: true, .. } => (Status::Success, None),
        Flow::Failed(e) => (Status::Failure, Some(e.clone())),
        Flow::Terminate { message, .. } => (Status::Failure, Some(message.clone())),
        Flow::Cancelled => (Status::Cancelled, Some("cancelled".to_owned())),
    }
}

/// A successful run's outputs: each `outputs:` template rendered in the
/// run's final scope (a template that does not parse is kept as text).
fn render_outputs(wf: &Workflow, scope: &Scope) -> Map<String, Value> {
    wf.outputs
        .iter()
        .map(|(name, text)| {
            let v = match crate::template::Template::parse(text) {
                Ok(t) => t.render_value(scope),
                Err(_) => Value::String(text.clone()),
            };
            (name.clone(), v)
        })
        .collect()
}

/// The payload of a step's `step.started`: a command step's carries what
/// it is about to run as its `result` (see `steps::command::started_result`).
fn started_payload(step: &Step, kind: &str, scope: &Scope) -> StepPayload {
    let p = StepPayload::new(step.name.clone(), kind);
    match &step.kind {
        StepKind::Command { command, env } => p.with_result(
            RawJson::from_value(&steps::command::started_result(command, env, scope))
                .unwrap_or_default(),
        ),
        _ => p,
    }
}

/// Awaits `fut` (a custom step or an agent); on cancellation it gets
/// `grace` to finish (closing what it opened) before it is dropped.
pub(super) async fn with_grace<T>(
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

/// Runs `step`'s body: its kind's file in `steps/`.
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
        StepKind::Command { command, env } => {
            steps::command::run(ctx, command, env, scope, cancel).await
        }
        StepKind::Operation { tool, input } => {
            steps::operation::run(ctx, tool, input, path, iteration, scope, cancel).await
        }
        StepKind::Terminal { success, message } => steps::terminal::run(*success, message, scope),
        StepKind::Custom { type_name, params } => {
            steps::custom::run(ctx, step, type_name, params, path, iteration, scope, cancel).await
        }
        StepKind::Agent(spec) => {
            steps::agent::run(ctx, step, spec, path, iteration, scope, cancel).await
        }
        StepKind::Parallel { mode, branches } => {
            steps::parallel::run(ctx, *mode, branches, path, iteration, scope, cancel).await
        }
        StepKind::ForEach { items, steps } => {
            steps::for_each::run(ctx, items, steps, path, scope, cancel).await
        }
        StepKind::While {
            condition,
            max_iterations,
            steps,
        } => {
            steps::while_loop::run(ctx, condition, *max_iterations, steps, path, scope, cancel)
                .await
        }
        StepKind::CallWorkflow { workflow, inputs } => {
            steps::call_workflow::run(ctx, workflow, inputs, scope, cancel, child_run_id).await
        }
    }
}
