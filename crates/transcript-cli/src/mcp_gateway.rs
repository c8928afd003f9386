//! The engine's MCP port ([`transcript_exec::mcp::McpGateway`]) over transcript-mcp's proxy:
//! the composition root's adapter, so that the engine knows neither the MCP SDK nor its HTTP
//! stack. One [`McpProxy`] per agent execution, wired into the CLI by
//! [`transcript_mcp::preset::wiring`].

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
        let w = preset::wiring(cli, proxy.endpoints(), &start.config_dir);
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
