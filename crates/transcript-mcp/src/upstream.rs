//! The proxy's client side: one MCP client connection per real server, through rmcp.
//!
//! A stdio server is spawned here (not by rmcp's child-process transport) so that it gets
//! its own process group, which [`ChildGroup`] kills: `SIGTERM`, the grace, then `SIGKILL`
//! on [`Upstream::stop`], `SIGKILL` at once when dropped. Grandchildren the server starts
//! (an `npx` wrapper's node, a shell's children) are in that group and end with it while the
//! server lives. The group is signalled only while its leader is not reaped (an unreaped
//! leader keeps the group id from being reused, so no stranger's group is ever hit): once the
//! leader has exited, what is left of its group is killed, then the leader is reaped. What
//! left the group (`setsid`, a double fork into a new session) is the caller's to end: the runner
//! gives each server a process scope in its environment and sweeps it (transcript-exec's
//! `reaper`).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, PaginatedRequestParams, Tool};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, ServiceExt};
use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};

use crate::config::{McpServer, ProxyLimits, Upstream as UpstreamSpec};
use crate::error::ProxyError;

/// The runner's environment variables a stdio server inherits; everything else (API keys,
/// tokens, the runner's own settings) is withheld. The server's configured `env` is added.
/// The same set the MCP SDKs' stdio clients pass by default, plus `LANG` and `TMPDIR`.
pub const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR",
];

/// A live connection to one real MCP server.
pub(crate) struct Upstream {
    /// The server's name.
    pub(crate) name: String,
    peer: Peer<RoleClient>,
    service: RunningService<RoleClient, ()>,
    child: std::sync::Mutex<Option<ChildGroup>>,
    pgid: Option<u32>,
    /// Fires when a stdio server's process exits: a call in flight then fails at once, even
    /// when a grandchild still holds the server's stdout open (no end of file comes).
    exited: Option<tokio_util::sync::CancellationToken>,
}

/// Starts a stdio server: its own process group, the cleared environment plus
/// [`INHERITED_ENV`] and its own `env`, through `launch` when given (the composition root's
/// confinement).
fn spawn_stdio(
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    launch: Option<&crate::Launch>,
) -> std::io::Result<(tokio::process::Child, crate::LaunchGuard)> {
    let inherited = INHERITED_ENV
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (*k, v)));
    let mut cmd = match launch {
        Some(launch) => launch.command(command),
        None => Command::new(command),
    };
    cmd.args(args)
        .env_clear()
        .envs(inherited)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    match launch {
        Some(launch) => launch.spawn(&mut cmd),
        None => cmd.spawn().map(|c| (c, Box::new(()) as crate::LaunchGuard)),
    }
}

impl Upstream {
    /// Starts (stdio) or connects to (HTTP) `server` and completes MCP's `initialize`.
    pub(crate) async fn connect(
        server: &McpServer,
        deadline: Duration,
        launch: Option<&crate::Launch>,
    ) -> Result<Self, ProxyError> {
        let name = server.name.clone();
        let start_failed = |cause: String| ProxyError::Start {
            server: name.clone(),
            cause,
        };
        match &server.upstream {
            UpstreamSpec::Stdio { command, args, env } => {
                let (mut child, guard) = spawn_stdio(command, args, env, launch)
                    .map_err(|e| start_failed(format!("cannot start {command:?}: {e}")))?;
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(start_failed("no stdio pipes".into()));
                };
                let mut group = ChildGroup::new(child);
                group.guard = Some(guard);
                let pgid = Some(group.pgid);
                let service = tokio::time::timeout(deadline, ().serve((stdout, stdin)))
                    .await
                    .map_err(|_| {
                        start_failed(format!("no MCP initialize answer within {deadline:?}"))
                    })?
                    .map_err(|e| start_failed(format!("MCP initialize failed: {e}")))?;
                Ok(Self {
                    name: server.name.clone(),
                    peer: service.peer().clone(),
                    service,
                    exited: Some(group.exited.clone()),
                    child: std::sync::Mutex::new(Some(group)),
                    pgid,
                })
            }
            UpstreamSpec::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let key = http::HeaderName::try_from(k.as_str())
                        .map_err(|e| start_failed(format!("header name {k:?}: {e}")))?;
                    let value = http::HeaderValue::try_from(v.as_str())
                        .map_err(|e| start_failed(format!("header {k:?}: {e}")))?;
                    custom.insert(key, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                // reqwest is built without a crypto provider (one rustls for the workspace).
                let _ = rustls::crypto::ring::default_provider().install_default();
                let client = reqwest::Client::builder()
                    .build()
                    .map_err(|e| start_failed(format!("HTTP client: {e}")))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service = tokio::time::timeout(deadline, ().serve(transport))
                    .await
                    .map_err(|_| {
                        start_failed(format!("no MCP initialize answer within {deadline:?}"))
                    })?
                    .map_err(|e| start_failed(format!("MCP initialize failed: {e}")))?;
                Ok(Self {
                    name: server.name.clone(),
                    peer: service.peer().clone(),
                    service,
                    child: std::sync::Mutex::new(None),
                    pgid: None,
                    exited: None,
                })
            }
        }
    }

    /// The server's tools, every page, within `limits`' deadline (or the call deadline when
    /// shorter) and caps on pages, tools and bytes; the error says which bound was hit.
    pub(crate) async fn list_tools(&self, limits: &ProxyLimits) -> Result<Vec<Tool>, String> {
        let deadline = limits.list_deadline.min(limits.call_deadline);
        tokio::time::timeout(deadline, self.list_pages(limits))
            .await
            .unwrap_or_else(|_| Err(format!("no complete tools/list within {deadline:?}")))
    }

    async fn list_pages(&self, limits: &ProxyLimits) -> Result<Vec<Tool>, String> {
        let mut tools = Vec::new();
        let mut bytes = 0usize;
        let mut cursor = None;
        for _ in 0..limits.max_list_pages {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let page = self
                .peer
                .list_tools(Some(params))
                .await
                .map_err(|e| format!("tools/list failed: {e}"))?;
            bytes += page
                .tools
                .iter()
                .map(|t| serde_json::to_vec(t).map_or(0, |v| v.len()))
                .sum::<usize>();
            if bytes > limits.max_list_bytes {
                return Err(format!(
                    "tools/list exceeds the proxy's {}-byte cap",
                    limits.max_list_bytes
                ));
            }
            tools.extend(page.tools);
            if tools.len() > limits.max_list_tools {
                return Err(format!(
                    "tools/list has more than {} tools, the proxy's cap",
                    limits.max_list_tools
                ));
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(format!(
            "tools/list has more than {} pages, the proxy's cap (the server keeps sending a nextCursor)",
            limits.max_list_pages
        ))
    }

    /// Calls one tool.
    pub(crate) async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        let Some(exited) = &self.exited else {
            return self.peer.call_tool(params).await;
        };
        tokio::select! {
            answer = self.peer.call_tool(params) => answer,
            () = exited.cancelled() => Err(ServiceError::TransportClosed),
        }
    }

    /// The process group id of a stdio server.
    pub(crate) fn process_group(&self) -> Option<u32> {
        self.pgid
    }

    /// Closes the MCP session and ends the server's process group (`SIGTERM`, `grace`,
    /// `SIGKILL`), reaping the server. Idempotent.
    pub(crate) async fn stop(&self, grace: Duration) {
        self.service.cancellation_token().cancel();
        let group = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(group) = group {
            group.stop(grace).await;
        }
    }
}

/// A child in its own process group; the whole group is killed when this is dropped. A
/// thread waits for the leader to exit (without reaping it), then reaps it under the lock
/// [`ChildGroup::signal`] takes, and fires `exited`: the group is never signalled once its
/// leader was reaped.
pub(crate) struct ChildGroup {
    pgid: u32,
    exited: tokio_util::sync::CancellationToken,
    /// The leader until it is reaped.
    leader: std::sync::Arc<std::sync::Mutex<Option<Child>>>,
    live: bool,
    /// What the launcher keeps alive as long as the server (a confined server's private
    /// temporary directory).
    guard: Option<crate::LaunchGuard>,
}

impl ChildGroup {
    fn new(child: Child) -> Self {
        // A spawned child always has an id until it is reaped.
        let pgid = child.id().unwrap_or(0);
        let exited = tokio_util::sync::CancellationToken::new();
        let leader = std::sync::Arc::new(std::sync::Mutex::new(Some(child)));
        let (done, held) = (exited.clone(), leader.clone());
        // A thread, not the blocking pool: it must not hold the runtime's shutdown.
        let _ = std::thread::Builder::new()
            .name("mcp-server-wait".into())
            .spawn(move || {
                let zombie = wait_exited(pgid);
                let mut slot = held.lock().unwrap_or_else(|p| p.into_inner());
                if zombie && slot.is_some() {
                    // The leader has exited but is not reaped: its pid, and so the group id,
                    // cannot name anyone else yet. What is left of the group (a grandchild
                    // that ignored SIGTERM, or kept the server's stdout open) ends with it.
                    if let Some(pid) = Pid::from_raw(pgid as i32) {
                        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
                    }
                }
                if let Some(mut child) = slot.take() {
                    // Reaps the zombie; from here on the group id may be reused.
                    let _ = child.try_wait();
                }
                drop(slot);
                done.cancel();
            });
        Self {
            pgid,
            exited,
            leader,
            live: true,
            guard: None,
        }
    }

    /// Signals the group while its leader is not reaped (else nothing: the id may name
    /// another group by now).
    fn signal(&self, signal: Signal) {
        let leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
        if leader.is_none() {
            return;
        }
        if let Some(pid) = Pid::from_raw(self.pgid as i32) {
            // ESRCH: the group is already gone, which is the goal.
            let _ = rustix::process::kill_process_group(pid, signal);
        }
    }

    async fn stop(mut self, grace: Duration) {
        self.signal(Signal::TERM);
        if tokio::time::timeout(grace, self.exited.cancelled())
            .await
            .is_err()
        {
            self.signal(Signal::KILL);
            self.exited.cancelled().await;
        }
        // No group signal after the leader was reaped: the wait thread has killed what was
        // left of the group before reaping it; members that left the group (setsid) are
        // ended by the runner's process scope (module docs).
        self.live = false;
    }
}

/// Blocks until the process `pid` (a child of ours) has exited, leaving it unreaped
/// (`waitid` with `WNOWAIT`): true then. False at once when it is not (or no longer) our
/// child.
fn wait_exited(pid: u32) -> bool {
    use rustix::process::{WaitId, WaitIdOptions, waitid};
    let Some(pid) = Pid::from_raw(pid as i32) else {
        return false;
    };
    loop {
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => return true,
            Err(_) => return false,
        }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        if self.live {
            self.signal(Signal::KILL);
        }
    }
}
