//! The `while` step: its steps while the condition holds, failing once
//! `max_iterations` is reached with the condition still true.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::condition::eval_condition;
use crate::service::run::{Flow, KindOut, RunCtx, run_seq};
use crate::template::{LoopFrame, Scope};
use crate::workflow::Step;

/// Runs a `while` step at `path`.
pub(in crate::service) async fn run(
    ctx: &Arc<RunCtx>,
    condition: &str,
    max_iterations: u64,
    steps: &[Step],
    path: &str,
    scope: &Scope,
    cancel: &CancellationToken,
) -> KindOut {
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
        if i >= max_iterations {
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
