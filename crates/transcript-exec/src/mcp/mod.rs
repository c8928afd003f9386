//! MCP servers of a CLI agent step (#33): the step option `mcp_servers:`, its checks at
//! load, the port through which the service starts a recording, allowlisting proxy for
//! them ([`McpGateway`], injected with
//! [`ServiceBuilder::mcp_gateway`](crate::service::ServiceBuilder::mcp_gateway)), and the
//! proxy's lifetime around the CLI (`step.rs`).
//!
//! ```yaml
//! - name: ask
//!   type: agent
//!   provider: claude            # claude | codex | gemini, without command:
//!   prompt: Echo something.
//!   tools: [mcp__everything__echo]   # the MCP tools the agent may call
//!   mcp_servers:
//!     - name: everything             # stdio: command, args, env
//!       command: npx
//!       args: ["-y", "@modelcontextprotocol/server-everything"]
//!       env: { LOG_LEVEL: info }
//!     - name: docs                   # streamable HTTP: url, headers
//!       url: https://mcp.example.com/mcp
//!       headers: { Authorization: "Bearer abc" }
//! ```
//!
//! The CLI never talks to these servers itself: its MCP configuration names the proxy, which
//! forwards to them, records every `tools/call` as `tool.call` / `tool.result` at `router`
//! fidelity, and refuses (and hides) every MCP tool the step's `tools:` does not list
//! (`mcp__<server>__<tool>`, or `mcp__<server>` for all of a server's tools). Values are
//! literal: no `{{…}}` in `mcp_servers`.
//!
//! A CLI preset step without `mcp_servers:` (and without a registered runner for its
//! provider) gets the same wiring for the empty set, when the service has a gateway: the CLI
//! then starts none of the user's own MCP servers either (#40 follow-up). Without a gateway
//! such a step runs the CLI with its own configuration.
//!
//! Why a port and not a dependency on the proxy crate: the engine stays free of the MCP
//! SDK and its HTTP stack; the composition root (`transcript-cli`) adapts
//! `transcript-mcp` to [`McpGateway`].

mod port;
pub(crate) mod step;

pub use crate::workflow::{McpServerSpec, McpTransport, check_servers, server_name_problem};
pub use port::{McpError, McpFile, McpGateway, McpSession, McpStart, McpWiring};
