//! The `while` step: its steps while the condition holds, failing once
//! `max_iterations` is reached with the condition still true.

use serde_json::{Value, json};

use crate::compiled::ConditionText;
use crate::service::context::{Flow, KindOut, StepCtx};
use crate::service::run::run_seq;
use crate::template::LoopFrame;
use crate::workflow::Step;

/// Runs `sc`'s step, a `while` loop over `steps`.
pub(in crate::service) async fn run(
    sc: &StepCtx<'_>,
    condition: &ConditionText,
    max_iterations: u64,
    steps: &[Step],
) -> KindOut {
    let (ctx, path, cancel) = (sc.run, sc.path, sc.cancel);
    // Compiled when the workflow was built or loaded; validation refuses a
    // condition that does not parse, and one that reaches here anyway fails
    // the step.
    let condition = match condition.compiled() {
        Ok(c) => c,
        Err(e) => return KindOut::flow(Flow::Failed(format!("condition: {e}"))),
    };
    let mut s = sc.scope.clone();
    let mut children = Vec::new();
    let mut last = Value::Null;
    let mut i = 0u64;
    loop {
        s.set_loop(LoopFrame {
            item: Value::Null,
            index: i,
        });
        match condition.eval(&s) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                return KindOut::with_children(Flow::Failed(format!("condition: {e}")), children);
            }
        }
        if i >= max_iterations {
            return KindOut::with_children(
                Flow::Failed(format!(
                    "condition still true after {max_iterations} iterations"
                )),
                children,
            );
        }
        if cancel.is_cancelled() {
            return KindOut::with_children(Flow::Cancelled, children);
        }
        let out = run_seq(ctx, steps, path, i, &mut s, cancel).await;
        children.extend(out.nodes);
        match out.flow {
            Flow::Done => last = out.last,
            Flow::Failed(e) => {
                return KindOut::with_children(
                    Flow::Failed(format!("iteration {i}: {e}")),
                    children,
                );
            }
            flow => {
                return KindOut::with_children(flow, children);
            }
        }
        i += 1;
    }
    KindOut {
        children,
        ..KindOut::done(last, Some(json!({ "iterations": i })))
    }
}
