//! The engine's MCP port ([`transcript_exec::mcp::McpGateway`]) over transcript-mcp's proxy:
//! the composition root's adapter, so that the engine knows neither the MCP SDK nor its HTTP
//! stack. One [`McpProxy`] per agent execution, wired into the CLI by
//! [`transcript_mcp::preset::wiring`].

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use transcript_exec::mcp::{
    McpError, McpFile, McpGateway, McpServerSpec, McpSession, McpStart, McpTransport, McpWiring,
};
use transcript_mcp::preset::{self, Cli};
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
        let servers: Vec<McpServer> = start.servers.iter().map(server).collect();
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
        let proxy = McpProxy::start(
            &servers,
            Allowlist::from_step_tools(&start.tools),
            target,
            limits,
            start.cancel,
        )
        .await
        .map_err(|e| McpError::Start(e.to_string()))?;
        let user_settings = match cli {
            Cli::Gemini => gemini_home(&start.config_dir)
                .map_err(|e| McpError::Start(format!("Gemini CLI home: {e}")))?,
            _ => serde_json::Value::Null,
        };
        let w = preset::wiring(cli, proxy.endpoints(), &start.config_dir, user_settings);
        let wiring = McpWiring {
            args: w.args,
            files: w
                .files
                .into_iter()
                .map(|(path, contents)| McpFile { path, contents })
                .collect(),
            env: w.env.into_iter().collect(),
        };
        Ok(Box::new(ProxySession { proxy, wiring }))
    }
}

/// Gemini CLI's private home in `dir` (`gemini-home/.gemini`, mode `0o700`): every entry of
/// the user's `.gemini` (`$GEMINI_CLI_HOME/.gemini`, else `$HOME/.gemini`) linked into it but
/// `settings.json`, whose content is returned (the wiring writes the merged one). So the CLI
/// keeps its credentials, and its chats land where they always do.
fn gemini_home(dir: &Path) -> std::io::Result<serde_json::Value> {
    let real = std::env::var_os("GEMINI_CLI_HOME")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var_os("HOME"))
        .map(|h| PathBuf::from(h).join(".gemini"));
    let ours = dir.join("gemini-home").join(".gemini");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&ours)?;
    let Some(real) = real.filter(|r| r.is_dir()) else {
        return Ok(serde_json::Value::Null);
    };
    for entry in std::fs::read_dir(&real)? {
        let name = entry?.file_name();
        if name != "settings.json" {
            std::os::unix::fs::symlink(real.join(&name), ours.join(&name))?;
        }
    }
    Ok(match std::fs::read_to_string(real.join("settings.json")) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            std::io::Error::other(format!("{}: {e}", real.join("settings.json").display()))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Value::Null,
        Err(e) => return Err(e),
    })
}

fn server(spec: &McpServerSpec) -> McpServer {
    let upstream = match &spec.transport {
        McpTransport::Stdio { command, args, env } => Upstream::Stdio {
            command: command.clone(),
            args: args.clone(),
            env: env.clone(),
        },
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

/// A running proxy; dropping it kills what it started (transcript-mcp's `Drop`).
struct ProxySession {
    proxy: McpProxy,
    wiring: McpWiring,
}

#[async_trait]
impl McpSession for ProxySession {
    fn wiring(&self) -> McpWiring {
        self.wiring.clone()
    }

    async fn shutdown(self: Box<Self>) -> Result<(), McpError> {
        self.proxy
            .shutdown()
            .await
            .map_err(|e| McpError::Lost(e.to_string()))
    }
}
