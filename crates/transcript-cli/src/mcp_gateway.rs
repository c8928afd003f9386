//! The engine's MCP port ([`transcript_exec::mcp::McpGateway`]) over transcript-mcp's proxy:
//! the composition root's adapter, so that the engine knows neither the MCP SDK nor its HTTP
//! stack. One [`McpProxy`] per agent execution, wired into the CLI by
//! [`transcript_mcp::preset::wiring`].
//!
//! Each session's stdio servers carry one process scope ([`ProcessScope`], token in
//! `TRANSCRIPT_PROCESS_SCOPE`, added to the environment the proxy passes them), swept when the
//! session shuts down (or is dropped): a server that calls `setsid` or double-forks leaves
//! nothing running past its step (#40 item 4).
//!
//! A stdio server starts with transcript-mcp's cleared environment plus its own `env:`: the
//! runner's `NATS_*` credentials never reach it (`tests/nats_env_withheld.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use transcript_exec::mcp::{
    McpError, McpFile, McpGateway, McpServerSpec, McpSession, McpStart, McpTransport, McpWiring,
};
use transcript_exec::reaper::{ProcessScope, SCOPE_ENV};
use transcript_mcp::home::link_private_home;
use transcript_mcp::preset::{self, Cli, UserConfig};
use transcript_mcp::{Allowlist, McpProxy, McpServer, ProxyLimits, RecordTarget, Upstream};

/// Starts transcript-mcp proxies.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProxyGateway;

#[async_trait]
impl McpGateway for ProxyGateway {
    async fn start(&self, start: McpStart) -> Result<Box<dyn McpSession>, McpError> {
        let cli = Cli::of(&start.provider).ok_or_else(|| {
            McpError::Start(format!(
                "no MCP wiring for provider '{}' (claude, codex, gemini)",
                start.provider
            ))
        })?;
        let scope = ProcessScope::new();
        let servers: Vec<McpServer> = start.servers.iter().map(|s| server(s, &scope)).collect();
        // From here on, a failure drops the guard, which kills what the proxy started.
        let scope = ScopeGuard(Some(scope));
        let mut limits = ProxyLimits::default();
        if let Some(deadline) = start.call_deadline {
            limits.call_deadline = deadline;
        }
        let target = RecordTarget {
            recorder: start.recorder,
            path: start.path,
            iteration: start.iteration,
            call_id_prefix: start.call_id_prefix,
        };
        // The stdio servers run in the step's confinement (#56) and network (#57), each with
        // its own private temporary directory, kept until the server is stopped.
        let launch: Option<transcript_mcp::Launch> =
            (start.confinement.is_some() || start.network.is_some()).then(|| {
                let launch: transcript_mcp::Launch = std::sync::Arc::new(Bounded {
                    confinement: start.confinement.clone(),
                    network: start.network.clone(),
                });
                launch
            });
        let proxy = McpProxy::start_launching(
            &servers,
            Allowlist::from_step_tools(&start.tools),
            target,
            limits,
            launch,
            start.cancel,
        )
        .await
        .map_err(|e| McpError::Start(e.to_string()))?;
        let places = Places {
            env: &start.env,
            workspace: &start.workspace,
            config_dir: &start.config_dir,
        };
        let user = user_config(cli, &places, proxy.endpoints())
            .map_err(|e| McpError::Start(format!("{} CLI configuration: {e}", start.provider)))?;
        let w = preset::wiring(cli, proxy.endpoints(), &start.config_dir, user)
            .map_err(|e| McpError::Start(e.to_string()))?;
        let wiring = McpWiring {
            args: w.args,
            files: w
                .files
                .into_iter()
                .map(|(path, contents)| McpFile { path, contents })
                .collect(),
            env: w.env.into_iter().collect(),
            // A bounded CLI reaches the proxy (#57).
            reach: proxy
                .endpoints()
                .endpoints
                .iter()
                .filter_map(|e| transcript_exec::agent_network::of_url(&e.url))
                .collect(),
        };
        Ok(Box::new(ProxySession {
            proxy,
            wiring,
            scope,
        }))
    }
}

/// Starts a stdio server confined and network-bounded like the step.
struct Bounded {
    confinement: Option<transcript_exec::sandbox::Confinement>,
    network: Option<transcript_exec::sandbox::net::NetBounds>,
}

impl transcript_mcp::Launcher for Bounded {
    fn command(&self, program: &str) -> tokio::process::Command {
        transcript_exec::sandbox::net::command(program, self.network.as_ref())
    }

    fn spawn(
        &self,
        cmd: &mut tokio::process::Command,
    ) -> std::io::Result<(tokio::process::Child, transcript_mcp::LaunchGuard)> {
        let (child, tmp) = transcript_exec::sandbox::spawn_bounded(
            cmd,
            self.confinement.as_ref(),
            self.network.as_ref(),
        )?;
        Ok((child, Box::new(tmp) as transcript_mcp::LaunchGuard))
    }
}

/// Where the CLI will run: what [`user_config`] reads of the [`McpStart`].
struct Places<'a> {
    env: &'a BTreeMap<String, String>,
    workspace: &'a Path,
    config_dir: &'a Path,
}

/// A variable of the CLI's environment: the step's `env:` first, then the runner's.
fn var(start: &Places<'_>, key: &str) -> Option<PathBuf> {
    start
        .env
        .get(key)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os(key).map(PathBuf::from))
        .filter(|v| !v.as_os_str().is_empty())
}

/// Reads what the wiring keeps of the user's configuration, and prepares the private home
/// the wiring points Codex or Gemini CLI at (the user's home found from the step's `env:`
/// first, then the runner's environment, as the CLI itself would find it).
fn user_config(
    cli: Cli,
    start: &Places<'_>,
    endpoints: &transcript_mcp::ProxyEndpoints,
) -> std::io::Result<UserConfig> {
    let home = var(start, "HOME");
    let mut user = UserConfig::default();
    match cli {
        Cli::Claude => {}
        Cli::Codex => {
            let real =
                var(start, preset::CODEX_HOME_ENV).or_else(|| home.map(|h| h.join(".codex")));
            let ours = start.config_dir.join(preset::CODEX_HOME_DIR);
            user.codex_config =
                link_private_home(real.as_deref(), &ours, "config.toml", "sessions")?;
        }
        Cli::Gemini => {
            let workspace = start.workspace.join(".gemini").join("settings.json");
            let shadows = preset::gemini_workspace_shadows(&read_json(&workspace)?, endpoints);
            if !shadows.is_empty() {
                return Err(std::io::Error::other(format!(
                    "{} declares MCP server(s) {} under the name of the step's own: Gemini CLI \
                     would run them instead of the proxy's (rename the step's server or remove them)",
                    workspace.display(),
                    shadows.join(", ")
                )));
            }
            let real = var(start, preset::GEMINI_HOME_ENV)
                .or(home)
                .map(|h| h.join(".gemini"));
            let ours = start.config_dir.join("gemini-home").join(".gemini");
            let text = link_private_home(real.as_deref(), &ours, "settings.json", "tmp")?;
            user.gemini_settings = if text.trim().is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::from_str(&text).map_err(|e| {
                    std::io::Error::other(format!("the user's Gemini settings.json: {e}"))
                })?
            };
        }
    }
    Ok(user)
}

/// A JSON file, `Null` when it is not there.
fn read_json(path: &Path) -> std::io::Result<serde_json::Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(serde_json::Value::Null),
        Err(e) => Err(e),
    }
}

/// The proxy's server of `spec`; a stdio one carries `scope` in its environment (after the
/// step's own variables, so a workflow cannot override it).
fn server(spec: &McpServerSpec, scope: &ProcessScope) -> McpServer {
    let upstream = match &spec.transport {
        McpTransport::Stdio { command, args, env } => {
            let mut env = env.clone();
            env.insert(SCOPE_ENV.to_owned(), scope.token().to_owned());
            Upstream::Stdio {
                command: command.clone(),
                args: args.clone(),
                env,
            }
        }
        McpTransport::Http { url, headers } => Upstream::Http {
            url: url.clone(),
            headers: headers.clone(),
        },
    };
    McpServer {
        name: spec.name.clone(),
        upstream,
    }
}

/// A running proxy; dropping it kills what it started (transcript-mcp's `Drop`, then the
/// scope's sweep).
struct ProxySession {
    proxy: McpProxy,
    wiring: McpWiring,
    scope: ScopeGuard,
}

/// The servers' scope: swept when dropped unless [`ScopeGuard::end`] did.
struct ScopeGuard(Option<ProcessScope>);

impl ScopeGuard {
    /// Kills every process of the scope, waits for them and reaps the runner's children.
    async fn end(mut self) {
        if let Some(scope) = self.0.take() {
            scope.end(None).await;
        }
    }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        if let Some(scope) = self.0.take() {
            scope.kill_now(None);
        }
    }
}

#[async_trait]
impl McpSession for ProxySession {
    fn wiring(&self) -> McpWiring {
        self.wiring.clone()
    }

    async fn shutdown(self: Box<Self>) -> Result<(), McpError> {
        let ProxySession { proxy, scope, .. } = *self;
        let result = proxy
            .shutdown()
            .await
            .map_err(|e| McpError::Lost(e.to_string()));
        // What the servers left running (a `setsid`, a double fork) ends with the step.
        scope.end().await;
        result
    }
}
