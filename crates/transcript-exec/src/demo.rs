//! Sample extensions used by the golden demo workflow
//! (`fixtures/workflows/demo.yaml`): the `stamp` custom step type
//! ([`register_demo_steps`]) and a router with the builtins plus the `text`
//! example plugin (`fixtures/plugins/text_plugin.py`, [`demo_router`]).
//!
//! [`ServiceBuilder::custom_step`]: crate::ServiceBuilder::custom_step

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::custom::{CustomStep, CustomStepContext};
use crate::plugin::ExternalPlugin;
use crate::service::ServiceBuilder;
use crate::template::value_to_text;
use crate::tools::{ToolError, ToolRouter};

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

/// The builtin tools plus the external plugin at `plugin_script`, started
/// with `python3` (the demo's `upper` tool comes from it).
pub async fn demo_router(plugin_script: &Path) -> Result<ToolRouter, ToolError> {
    let mut router = ToolRouter::with_builtins();
    let plugin = ExternalPlugin::start(
        &["python3".to_owned(), plugin_script.display().to_string()],
        None,
    )
    .await?;
    router.register_plugin(Arc::new(plugin))?;
    Ok(router)
}
