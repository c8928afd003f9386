//! The demo workflow's own step type (`fixtures/workflows/demo.yaml`): `stamp`, a custom step
//! registered by the binary, as a team's runner registers its own
//! ([`transcript_exec::ServiceBuilder::custom_step`]). The library ships no sample steps; the
//! demo's `text` plugin is declared by the workflow itself (`plugins:`).

use std::sync::Arc;

use serde_json::Value;
use transcript_exec::{CustomStepContext, FnStep, ServiceBuilder};

/// Registers `stamp`: returns `"<label>#<index>"` from its `with:` parameters (a missing label
/// fails the step).
pub fn register_demo_steps(builder: ServiceBuilder) -> Result<ServiceBuilder, String> {
    builder
        .custom_step("stamp", Arc::new(FnStep(stamp)))
        .map_err(|e| e.to_string())
}

fn stamp(ctx: &CustomStepContext) -> Result<Value, transcript_exec::StepError> {
    let label = ctx.param_text("label");
    if label.is_empty() {
        return Err("stamp needs a 'label'".into());
    }
    Ok(Value::String(format!(
        "{label}#{}",
        ctx.param_text("index")
    )))
}
