//! Sample extensions used by the golden demo workflow
//! (`fixtures/workflows/demo.yaml`): the `stamp` custom step type
//! ([`register_demo_steps`]). The demo's `text` plugin is declared by the
//! workflow itself (`plugins:`; see [`crate::start_declared_plugins`]).
//!
//! [`ServiceBuilder::custom_step`]: crate::ServiceBuilder::custom_step

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::custom::{CustomStep, CustomStepContext};
use crate::service::ServiceBuilder;
use crate::template::value_to_text;

/// `stamp`: returns `"<label>#<index>"` from its `with:` parameters.
#[derive(Debug, Default, Clone, Copy)]
pub struct StampStep;

#[async_trait]
impl CustomStep for StampStep {
    async fn run(&self, ctx: CustomStepContext) -> Result<Value, String> {
        let label = ctx
            .params
            .get("label")
            .map(value_to_text)
            .unwrap_or_default();
        if label.is_empty() {
            return Err("stamp needs a 'label'".into());
        }
        let index = ctx
            .params
            .get("index")
            .map(value_to_text)
            .unwrap_or_default();
        Ok(Value::String(format!("{label}#{index}")))
    }
}

/// Registers the demo's custom step types on `builder`.
pub fn register_demo_steps(builder: ServiceBuilder) -> Result<ServiceBuilder, String> {
    builder.custom_step("stamp", Arc::new(StampStep))
}
