//! A custom step kind registered with the service ([`crate::custom`]):
//! runs the registered step with rendered params, catching its panics and
//! giving it the cancellation grace to close what it opened.

use crate::catch_unwind::CatchUnwind;
use crate::compiled::TemplateJson;
use crate::custom::CustomStepContext;
use crate::service::context::{Flow, KindOut, StepCtx, with_grace};

/// Runs `sc`'s step, of the custom kind `type_name`.
pub(in crate::service) async fn run(
    sc: &StepCtx<'_>,
    type_name: &str,
    params: &TemplateJson,
) -> KindOut {
    let (ctx, cancel) = (sc.run, sc.cancel);
    let Some(custom) = ctx.inner.custom.get(type_name).cloned() else {
        return KindOut::flow(Flow::Failed(format!("unknown step kind '{type_name}'")));
    };
    let params = match params.render(sc.scope) {
        Ok(p) => p,
        Err(e) => return KindOut::flow(Flow::Failed(format!("with: {e}"))),
    };
    let cctx = CustomStepContext::new(
        sc.step.name.clone(),
        params,
        ctx.inner.router.clone(),
        sc.call_scope(),
    );
    let fut = CatchUnwind::new(async move { custom.run(cctx).await });
    // A cancelled step is cancelled whatever it returned within the grace.
    let finished = with_grace(fut, cancel, ctx.inner.cancel_grace).await;
    match finished.filter(|_| !cancel.is_cancelled()) {
        None => KindOut::flow(Flow::Cancelled),
        Some(Ok(Ok(v))) => KindOut::done(v.clone(), Some(v)),
        Some(Ok(Err(e))) => KindOut::flow(Flow::Failed(e.to_string())),
        Some(Err(panic)) => KindOut::flow(Flow::Failed(format!(
            "custom step '{type_name}' panicked: {panic}"
        ))),
    }
}
