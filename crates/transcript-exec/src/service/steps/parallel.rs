//! The `parallel` step: its branches concurrently on tokio (one at a
//! time in declaration order when the service is deterministic), ended by
//! `first_success` or `all_succeed`; each branch's value is exported to
//! the enclosing sequence and the result names how each branch ended.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::audit::Status;
use crate::service::ExecNode;
use crate::service::run::{Flow, KindOut, RunCtx, StepRun, run_step};
use crate::template::{Scope, StepValue};
use crate::workflow::{ParallelMode, Step};

/// Runs a `parallel` step at `path` over `branches`.
pub(in crate::service) async fn run(
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
