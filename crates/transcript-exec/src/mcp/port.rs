//! The port between the engine and an MCP proxy: [`McpGateway`] starts one proxy per agent
//! execution ([`McpStart`]) and hands back an [`McpSession`], whose [`McpWiring`] tells the
//! runner how to point the agent CLI at it, and whose shutdown stops it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use transcript_domain::Recorder;

use crate::workflow::McpServerSpec;

/// What a proxy is started for: one execution of one agent step.
pub struct McpStart {
    /// The step's servers, checked at load.
    pub servers: Vec<McpServerSpec>,
    /// The step's `tools:`: the allowlist (`mcp__<server>__<tool>`, `mcp__<server>`).
    pub tools: Vec<String>,
    /// The CLI preset the wiring is for: `claude`, `codex` or `gemini`.
    pub provider: String,
    /// A fresh private directory (mode `0o700`) for the files of the wiring; the runner
    /// removes it after the CLI and the proxy stopped.
    pub config_dir: PathBuf,
    /// Where the proxy records its `tool.call` / `tool.result` events (`router` fidelity):
    /// the run's transcript, each value bounded as the engine bounds its own.
    pub recorder: Arc<dyn Recorder>,
    /// The agent step's path.
    pub path: String,
    /// Its iteration.
    pub iteration: u64,
    /// Prefix of the proxy's call ids, unique per agent execution (`<path>#<iteration>`).
    pub call_id_prefix: String,
    /// The longest one upstream call may take (the step's timeout, when it has one).
    pub call_deadline: Option<Duration>,
    /// The step's cancellation.
    pub cancel: CancellationToken,
    /// The step's own environment (its `env:`, templated), before the wiring's: where the CLI
    /// finds its home (`CODEX_HOME`, `GEMINI_CLI_HOME`, `HOME`) when the step sets it. May
    /// hold secrets: never printed.
    pub env: BTreeMap<String, String>,
    /// The CLI's working directory (the step's workspace), whose own configuration the
    /// gateway inspects.
    pub workspace: PathBuf,
    /// How the step's processes are confined (#56): the gateway starts the stdio servers
    /// inside it ([`crate::sandbox::spawn`]); `None`: unconfined.
    pub confinement: Option<crate::sandbox::Confinement>,
    /// The step's network bounds, for the stdio servers the proxy starts (#57): start them
    /// with [`crate::sandbox::net::command`] and [`crate::sandbox::spawn_bounded`]; `None`:
    /// the host's network.
    pub network: Option<crate::sandbox::net::NetBounds>,
}

impl std::fmt::Debug for McpStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpStart")
            .field("servers", &self.servers)
            .field("tools", &self.tools)
            .field("provider", &self.provider)
            .field("config_dir", &self.config_dir)
            .field("path", &self.path)
            .field("iteration", &self.iteration)
            .field("call_id_prefix", &self.call_id_prefix)
            .field("call_deadline", &self.call_deadline)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

/// A file of the wiring: written by the runner, created new with mode `0o600`.
#[derive(Clone, PartialEq, Eq)]
pub struct McpFile {
    /// Where: inside [`McpStart::config_dir`], maybe in a subdirectory (created `0o700`);
    /// anything else is refused.
    pub path: PathBuf,
    /// Contents (may hold the proxy's secret).
    pub contents: String,
}

impl std::fmt::Debug for McpFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpFile")
            .field("path", &self.path)
            .field("contents", &"<redacted>")
            .finish()
    }
}

/// How the agent CLI is pointed at the proxy.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct McpWiring {
    /// Arguments added to the preset's command line, before its `--` (the prompt).
    pub args: Vec<String>,
    /// Files to write before the CLI starts.
    pub files: Vec<McpFile>,
    /// Environment variables added to the CLI's (may hold the proxy's secret: the environment
    /// of a process is readable by its user only, unlike its argv).
    pub env: BTreeMap<String, String>,
    /// Where the CLI reaches the proxy (`127.0.0.1:port`): a bounded CLI may (#57).
    pub reach: Vec<crate::sandbox::net::Destination>,
}

impl std::fmt::Debug for McpWiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpWiring")
            .field("args", &self.args)
            .field("files", &self.files)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a proxy did not start, or what it lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The proxy (or one of its servers) did not start.
    #[error("MCP proxy did not start: {0}")]
    Start(String),
    /// The proxy lost an observation (a write failed): the step must not succeed.
    #[error("MCP proxy lost an observation: {0}")]
    Lost(String),
}

/// Starts MCP proxies (implemented over `transcript-mcp` by the composition root).
#[async_trait]
pub trait McpGateway: Send + Sync {
    /// Starts every server of `start` and the proxy in front of them.
    async fn start(&self, start: McpStart) -> Result<Box<dyn McpSession>, McpError>;
}

/// A running proxy.
#[async_trait]
pub trait McpSession: Send {
    /// How to point the CLI at it.
    fn wiring(&self) -> McpWiring;

    /// Stops it and everything it started; [`McpError::Lost`] when an observation could not
    /// be recorded while it ran. Dropping a session without calling this must stop it too.
    async fn shutdown(self: Box<Self>) -> Result<(), McpError>;
}
