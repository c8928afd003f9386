//! Sample workflow execution service (docs below).
#![forbid(unsafe_code)]

pub mod agent;
pub mod audit;
pub mod cli_agent;
pub mod custom;
pub mod emit;
pub mod plugin;
pub mod service;
pub mod template;
pub mod tools;
pub mod workflow;

pub use agent::{AgentError, AgentReply, AgentRequest, AgentRunner, AgentRunners, AgentSeam};
pub use audit::{AuditRecord, AuditTrail, CollectDisplay, DisplayEvent, DisplaySink, Status};
pub use cli_agent::CliAgentRunner;
pub use custom::{CustomStep, CustomStepContext, CustomSteps, FnStep};
pub use emit::Emitter;
pub use plugin::ExternalPlugin;
pub use service::{ExecError, ExecNode, ExecutionService, RunOutcome, ServiceBuilder};
pub use template::{Scope, StepValue, Template, TemplateError};
pub use tools::{CallScope, Plugin, Tool, ToolContext, ToolError, ToolRouter};
pub use workflow::{
    AgentSpec, InputDef, Items, ParallelMode, Step, StepKind, Workflow, WorkflowError, WorkflowSet,
};
