//! The port through which a runner points each agent execution at a model endpoint of its
//! own ([`ModelEndpoints`], set with `ServiceBuilder::model_endpoints`): `transcript replay`
//! serves a recorded run's turns this way. The endpoint is opened after the step's prompt is
//! recorded, its environment is added to the agent's (over the step's `env:`), and it is
//! finished after the agent; its failure fails the step whatever the agent returned.

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;

/// One agent execution about to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointStart {
    /// The `call_workflow` steps that led to this run, outermost first, each
    /// `(path, iteration)`; empty in the root run.
    pub callers: Vec<(String, u64)>,
    /// The agent step's path.
    pub path: String,
    /// Its iteration.
    pub iteration: u64,
    /// Its provider's registry name (`claude`, `codex`, `gemini`, `openai`, ...).
    pub provider: String,
    /// The rendered prompt.
    pub prompt: String,
    /// The rendered system prompt (`""` when none).
    pub system_prompt: String,
    /// A fresh private directory (mode `0o700`) for the endpoint's files; removed by the
    /// runner after [`EndpointSession::finish`].
    pub config_dir: PathBuf,
}

/// What an endpoint says about the execution it served.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndpointOutcome {
    /// Why the step fails, if it does.
    pub failure: Option<String>,
    /// Warnings kept in the step's result (the step still succeeds).
    pub warnings: Vec<String>,
}

/// Opens a model endpoint per agent execution (implemented by the composition root).
#[async_trait]
pub trait ModelEndpoints: Send + Sync {
    /// Opens the endpoint of `start`; an error fails the step before its agent starts.
    async fn open(&self, start: EndpointStart) -> Result<Box<dyn EndpointSession>, String>;
}

/// An open endpoint.
#[async_trait]
pub trait EndpointSession: Send {
    /// Variables added to the agent's environment, over the step's own (may hold keys:
    /// never printed).
    fn env(&self) -> BTreeMap<String, String>;

    /// Closes the endpoint and judges the execution.
    async fn finish(self: Box<Self>) -> EndpointOutcome;
}

/// An agent execution's open endpoint and the private directory of its files.
pub(crate) struct StepEndpoint {
    session: Box<dyn EndpointSession>,
    dir: crate::mcp::step::PrivateDir,
}

impl StepEndpoint {
    /// Opens `endpoints`' endpoint for `start` (its `config_dir` replaced by a fresh private
    /// directory) and adds its environment to `env`, over what is there.
    pub(crate) async fn open(
        endpoints: &dyn ModelEndpoints,
        mut start: EndpointStart,
        env: &mut BTreeMap<String, String>,
    ) -> Result<StepEndpoint, String> {
        let dir =
            crate::mcp::step::PrivateDir::create().map_err(|e| format!("model endpoint: {e}"))?;
        start.config_dir = dir.path.clone();
        let session = endpoints.open(start).await?;
        env.extend(session.env());
        Ok(StepEndpoint { session, dir })
    }

    /// The private directory of the endpoint's files.
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir.path
    }

    /// Closes the endpoint, then removes its directory.
    pub(crate) async fn finish(self) -> EndpointOutcome {
        let outcome = self.session.finish().await;
        drop(self.dir);
        outcome
    }
}

/// A command step's recorded outcome, served instead of running it (`transcript replay
/// --commands record`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCommand {
    /// Its stdout.
    pub stdout: String,
    /// Its exit code.
    pub exit_code: i64,
    /// Its step's recorded error (a failed command's message), if any.
    pub error: Option<String>,
}

/// Recorded command outcomes by step (set with `ServiceBuilder::recorded_commands`): a
/// command step that has one does not run; its resolved command is recorded as usual with
/// the recorded stdout and exit code.
pub trait RecordedCommands: Send + Sync {
    /// The next recorded outcome of the command step at `path` and `iteration` in the run
    /// reached through `callers`; `None` runs the command.
    fn take(
        &self,
        callers: &[(String, u64)],
        path: &str,
        iteration: u64,
    ) -> Option<RecordedCommand>;
}
