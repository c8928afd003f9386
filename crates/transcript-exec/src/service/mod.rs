//! The [`ExecutionService`]: runs a [`WorkflowSet`] on tokio, emitting
//! lifecycle, message and tool events only through the Recorder port, and
//! the audit trail and display events through their own channels.
//!
//! This module holds the public API (the service, its outcome and errors);
//! [`ServiceBuilder`] configures it (`builder.rs`), `run/` drives a run
//! (lifecycle events, sequences, timeouts, cancellation) with one file per
//! step kind in `run/steps/`, and `context.rs` holds what the two share
//! (the run's state, the step context value, how a step's body ended).

mod builder;
mod context;
mod run;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use transcript_domain::{RecordError, Recorder, RunId};

use crate::audit::Status;
use crate::emit::Emitter;
use crate::shape::Shape;
use crate::tools::ToolRouter;
use crate::workflow::{StepKind, Workflow, WorkflowError, WorkflowSet};

use builder::Inner;
pub use builder::ServiceBuilder;
use run::{RunRequest, run_workflow};

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
    /// An input's value does not have the input's declared shape (#48).
    #[error("workflow '{workflow}': input 'inputs.{input}' ({from}) is refused: {rule}")]
    BadInput {
        /// Workflow name.
        workflow: String,
        /// Input name.
        input: String,
        /// Where the value came from.
        from: InputSource,
        /// The rule it breaks, with (at most 60 characters of) the value; a `secret: true`
        /// input's rule only.
        rule: String,
    },
    /// The recorder factory could not open the run's transcript.
    #[error("cannot open the transcript: {0}")]
    Recorder(#[from] RecordError),
    /// The run's processes are to be confined but the kernel cannot (#56): the message names
    /// the kernel and the opt-out.
    #[error("{0}")]
    Sandbox(String),
    /// The workspace directory is not usable.
    #[error("workspace {path}: {message}")]
    Workspace {
        /// The directory.
        path: String,
        /// Why.
        message: String,
    },
}

/// Where an input's value came from, for [`ExecError::BadInput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputSource {
    /// Given by the caller (`--input`, a `call_workflow` step's `inputs:`).
    Given,
    /// The input's `default:`.
    Default,
}

impl std::fmt::Display for InputSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InputSource::Given => "given",
            InputSource::Default => "its default",
        })
    }
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
        self.status == Status::Succeeded
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
                if a.command.is_empty()
                    && crate::preset::Preset::of_agent(&a.provider).is_some() =>
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
        let emitter = self.inner.emitter(recorder);
        let outcome = run_workflow(
            RunRequest {
                inner: self.inner.clone(),
                set: Arc::new(set.clone()),
                workflow: wf,
                run_id,
                emitter: emitter.clone(),
                inputs,
                depth: 0,
                callers: Vec::new(),
            },
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
        let emitter = self.inner.emitter(Some(recorder));
        let outcome = run_workflow(
            RunRequest {
                inner: self.inner.clone(),
                set: Arc::new(set.clone()),
                workflow: wf,
                run_id,
                emitter: emitter.clone(),
                inputs,
                depth: 0,
                callers: Vec::new(),
            },
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
        let inputs = resolve_inputs(&wf, inputs, &self.inner)?;
        Ok((wf, inputs))
    }
}

/// Attaches the recorder failures to `outcome`; a run with any never
/// reports success (a failed close surfaces only here).
fn with_transcript_errors(mut outcome: RunOutcome, emitter: &Emitter) -> RunOutcome {
    outcome.transcript_errors = emitter.errors();
    if outcome.status == Status::Succeeded
        && let Some(first) = outcome.transcript_errors.first()
    {
        outcome.status = Status::Failed;
        outcome.error = Some(emitter.failure().unwrap_or_else(|| first.clone()));
        outcome.outputs = Map::new();
    }
    outcome
}

/// The inputs of a run of `wf` by this service: each `path` resolved beneath its workspace,
/// each value masked whole by its mask before an error shows part of it (a secret handed to
/// a child that does not declare it secret).
fn resolve_inputs(
    wf: &Workflow,
    given: Map<String, Value>,
    inner: &Inner,
) -> Result<Map<String, Value>, ExecError> {
    let mask = |t: &str| inner.observers.mask_whole(t).into_owned();
    resolve_declared(wf, given, Some(&inner.workspace), &mask)
}

impl Workflow {
    /// The run's inputs: `given` checked against the declared inputs, defaults filled in.
    /// A name the workflow does not declare is [`ExecError::UnknownInput`]; a declared input
    /// without a value or a default is [`ExecError::MissingInput`] (the service and callers
    /// that check inputs before a run share this one rule).
    pub fn resolve_inputs(
        &self,
        given: Map<String, Value>,
    ) -> Result<Map<String, Value>, ExecError> {
        resolve_declared(self, given, None, &|t: &str| t.to_owned())
    }

    /// [`Workflow::resolve_inputs`], with each `path` input also resolved beneath
    /// `workspace` by the kernel (#56, [`Shape::check_in`]): a symlink on it is refused,
    /// naming the input.
    pub fn resolve_inputs_in(
        &self,
        given: Map<String, Value>,
        workspace: &Path,
    ) -> Result<Map<String, Value>, ExecError> {
        resolve_declared(self, given, Some(workspace), &|t: &str| t.to_owned())
    }
}

fn resolve_declared(
    wf: &Workflow,
    mut given: Map<String, Value>,
    workspace: Option<&Path>,
    mask: &dyn Fn(&str) -> String,
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
    // The run's own secrets are masked in what an error shows of another input's value, as
    // the caller's mask (built from them, later) would: a secret given twice is still one.
    let secrets: Vec<String> = wf
        .inputs
        .iter()
        .filter(|i| i.secret)
        .filter_map(|i| given.get(&i.name).or(i.default.as_ref()))
        .map(crate::template::value_to_text)
        .filter(|t| t.chars().count() >= 4)
        .collect();
    let mask_all = |text: &str| {
        secrets
            .iter()
            .fold(mask(text), |t, s| t.replace(s.as_str(), crate::SECRET_MASK))
    };
    let mut out = Map::new();
    for i in &wf.inputs {
        let (value, source) = match given.remove(&i.name) {
            Some(v) => (v, InputSource::Given),
            None => match &i.default {
                Some(v) => (v.clone(), InputSource::Default),
                None => {
                    return Err(ExecError::MissingInput {
                        workflow: wf.name.clone(),
                        input: i.name.clone(),
                    });
                }
            },
        };
        let bad = |rule: String| ExecError::BadInput {
            workflow: wf.name.clone(),
            input: i.name.clone(),
            from: source,
            rule,
        };
        // The declaration was checked when the workflow loaded; a Rust-built one may not be.
        let shape = i.shape().map_err(|e| bad(e.to_string()))?;
        let value = if shape.is_typed() {
            // A secret's value is never shown, not even cut (#56): its rule only.
            let text = shape.check_in(&value, workspace).map_err(|e| {
                bad(if i.secret {
                    format!("not a {shape}: {}", e.without_value())
                } else {
                    format!("not a {shape}: {}", e.masked(&mask_all))
                })
            })?;
            // The value as its shape writes it (a URL as the WHATWG parser serializes it).
            match shape {
                Shape::Integer | Shape::Number | Shape::Boolean => {
                    serde_json::from_str(&text).unwrap_or(Value::String(text))
                }
                _ => Value::String(text),
            }
        } else {
            value
        };
        out.insert(i.name.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "compiled_templates_tests.rs"]
mod compiled_templates_tests;
