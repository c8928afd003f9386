//! What the run driver (`run/`) and the step kinds (`run/steps/`) share:
//! the run's state ([`RunCtx`]), the one value a step runs with
//! ([`StepCtx`]: its run, step, path, iteration, scope and cancellation),
//! how a step's body ended ([`Flow`], [`KindOut`]) and the cancellation
//! grace ([`with_grace`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use transcript_domain::RunId;

use super::builder::Inner;
use super::{ExecNode, RunOutcome};
use crate::audit::AuditRecord;
use crate::emit::Emitter;
use crate::template::{Scope, StepValue};
use crate::tools::CallScope;
use crate::workflow::{Step, WorkflowSet};

/// One run's state, shared by its steps (a child run has its own).
pub(super) struct RunCtx {
    pub(super) inner: Arc<Inner>,
    pub(super) set: Arc<WorkflowSet>,
    pub(super) run_id: RunId,
    pub(super) emitter: Emitter,
    pub(super) depth: usize,
    /// The `call_workflow` steps that led to this run, outermost first (`(path, iteration)`).
    pub(super) callers: Vec<(String, u64)>,
    pub(super) calls: Arc<AtomicU64>,
    audit_errors: Mutex<Vec<String>>,
    /// Agent executions per `<path>#<iteration>` (call id prefixes).
    agent_runs: Mutex<HashMap<String, u64>>,
}

impl RunCtx {
    /// The state of run `run_id` at nesting `depth` (called by `callers`), writing through
    /// `emitter`.
    pub(super) fn new(
        inner: Arc<Inner>,
        set: Arc<WorkflowSet>,
        run_id: RunId,
        emitter: Emitter,
        depth: usize,
        callers: Vec<(String, u64)>,
    ) -> Self {
        Self {
            inner,
            set,
            run_id,
            emitter,
            depth,
            callers,
            calls: Arc::default(),
            audit_errors: Mutex::default(),
            agent_runs: Mutex::default(),
        }
    }

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

    /// The audit trail failures seen so far.
    pub(super) fn audit_errors(&self) -> Vec<String> {
        self.audit_errors
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default()
    }
}

/// One step execution: what every step kind runs with.
#[derive(Clone, Copy)]
pub(super) struct StepCtx<'a> {
    /// The run it belongs to.
    pub(super) run: &'a Arc<RunCtx>,
    /// The step.
    pub(super) step: &'a Step,
    /// Its dot-separated path (decision 5).
    pub(super) path: &'a str,
    /// The innermost loop iteration it runs in.
    pub(super) iteration: u64,
    /// The values its templates read.
    pub(super) scope: &'a Scope,
    /// Cancelled when the run is cancelled or the step times out.
    pub(super) cancel: &'a CancellationToken,
    /// Where the step's processes' refused destinations go (#57), read when it ends.
    pub(super) net_log: &'a Arc<crate::sandbox::net::RefusedLog>,
}

impl StepCtx<'_> {
    /// Where the step's tool calls happen (for the router).
    pub(super) fn call_scope(&self) -> CallScope {
        CallScope {
            emitter: self.run.emitter.clone(),
            path: self.path.to_owned(),
            iteration: self.iteration,
            workspace: self.run.inner.workspace.clone(),
            cancel: self.cancel.clone(),
            call_counter: self.run.calls.clone(),
            limits: self.limits(),
        }
    }

    /// The process limits of the step's processes: the run's, confined as the run and the
    /// step's `sandbox:` say ([`crate::sandbox`]).
    pub(super) fn limits(&self) -> crate::process::ProcessLimits {
        let inner = &self.run.inner;
        let mut limits = inner.limits.clone();
        limits.confinement = inner
            .sandbox
            .for_step(&inner.workspace, &self.step.sandbox)
            // The `| file` values the step's own command line and environment name are its
            // to read (never the other steps' files of the run).
            .map(|c| self.file_values().into_iter().fold(c, |c, p| c.read(p)))
            .map(|c| {
                if !inner.sandbox.trusts_literals() {
                    return c;
                }
                self.literal_paths()
                    .into_iter()
                    .fold(c, |c, p| c.read_named(p))
            });
        limits.network = inner
            .sandbox
            .net_for_step(self.step.network.as_ref())
            .map(|n| n.with_log(Arc::clone(self.net_log)));
        limits
    }

    /// The files of the run's `| file` channel that the step's argv, agent `command:` or
    /// `env:` values render to (the same content renders to the same file within a run).
    fn file_values(&self) -> Vec<std::path::PathBuf> {
        use crate::workflow::{CommandLine, StepKind};
        let Some(dir) = self.scope.files().and_then(|f| f.dir()) else {
            return Vec::new();
        };
        let texts: Vec<&crate::compiled::TemplateText> = match &self.step.kind {
            StepKind::Command { command, env, .. } => {
                let argv = match command {
                    CommandLine::Argv(argv) => argv.iter().collect(),
                    CommandLine::Shell(_) => Vec::new(),
                };
                argv.into_iter().chain(env.values()).collect()
            }
            StepKind::Agent(spec) => spec.command.iter().chain(spec.env.values()).collect(),
            _ => Vec::new(),
        };
        texts
            .into_iter()
            .filter(|t| t.source().contains("file"))
            .filter_map(|t| t.render(self.scope).ok())
            // A whole element, or the value of a `--name=` option (`--config={{ x | file }}`).
            .filter_map(|r| {
                let at = r.find(dir.to_str()?)?;
                Some(std::path::PathBuf::from(&r[at..]))
            })
            // Exactly a file of the step's channel (never `dir/../x`, which data could write).
            .filter(|p| p.parent() == Some(dir.as_path()))
            .collect()
    }

    /// The existing files and directories outside the workspace the step's argv (a
    /// command's, an agent's `command:`) names literally: absolute elements without a
    /// template but `{{workflow.dir}}`. The author's, never data's: readable when confined.
    /// (A relative element is inside the workspace, already granted, where data may have
    /// planted a symbolic link: it is never resolved into a grant.)
    fn literal_paths(&self) -> Vec<std::path::PathBuf> {
        use crate::workflow::{CommandLine, StepKind};
        let argv = match &self.step.kind {
            StepKind::Command {
                command: CommandLine::Argv(argv),
                ..
            } => argv,
            StepKind::Agent(spec) => &spec.command,
            _ => return Vec::new(),
        };
        argv.iter()
            .filter_map(|t| {
                let rest = t
                    .source()
                    .replace("{{workflow.dir}}", "")
                    .replace("{{ workflow.dir }}", "");
                if rest.contains("{{") || rest.contains("{%") {
                    return None;
                }
                let path = std::path::PathBuf::from(t.render(self.scope).ok()?);
                (path.is_absolute() && path.exists()).then_some(path)
            })
            .collect()
    }

    /// Whether the step's processes run unconfined (`sandbox: off`, or the run's).
    pub(super) fn unconfined(&self) -> bool {
        self.run.inner.sandbox.mode == crate::sandbox::SandboxMode::Off || self.step.sandbox.off
    }

    /// Whether the step's processes use the host's network (`network: all` or the run's
    /// `--network all`, #57).
    pub(super) fn host_network(&self) -> bool {
        self.run.inner.sandbox.is_host_network()
            || self.step.network == Some(crate::sandbox::net::StepNetwork::All)
    }
}

/// How a step, a sequence or a run ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Flow {
    Done,
    Failed(String),
    Cancelled,
    Terminate { success: bool, message: String },
}

/// A step after its lifecycle: its node, value, flow and exports.
pub(super) struct StepRun {
    pub(super) node: ExecNode,
    pub(super) value: StepValue,
    pub(super) flow: Flow,
    /// Extra scope entries for the enclosing sequence (parallel branches).
    pub(super) exports: Vec<(String, StepValue)>,
}

/// What a sequence of steps produced.
pub(super) struct SeqOut {
    pub(super) nodes: Vec<ExecNode>,
    pub(super) flow: Flow,
    /// The output of the last step that completed.
    pub(super) last: Value,
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
    /// A body that ended with `flow` and produced nothing.
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

    /// A body that succeeded with `output` (and recorded `result`).
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

    /// A body that ended with `flow` after running `children`.
    pub(super) fn with_children(flow: Flow, children: Vec<ExecNode>) -> Self {
        Self {
            children,
            ..Self::flow(flow)
        }
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
