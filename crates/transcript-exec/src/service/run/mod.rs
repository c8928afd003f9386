//! Driving a run: the run's and each step's lifecycle events (transcript,
//! audit trail, display), sequences, step timeouts and cancellation;
//! [`run_kind`] hands each step's body to its kind's file in `steps/`,
//! and the kinds that hold steps (loops, `parallel`, `call_workflow`) call
//! back into [`run_seq`], [`run_step`] and [`run_workflow`].

mod steps;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventDraft, Payload, RawJson, RunId, StepPayload, Timestamp};

use super::builder::Inner;
use super::context::{Flow, KindOut, RunCtx, SeqOut, StepCtx, StepRun};
use super::{ExecNode, RunOutcome};
use crate::audit::{AuditEvent, AuditRecord, DisplayEvent, Status};
use crate::emit::Emitter;
use crate::status::CANCELLED;
use crate::template::{Scope, StepValue};
use crate::workflow::{Step, StepKind, Workflow, WorkflowSet};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A run to drive: which workflow of which set, under which id, writing
/// through which emitter, with which inputs, at which nesting depth.
pub(super) struct RunRequest {
    pub(super) inner: Arc<Inner>,
    pub(super) set: Arc<WorkflowSet>,
    pub(super) workflow: Arc<Workflow>,
    pub(super) run_id: RunId,
    pub(super) emitter: Emitter,
    pub(super) inputs: Map<String, Value>,
    pub(super) depth: usize,
    /// The `call_workflow` steps that led to this run, outermost first.
    pub(super) callers: Vec<(String, u64)>,
}

/// How a run or a step ended, as recorded.
struct Ending {
    status: Status,
    error: Option<String>,
}

/// Runs `req`'s workflow to its end: `run.started`, its steps, then
/// `run.completed` with the outputs of a successful run.
pub(super) fn run_workflow(
    req: RunRequest,
    cancel: CancellationToken,
) -> BoxFuture<'static, RunOutcome> {
    Box::pin(async move {
        // The run stops at its first failed transcript write (see emit.rs).
        let cancel = cancel.child_token();
        let emitter = req.emitter.stopping(cancel.clone());
        let wf = req.workflow;
        let ctx = Arc::new(RunCtx::new(
            req.inner,
            req.set,
            req.run_id,
            emitter.clone(),
            req.depth,
            req.callers,
        ));
        announce_run_start(&ctx, &wf, &req.inputs).await;
        // `{{ x | file }}` writes under the run's private directory, removed with the scope
        // at the end of the run (crate::file_channel).
        let files = Arc::new(crate::file_channel::FileChannel::in_temp_dir(ctx.run_id));
        let mut scope = Scope::new(req.inputs)
            .with_workflow_dir(wf.dir.as_deref())
            .with_files(files)
            .with_workspace(&ctx.inner.workspace)
            .with_mask(ctx.inner.observers.mask.clone());
        let seq = run_seq(&ctx, &wf.steps, "", 0, &mut scope, &cancel).await;
        let ending = run_ending(seq.flow, &emitter);
        let (ending, outputs) = match ending.status {
            Status::Succeeded => match render_outputs(&wf, &scope) {
                Ok(outputs) => (ending, outputs),
                Err(e) => (
                    Ending {
                        status: Status::Failed,
                        error: Some(e),
                    },
                    Map::new(),
                ),
            },
            _ => (ending, Map::new()),
        };
        announce_run_end(&ctx, &wf, &ending, &outputs).await;
        RunOutcome {
            run_id: ctx.run_id,
            workflow: wf.name.clone(),
            status: ending.status,
            error: ending.error,
            outputs,
            steps: seq.nodes,
            transcript_errors: Vec::new(),
            audit_errors: ctx.audit_errors(),
        }
    })
}

/// The run-level audit record `event` of `wf`.
fn run_audit(ctx: &RunCtx, wf: &Workflow, event: AuditEvent, ts: Timestamp) -> AuditRecord {
    AuditRecord {
        ts,
        run_id: ctx.run_id,
        event,
        path: String::new(),
        iteration: 0,
        name: wf.name.clone(),
        kind: "workflow".into(),
        status: None,
        error: None,
        child_run_id: None,
    }
}

/// The run's inputs as `run.started` records them (wire decision 16): a secret input's
/// value is `"***"`, whatever it holds.
fn recorded_inputs(wf: &Workflow, inputs: &Map<String, Value>) -> Option<RawJson> {
    let masked: Map<String, Value> = inputs
        .iter()
        .map(|(name, value)| {
            let secret = wf.inputs.iter().any(|i| i.secret && i.name == *name);
            let value = if secret {
                Value::String(crate::SECRET_MASK.to_owned())
            } else {
                value.clone()
            };
            (name.clone(), value)
        })
        .collect();
    RawJson::from_value(&masked).ok()
}

/// The workspace root `run.started` records (wire decision 20): the canonical path, but none
/// for a deterministic service (its transcripts are byte-stable goldens, free of machine
/// paths).
fn recorded_workspace(ctx: &RunCtx) -> Option<String> {
    (!ctx.inner.deterministic).then(|| ctx.inner.workspace.display().to_string())
}

/// `run.started` (with the run's provenance), the `run_start` audit record and the display
/// event.
async fn announce_run_start(ctx: &RunCtx, wf: &Workflow, inputs: &Map<String, Value>) {
    let (replay_of, forked_at) = match ctx.depth {
        0 => (ctx.inner.replay_of.clone(), ctx.inner.forked_at.clone()),
        _ => (None, None),
    };
    ctx.emitter
        .emit_draft(|| {
            EventDraft::run_level(Payload::RunStarted(
                StepPayload::new(wf.name.clone(), "workflow")
                    .with_provenance(
                        wf.source.clone(),
                        recorded_inputs(wf, inputs),
                        replay_of.clone(),
                    )
                    .with_forked_at(forked_at.clone())
                    .with_workspace_opt(recorded_workspace(ctx)),
            ))
        })
        .await;
    let obs = &ctx.inner.observers;
    let at = obs.now();
    ctx.audit(run_audit(ctx, wf, AuditEvent::RunStart, at))
        .await;
    obs.display(DisplayEvent::RunStarted {
        at,
        run_id: ctx.run_id,
        workflow: wf.name.clone(),
    });
}

/// How the run ended, from its sequence's flow; a failed transcript write
/// overrides it (a run that lost data never reports success).
fn run_ending(flow: Flow, emitter: &Emitter) -> Ending {
    if let Some(failure) = emitter.failure() {
        return Ending {
            status: Status::Failed,
            error: Some(failure),
        };
    }
    let (status, error) = match flow {
        Flow::Done | Flow::Terminate { success: true, .. } => (Status::Succeeded, None),
        Flow::Failed(e) => (Status::Failed, Some(e)),
        Flow::Terminate { message, .. } if message.is_empty() => {
            (Status::Failed, Some("terminated with failure".to_owned()))
        }
        Flow::Terminate { message, .. } => (Status::Failed, Some(message)),
        Flow::Cancelled => (Status::Cancelled, Some(CANCELLED.to_owned())),
    };
    Ending { status, error }
}

/// `run.completed` (with the outputs), the `run_end` audit record and the
/// display event.
async fn announce_run_end(
    ctx: &RunCtx,
    wf: &Workflow,
    ending: &Ending,
    outputs: &Map<String, Value>,
) {
    ctx.emitter
        .emit_draft(|| {
            let mut p = StepPayload::new(wf.name.clone(), "workflow");
            if let Some(e) = &ending.error {
                p = p.with_error(e.clone());
            }
            if !outputs.is_empty() {
                p = p.with_result(RawJson::from_value(outputs).unwrap_or_default());
            }
            EventDraft::run_level(Payload::RunCompleted(p))
        })
        .await;
    let obs = &ctx.inner.observers;
    let at = obs.now();
    ctx.audit(AuditRecord {
        status: Some(ending.status),
        error: ending.error.clone(),
        ..run_audit(ctx, wf, AuditEvent::RunEnd, at)
    })
    .await;
    obs.display(DisplayEvent::RunFinished {
        at,
        run_id: ctx.run_id,
        status: ending.status,
        error: ending.error.clone(),
    });
}

/// Runs `steps` in order under `prefix`, each seeing the values of those
/// before it in `scope`; stops at the first failure (unless the step
/// continues on error), a cancellation or a terminal step.
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

/// Runs one step under `prefix`: its started event, its kind's body
/// (within its timeout), its completed event.
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
        let net_log = Arc::new(crate::sandbox::net::RefusedLog::default());
        let sc = StepCtx {
            run: ctx,
            step,
            path: &path,
            iteration,
            scope,
            cancel,
            net_log: &net_log,
        };
        // Past the nesting limit no child run starts, so none is named.
        let is_call = matches!(step.kind, StepKind::CallWorkflow { .. });
        let child_run_id = (is_call && ctx.depth < ctx.inner.max_call_depth)
            .then(|| ctx.inner.run_ids.next_run_id());
        let started_at = announce_step_start(&sc, child_run_id).await;
        let mut out = run_within_timeout(&sc, child_run_id).await;
        let ending = step_ending(&out.flow);
        if let Some(e) = &ending.error
            && out.value.error.is_none()
            && ending.status == Status::Failed
        {
            out.value.error = Some(e.clone());
        }
        announce_step_end(&sc, child_run_id, started_at, &ending, out.result.as_ref()).await;
        StepRun {
            node: ExecNode {
                name: step.name.clone(),
                kind: step.kind.kind_name().to_owned(),
                path: path.clone(),
                iteration,
                status: ending.status,
                error: ending.error,
                children: out.children,
                child: out.child,
            },
            value: out.value,
            flow: out.flow,
            exports: out.exports,
        }
    })
}

/// The step's lifecycle event (`call_workflow.*` for a call, `step.*`
/// otherwise) carrying `payload`, naming its child run.
fn lifecycle_draft(
    sc: &StepCtx<'_>,
    child_run_id: Option<RunId>,
    payload: StepPayload,
    started: bool,
) -> EventDraft {
    let is_call = matches!(sc.step.kind, StepKind::CallWorkflow { .. });
    let payload = match (is_call, started) {
        (true, true) => Payload::CallWorkflowStarted(payload),
        (true, false) => Payload::CallWorkflowCompleted(payload),
        (false, true) => Payload::StepStarted(payload),
        (false, false) => Payload::StepCompleted(payload),
    };
    let draft = EventDraft::new(sc.path.to_owned(), sc.iteration, payload);
    match child_run_id {
        Some(child) => draft.with_child(child),
        None => draft,
    }
}

/// The step-level audit record `event` of `sc`'s step.
fn step_audit(
    sc: &StepCtx<'_>,
    event: AuditEvent,
    ts: Timestamp,
    child_run_id: Option<RunId>,
) -> AuditRecord {
    AuditRecord {
        ts,
        run_id: sc.run.run_id,
        event,
        path: sc.path.to_owned(),
        iteration: sc.iteration,
        name: sc.step.name.clone(),
        kind: sc.step.kind.kind_name().to_owned(),
        status: None,
        error: None,
        child_run_id,
    }
}

/// The started event, the `step_start` audit record and the display event;
/// returns the audit clock's reading.
async fn announce_step_start(sc: &StepCtx<'_>, child_run_id: Option<RunId>) -> Timestamp {
    let ctx = sc.run;
    ctx.emitter
        .emit_draft(|| lifecycle_draft(sc, child_run_id, started_payload(sc), true))
        .await;
    let obs = &ctx.inner.observers;
    let at = obs.now();
    ctx.audit(step_audit(sc, AuditEvent::StepStart, at, child_run_id))
        .await;
    obs.display(DisplayEvent::StepStarted {
        at,
        path: sc.path.to_owned(),
        iteration: sc.iteration,
        kind: sc.step.kind.kind_name().to_owned(),
    });
    at
}

/// The completed event (with the error and result), the `step_end` audit
/// record and the display event with the time since `started_at`.
async fn announce_step_end(
    sc: &StepCtx<'_>,
    child_run_id: Option<RunId>,
    started_at: Timestamp,
    ending: &Ending,
    result: Option<&Value>,
) {
    let ctx = sc.run;
    ctx.emitter
        .emit_draft(|| {
            let mut p = StepPayload::new(sc.step.name.clone(), sc.step.kind.kind_name());
            if let Some(e) = &ending.error {
                p = p.with_error(e.clone());
            }
            if let Some(r) = result {
                p = p.with_result(RawJson::from_value(r).unwrap_or_default());
            }
            p.network_refused = network_refused(sc);
            lifecycle_draft(sc, child_run_id, p, false)
        })
        .await;
    let obs = &ctx.inner.observers;
    let at = obs.now();
    ctx.audit(AuditRecord {
        status: Some(ending.status),
        error: ending.error.clone(),
        ..step_audit(sc, AuditEvent::StepEnd, at, child_run_id)
    })
    .await;
    obs.display(DisplayEvent::StepFinished {
        at,
        path: sc.path.to_owned(),
        iteration: sc.iteration,
        status: ending.status,
        elapsed_ms: at.millis_since(started_at),
        error: ending.error.clone(),
    });
}

/// Decision 19: the destinations the step's processes tried and were refused, each masked
/// whole like any text of the run (a host name is data's choice); `None` when none was.
fn network_refused(sc: &StepCtx<'_>) -> Option<transcript_domain::NetworkRefused> {
    let refused = sc.net_log.snapshot();
    if refused.count == 0 {
        return None;
    }
    let obs = &sc.run.inner.observers;
    Some(transcript_domain::NetworkRefused {
        count: refused.count as u64,
        first: refused
            .first
            .iter()
            .map(|d| obs.mask_whole(d).into_owned())
            .collect(),
    })
}

/// Runs the step's body under its own cancellation; past the step's
/// `timeout` that cancellation fires, the body closes what it opened and
/// the step fails (unless the run was cancelled or a terminal step ended
/// it).
async fn run_within_timeout(sc: &StepCtx<'_>, child_run_id: Option<RunId>) -> KindOut {
    let step_cancel = sc.cancel.child_token();
    let body = run_kind(
        StepCtx {
            cancel: &step_cancel,
            ..*sc
        },
        child_run_id,
    );
    let Some(limit) = sc.step.timeout else {
        return body.await;
    };
    let mut body = std::pin::pin!(body);
    let first = tokio::select! {
        r = &mut body => Some(r),
        _ = tokio::time::sleep(limit) => None,
    };
    if let Some(out) = first {
        return out;
    }
    // Cancel inside the step and let it close what it opened.
    step_cancel.cancel();
    let mut out = body.await;
    if !sc.cancel.is_cancelled() && !matches!(out.flow, Flow::Terminate { .. }) {
        out.flow = Flow::Failed(format!("timed out after {}ms", limit.as_millis()));
    }
    out
}

/// How a step ended, from the flow its body returned.
fn step_ending(flow: &Flow) -> Ending {
    let (status, error) = match flow {
        Flow::Done | Flow::Terminate { success: true, .. } => (Status::Succeeded, None),
        Flow::Failed(e) => (Status::Failed, Some(e.clone())),
        Flow::Terminate { message, .. } => (Status::Failed, Some(message.clone())),
        Flow::Cancelled => (Status::Cancelled, Some(CANCELLED.to_owned())),
    };
    Ending { status, error }
}

/// A successful run's outputs: each `outputs:` template rendered in the
/// run's final scope. One that did not compile (validation refuses it
/// before the run) fails the run, naming the output.
fn render_outputs(wf: &Workflow, scope: &Scope) -> Result<Map<String, Value>, String> {
    wf.outputs
        .iter()
        .map(|(name, text)| match text.render_value(scope) {
            Ok(v) => Ok((name.clone(), v)),
            Err(e) => Err(format!("output '{name}': {e}")),
        })
        .collect()
}

/// The payload of a step's `step.started`: a command step's carries what
/// it is about to run as its `result` (see `steps::command::started_result`).
fn started_payload(sc: &StepCtx<'_>) -> StepPayload {
    let mut p = StepPayload::new(sc.step.name.clone(), sc.step.kind.kind_name());
    // Decision 18: a step whose processes run unconfined says so.
    if sc.unconfined() && starts_processes(&sc.step.kind) {
        p.sandbox = Some("off".to_owned());
    }
    // Decision 19: a step whose processes use the host's network says so.
    if sc.host_network() && starts_processes(&sc.step.kind) {
        p.network = Some("all".to_owned());
    }
    match &sc.step.kind {
        StepKind::Command { command, env, .. } => p.with_result(
            RawJson::from_value(&steps::command::started_result(command, env, sc.scope))
                .unwrap_or_default(),
        ),
        _ => p,
    }
}

/// Whether a step of `kind` may start processes itself (composite steps, calls and terminal
/// steps start none of their own).
fn starts_processes(kind: &StepKind) -> bool {
    matches!(
        kind,
        StepKind::Command { .. }
            | StepKind::Agent(_)
            | StepKind::Operation { .. }
            | StepKind::Custom { .. }
    )
}

/// Runs the step's body: its kind's file in `steps/`.
async fn run_kind(sc: StepCtx<'_>, child_run_id: Option<RunId>) -> KindOut {
    match &sc.step.kind {
        StepKind::Command {
            command,
            env,
            stdin,
        } => steps::command::run(&sc, command, env, stdin.as_ref()).await,
        StepKind::Operation { tool, input } => steps::operation::run(&sc, tool, input).await,
        StepKind::Terminal { success, message } => steps::terminal::run(&sc, *success, message),
        StepKind::Custom { type_name, params } => steps::custom::run(&sc, type_name, params).await,
        StepKind::Agent(spec) => steps::agent::run(&sc, spec).await,
        StepKind::Parallel { mode, branches } => steps::parallel::run(&sc, *mode, branches).await,
        StepKind::ForEach { items, steps } => steps::for_each::run(&sc, items, steps).await,
        StepKind::While {
            condition,
            max_iterations,
            steps,
        } => steps::while_loop::run(&sc, condition, *max_iterations, steps).await,
        StepKind::CallWorkflow { workflow, inputs } => {
            steps::call_workflow::run(&sc, workflow, inputs, child_run_id).await
        }
    }
}
