//! The `call_workflow` step: runs another workflow of the set as a child
//! run with its own transcript (decision 7), within the nesting limit; the
//! child's outputs are the step's output.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use transcript_domain::RunId;

use crate::audit::Status;
use crate::compiled::TemplateJson;
use crate::emit::Emitter;
use crate::service::context::{Flow, KindOut, StepCtx};
use crate::service::run::{RunRequest, run_workflow};
use crate::service::{RunOutcome, resolve_inputs, with_transcript_errors};
use crate::template::StepValue;

/// Runs a `call_workflow` step calling `workflow` as run `child_run_id`
/// (none past the nesting limit).
pub(in crate::service) async fn run(
    sc: &StepCtx<'_>,
    workflow: &str,
    inputs: &BTreeMap<String, TemplateJson>,
    child_run_id: Option<RunId>,
) -> KindOut {
    let (ctx, scope, cancel) = (sc.run, sc.scope, sc.cancel);
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
    let given = match inputs
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.render(scope)?)))
        .collect::<Result<Map<String, Value>, crate::template::TemplateError>>()
    {
        Ok(given) => given,
        Err(e) => return KindOut::flow(Flow::Failed(format!("inputs: {e}"))),
    };
    let child_inputs = match resolve_inputs(&target, given, &ctx.inner) {
        Ok(i) => i,
        Err(e) => return KindOut::flow(Flow::Failed(e.to_string())),
    };
    let child_emitter = match open_child_transcript(sc, child_id).await {
        Ok(emitter) => emitter,
        Err(message) => return KindOut::flow(Flow::Failed(message)),
    };
    let outcome = run_workflow(
        RunRequest {
            inner: ctx.inner.clone(),
            set: ctx.set.clone(),
            workflow: target,
            run_id: child_id,
            emitter: child_emitter.clone(),
            inputs: child_inputs,
            depth: ctx.depth + 1,
            callers: ctx
                .callers
                .iter()
                .cloned()
                .chain([(sc.path.to_owned(), sc.iteration)])
                .collect(),
        },
        cancel.child_token(),
    )
    .await;
    child_emitter.close().await;
    let outcome = with_transcript_errors(outcome, &child_emitter);
    // The parent reports its children's transcript failures too.
    for e in &outcome.transcript_errors {
        ctx.emitter.note_error(format!("child run {child_id}: {e}"));
    }
    step_outcome(outcome)
}

/// The emitter of child run `child_id`, writing to a transcript from the
/// factory (none without one). A transcript that cannot be opened fails
/// the step, noted as a transcript failure of the parent: same policy as a
/// failed write, the child does not run without its transcript.
async fn open_child_transcript(sc: &StepCtx<'_>, child_id: RunId) -> Result<Emitter, String> {
    let ctx = sc.run;
    let recorder = match &ctx.inner.recorder_factory {
        Some(f) => match f.create(child_id, Some(ctx.run_id)).await {
            Ok(r) => Some(r),
            Err(e) => {
                let message = format!(
                    "transcript write failed: cannot open the transcript of child run {child_id}: {}",
                    crate::emit::error_chain(&e)
                );
                ctx.emitter.note_error(message.clone());
                return Err(message);
            }
        },
        None => None,
    };
    Ok(ctx.inner.emitter(recorder))
}

/// The step's end from the child run's: its outputs are the step's output
/// (and result, when it succeeded).
fn step_outcome(outcome: RunOutcome) -> KindOut {
    let outputs = Value::Object(outcome.outputs.clone());
    let flow = match outcome.status {
        Status::Succeeded => Flow::Done,
        // A run outcome is never incomplete; read it as the failure it would be.
        Status::Failed | Status::Incomplete => Flow::Failed(format!(
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
        result: (outcome.status == Status::Succeeded).then_some(outputs),
        child: Some(Box::new(outcome)),
        ..KindOut::flow(flow)
    }
}
