//! What a tool is: the [`Tool`] trait a router calls, the [`Plugin`]
//! trait for a named bundle of operations, and the [`ToolContext`] a call
//! sees. The router that records every call is [`crate::tools`].

use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::process::ProcessLimits;
use crate::tool_error::ToolError;

/// What a tool sees of the call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The run's workspace (canonical).
    pub workspace: PathBuf,
    /// Cancelled when the run is cancelled or the step times out.
    pub cancel: CancellationToken,
    /// The call's correlation id.
    pub call_id: String,
    /// How subprocesses the tool starts are ended and captured.
    pub limits: ProcessLimits,
}

/// A tool callable through the router.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The JSON Schema of the tool's input, offered to models as the
    /// function's parameters (default: any object).
    fn parameters(&self) -> Value {
        any_object()
    }

    /// What the tool does, in a sentence, offered to models as the
    /// function's description (default: none, the name alone is offered).
    fn description(&self) -> Option<String> {
        None
    }

    /// Runs the tool.
    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError>;
}

/// A Rust plugin: a named bundle of operations.
#[async_trait]
pub trait Plugin: Send + Sync {
    /// The plugin's name (errors, logs).
    fn name(&self) -> &str;
    /// The operations it offers; each becomes a router tool of that name.
    fn operations(&self) -> Vec<String>;
    /// The JSON Schema of `operation`'s input (default: any object).
    fn parameters(&self, operation: &str) -> Value {
        let _ = operation;
        any_object()
    }
    /// Runs `operation`.
    async fn call(
        &self,
        operation: &str,
        ctx: &ToolContext,
        input: Value,
    ) -> Result<Value, ToolError>;
}

/// The schema of a tool that declares none: any JSON object.
pub fn any_object() -> Value {
    json!({"type": "object"})
}
