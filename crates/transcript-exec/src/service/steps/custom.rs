//! A custom step kind registered with the service ([`crate::custom`]):
//! runs the registered step with rendered params, catching its panics and
//! giving it the cancellation grace to close what it opened.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::custom::CustomStepContext;
use crate::service::run::{Flow, KindOut, RunCtx, call_scope, with_grace};
use crate::template::{Scope, render_json};
use crate::tools::CatchUnwind;
use crate::workflow::Step;

/// Runs `step`, of the custom kind `type_name`.
#[allow(clippy::too_many_arguments)]
pub(in crate::service) async fn run(
    ctx: &Arc<RunCtx>,
    step: &Step,
    type_name: &str,
    params: &Value,
    path: &str,
    iteration: u64,
    scope: &Scope,
    cancel: &CancellationToken,
) -> KindOut {
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
