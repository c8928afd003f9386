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
    /// that ignores it gets the service's cancellation grace
    /// ([`crate::ServiceBuilder::cancel_grace`]) to return, and is
    /// abandoned (dropped) after it.
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
    /// Runs the step; an error fails it, its text the step's error.
    async fn run(&self, ctx: CustomStepContext) -> Result<Value, StepError>;
}

/// Why a custom step failed: its text is the step's recorded error.
/// Made from a message (`"...".into()`, `String`) or from a failed tool
/// call (`ctx.call_tool(..).await?`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// The step's own reason.
    #[error("{0}")]
    Failed(String),
    /// A tool it called through the router failed.
    #[error(transparent)]
    Tool(#[from] ToolError),
}

impl From<String> for StepError {
    fn from(message: String) -> Self {
        StepError::Failed(message)
    }
}

impl From<&str> for StepError {
    fn from(message: &str) -> Self {
        StepError::Failed(message.to_owned())
    }
}

/// Why a custom step type cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The name is a built-in step kind's.
    #[error("'{0}' is a built-in step kind")]
    BuiltinKind(String),
    /// The name is empty.
    #[error("empty step type name")]
    EmptyName,
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
    ) -> Result<(), RegisterError> {
        let type_name = type_name.into();
        if crate::workflow::BUILTIN_KINDS.contains(&type_name.as_str()) {
            return Err(RegisterError::BuiltinKind(type_name));
        }
        if type_name.is_empty() {
            return Err(RegisterError::EmptyName);
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

/// Adapts a closure into a [`CustomStep`] (`Err("why".into())` fails the
/// step, and `?` on a [`ToolError`] works).
pub struct FnStep<F>(pub F);

#[async_trait]
impl<F> CustomStep for FnStep<F>
where
    F: Fn(&CustomStepContext) -> Result<Value, StepError> + Send + Sync,
{
    async fn run(&self, ctx: CustomStepContext) -> Result<Value, StepError> {
        (self.0)(&ctx)
    }
}
