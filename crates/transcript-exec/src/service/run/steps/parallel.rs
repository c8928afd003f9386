//! The `parallel` step: its branches concurrently on tokio (one at a
//! time in declaration order when the service is deterministic), ended by
//! `first_success` or `all_succeed`; each branch's value is exported to
//! the enclosing sequence and the result names how each branch ended.

use serde_json::{Map, Value, json};

use crate::audit::Status;
use crate::service::ExecNode;
use crate::service::context::{Flow, KindOut, StepCtx, StepRun};
use crate::service::run::run_step;
use crate::template::StepValue;
use crate::workflow::{ParallelMode, Step};

/// Runs `sc`'s step, a `parallel` block over `branches`.
pub(in crate::service) async fn run(
    sc: &StepCtx<'_>,
    mode: ParallelMode,
    branches: &[Step],
) -> KindOut {
    let block_cancel = sc.cancel.child_token();
    let block = StepCtx {
        cancel: &block_cancel,
        ..*sc
    };
    let results = if sc.run.inner.deterministic {
        run_in_order(&block, mode, branches).await
    } else {
        run_concurrently(&block, mode, branches).await
    };
    gather(sc, mode, branches, results)
}

/// Whether a branch that ended with `flow` ends the block.
fn ends_block(flow: &Flow, mode: ParallelMode) -> bool {
    match flow {
        Flow::Done => mode == ParallelMode::FirstSuccess,
        Flow::Terminate { .. } => true,
        _ => false,
    }
}

/// The branches one at a time in declaration order (a deterministic
/// service); a branch that ends the block leaves the rest unrun.
async fn run_in_order(
    block: &StepCtx<'_>,
    mode: ParallelMode,
    branches: &[Step],
) -> Vec<Option<StepRun>> {
    let mut results: Vec<Option<StepRun>> = (0..branches.len()).map(|_| None).collect();
    for (i, b) in branches.iter().enumerate() {
        if block.cancel.is_cancelled() {
            break;
        }
        let r = run_step(
            block.run,
            b,
            block.path,
            block.iteration,
            block.scope,
            block.cancel,
        )
        .await;
        let stop = ends_block(&r.flow, mode);
        results[i] = Some(r);
        if stop {
            break;
        }
    }
    results
}

/// The branches as tokio tasks; a branch that ends the block cancels the
/// others (which still close what they opened).
async fn run_concurrently(
    block: &StepCtx<'_>,
    mode: ParallelMode,
    branches: &[Step],
) -> Vec<Option<StepRun>> {
    let mut results: Vec<Option<StepRun>> = (0..branches.len()).map(|_| None).collect();
    let mut set = tokio::task::JoinSet::new();
    let mut ids = std::collections::HashMap::new();
    for (i, b) in branches.iter().enumerate() {
        let ctx = block.run.clone();
        let b = b.clone();
        let path = block.path.to_owned();
        let iteration = block.iteration;
        let scope = block.scope.clone();
        let bc = block.cancel.clone();
        let handle = set.spawn(async move {
            let r = run_step(&ctx, &b, &path, iteration, &scope, &bc).await;
            (i, r)
        });
        ids.insert(handle.id(), i);
    }
    while let Some(joined) = set.join_next_with_id().await {
        match joined {
            Ok((_, (i, r))) => {
                if ends_block(&r.flow, mode) {
                    block.cancel.cancel();
                }
                results[i] = Some(r);
            }
            Err(e) => {
                // run_step catches user panics; this is a bug, keep going.
                if let Some(&i) = ids.get(&e.id()) {
                    results[i] = Some(failed_task(block, &branches[i], &e));
                }
            }
        }
    }
    results
}

/// A branch whose task failed (a bug: run_step catches user panics).
fn failed_task(block: &StepCtx<'_>, b: &Step, e: &tokio::task::JoinError) -> StepRun {
    StepRun {
        node: ExecNode {
            name: b.name.clone(),
            kind: b.kind.kind_name().to_owned(),
            path: crate::workflow::join_path(block.path, &b.name),
            iteration: block.iteration,
            status: Status::Failed,
            error: Some(format!("branch task failed: {e}")),
            children: Vec::new(),
            child: None,
        },
        value: StepValue::default(),
        flow: Flow::Failed(format!("branch task failed: {e}")),
        exports: Vec::new(),
    }
}

/// What the branches that ran add up to, in declaration order.
#[derive(Default)]
struct Gathered {
    children: Vec<ExecNode>,
    exports: Vec<(String, StepValue)>,
    outputs: Map<String, Value>,
    failures: Vec<String>,
    terminate: Option<Flow>,
    any_success: bool,
    statuses: Map<String, Value>,
}

impl Gathered {
    /// Adds branch `b`, which ended as `r`.
    fn add(&mut self, b: &Step, r: StepRun) {
        self.statuses
            .insert(b.name.clone(), Value::from(r.node.status.as_str()));
        self.children.push(r.node);
        match r.flow {
            Flow::Done => {
                self.any_success = true;
                self.outputs.insert(b.name.clone(), r.value.output.clone());
                self.exports.push((b.name.clone(), r.value));
            }
            Flow::Failed(e) if b.continue_on_error => {
                self.outputs.insert(b.name.clone(), r.value.output.clone());
                let value = StepValue {
                    error: Some(e),
                    ..r.value
                };
                self.exports.push((b.name.clone(), value));
            }
            Flow::Failed(e) => self.failures.push(format!("branch '{}': {e}", b.name)),
            f @ Flow::Terminate { .. } => {
                self.terminate.get_or_insert(f);
            }
            Flow::Cancelled => {}
        }
    }

    /// How the block ended: a terminal branch ends it as the terminal step
    /// says, else by `mode` over the branches' ends.
    fn flow(&mut self, mode: ParallelMode, cancelled: bool) -> Flow {
        if let Some(t) = self.terminate.take() {
            return t;
        }
        if cancelled {
            return Flow::Cancelled;
        }
        match mode {
            ParallelMode::FirstSuccess if self.any_success => Flow::Done,
            ParallelMode::FirstSuccess => Flow::Failed(format!(
                "no branch succeeded ({})",
                self.failures.join("; ")
            )),
            ParallelMode::AllSucceed if self.failures.is_empty() => Flow::Done,
            ParallelMode::AllSucceed => Flow::Failed(self.failures.join("; ")),
        }
    }
}

/// The block's end from its branches' results.
fn gather(
    sc: &StepCtx<'_>,
    mode: ParallelMode,
    branches: &[Step],
    results: Vec<Option<StepRun>>,
) -> KindOut {
    let mut g = Gathered::default();
    for (b, r) in branches.iter().zip(results) {
        if let Some(r) = r {
            g.add(b, r);
        }
    }
    let flow = g.flow(mode, sc.cancel.is_cancelled());
    KindOut {
        value: StepValue {
            output: Value::Object(g.outputs),
            ..StepValue::default()
        },
        // The branches' outputs are in their own step.completed events: the
        // block's result names how each ended, so the file grows linearly.
        result: Some(json!({ "branches": g.statuses })),
        flow,
        children: g.children,
        child: None,
        exports: g.exports,
    }
}
