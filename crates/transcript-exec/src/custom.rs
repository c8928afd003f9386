//! Custom step types registered from Rust by name.
//!
//! A custom step's `with:` parameters are rendered (templates resolved)
//! and handed to its [`CustomStep`]; the serialized return value becomes
//! the step's `result` and `{{steps.NAME.output}}`. A panic inside it is
//! caught and becomes the step's error.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::tools::{CallScope, ToolError, ToolRouter};

/// What a custom step gets.
#[derive(Debug, Clone)]
pub struct CustomStepContext {
    /// Step name.
    pub name: String,
    /// Step path.
    pub path: String,
    /// Iteration.
    pub iteration: u64,
    /// Rendered `with:` parameters.
    pub params: Value,
    /// The run's workspace.
    pub workspace: PathBuf,
    /// Cancelled when the run is cancelled or the step times out; a step
    /// that ignores it is abandoned (dropped) at that point.
    pub cancel: CancellationToken,
    router: Arc<ToolRouter>,
    scope: CallScope,
}

impl CustomStepContext {
    pub(crate) fn new(
        name: String,
        params: Value,
        router: Arc<ToolRouter>,
        scope: CallScope,
    ) -> Self {
        Self {
            name,
            path: scope.path.clone(),
            iteration: scope.iteration,
            params,
            workspace: scope.workspace.clone(),
            cancel: scope.cancel.clone(),
            router,
            scope,
        }
    }

    /// The `with:` parameter `key` as text, as `{{ }}` would render it: a string as is,
    /// `null` or a missing key as `""`, any other value as compact JSON.
    pub fn param_text(&self, key: &str) -> String {
        self.params
            .get(key)
            .map(crate::template::value_to_text)
            .unwrap_or_default()
    }

    /// Calls a tool through the router (recorded like any router call).
    pub async fn call_tool(&self, name: &str, input: Value) -> Result<Value, ToolError> {
        self.router.call_tool(&self.scope, name, input, None).await
    }
}

/// A custom step type.
#[async_trait]
pub trait CustomStep: Send + Sync {
    /// Runs the step; `Err(message)` fails it.
    async fn run(&self, ctx: CustomStepContext) -> Result<Value, String>;
}

/// Registered custom step types by name.
#[derive(Clone, Default)]
pub struct CustomSteps {
    types: BTreeMap<String, Arc<dyn CustomStep>>,
}

impl std::fmt::Debug for CustomSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.types.keys()).finish()
    }
}

impl CustomSteps {
    /// Registers `step` under `type_name` (refusing built-in kind names).
    pub fn register(
        &mut self,
        type_name: impl Into<String>,
        step: Arc<dyn CustomStep>,
    ) -> Result<(), String> {
        let type_name = type_name.into();
        if crate::workflow::BUILTIN_KINDS.contains(&type_name.as_str()) {
            return Err(format!("'{type_name}' is a built-in step kind"));
        }
        if type_name.is_empty() {
            return Err("empty step type name".into());
        }
        self.types.insert(type_name, step);
        Ok(())
    }

    /// The step registered under `type_name`.
    pub fn get(&self, type_name: &str) -> Option<&Arc<dyn CustomStep>> {
        self.types.get(type_name)
    }

    /// Whether `type_name` is registered.
    pub fn contains(&self, type_name: &str) -> bool {
        self.types.contains_key(type_name)
    }
}

/// Adapts a closure into a [`CustomStep`].
pub struct FnStep<F>(pub F);

#[async_trait]
impl<F> CustomStep for FnStep<F>
where
    F: Fn(&CustomStepContext) -> Result<Value, String> + Send + Sync,
{
    async fn run(&self, ctx: CustomStepContext) -> Result<Value, String> {
        (self.0)(&ctx)
    }
}
