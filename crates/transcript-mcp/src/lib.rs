//! The recording, allowlisting MCP proxy between a real agent CLI (Claude Code, Codex,
//! Gemini CLI) and the MCP servers of its step (#33).
//!
//! A real CLI runs its tools itself; until now the transcript knew them only as the CLI
//! reported them (`agent_emitted`). MCP is the seam where we can observe, and control, what
//! the CLI's external tools actually do: the CLI is configured to talk to this proxy, which
//! talks to the real servers.
//!
//! # Model
//!
//! ```text
//! agent CLI --(streamable HTTP, 127.0.0.1, secret header)--> McpProxy --(stdio | HTTP)--> MCP server
//!                                                               |
//!                                          Recorder port: tool.call / tool.result (router)
//! ```
//!
//! - [`McpProxy::start`] starts every upstream server of the step ([`McpServer`]: stdio
//!   `command` / `args` / `env`, or streamable HTTP `url` / `headers`), then serves one MCP
//!   endpoint per server, `http://127.0.0.1:<port>/mcp/<name>`, inside the runner's process.
//! - [`preset`] turns the endpoints into each CLI's own MCP configuration (Claude Code's
//!   `--mcp-config` file, Codex's `[mcp_servers]` in `config.toml`, Gemini CLI's `mcpServers`
//!   in `settings.json`), all three using the CLI's native HTTP server support.
//! - Every `tools/call` is recorded through the [`transcript_domain::Recorder`] port as
//!   `tool.call` then `tool.result`, fidelity `router`, at the agent step's path and
//!   iteration, with the arguments and the MCP result as the SDK decoded them (`content`,
//!   `structuredContent`, `isError`, `_meta`): exactly what the CLI got, up to the recorder's
//!   own bound on one value (the exec step's recorder cuts a value above the run's
//!   `max_output_bytes` with its truncation marker, while the CLI still gets the whole
//!   result, up to [`ProxyLimits::max_result_bytes`]). The recorded name is the qualified
//!   `mcp__<server>__<tool>` ([`qualified_name`]).
//! - `tools/list` toward a server is bounded ([`ProxyLimits::list_deadline`], never longer
//!   than the call deadline, and caps on pages, tools and bytes): a bound hit answers the CLI
//!   with a JSON-RPC error naming it and is recorded as a `router` pair named
//!   [`LIST_DIAGNOSTIC`] (input `{"server": <name>}`, the reason as its error).
//! - [`Allowlist`] (from the step's `tools:`) is enforced here: `tools/list` shows only
//!   allowed tools; a call to any other tool is not forwarded, it is answered with an MCP tool
//!   error result (`isError: true`, a text naming the allowed tools, which every CLI shows to
//!   its model) and recorded as a `tool.call` and a `tool.result` with that `error`.
//!
//! Why in-process streamable HTTP rather than a stdio relay subcommand: all three installed
//! CLIs support HTTP MCP servers natively (Claude Code `"type": "http"`, Codex `url =` with
//! `http_headers`, Gemini CLI `httpUrl` with `headers`), so the proxy needs no process of its
//! own: its lifetime is a value in the runner ([`McpProxy`]), cancelled with the step, and
//! the recording goes straight to the run's recorder instead of crossing a pipe. Measured with
//! the pinned CLIs (`tests/real_claude.rs`, `tests/real_codex_gemini.rs`, and through the
//! binary `crates/transcript-cli/tests/mcp_real_agents.rs`): Claude Code 2.1.331, Codex 0.169
//! and Gemini CLI 0.61 each list the allowed tools and call one through the proxy. The endpoint sends no SSE
//! priming events: their empty `data:` makes Gemini CLI's MCP client drop the server.
//!
//! # Invariants
//!
//! 1. Every `tools/call` the proxy receives is recorded, `tool.call` before anything else
//!    happens and `tool.result` after, each once, under one proxy call id
//!    `<prefix>/mcp-<n>`: allowed, refused, failed, timed out, oversized or cancelled alike
//!    (`tests/proxy.rs`).
//! 2. A refused tool never reaches the upstream server (`tests/proxy.rs`, the fault server
//!    counts calls).
//! 3. A call ends within [`ProxyLimits::call_deadline`]; an upstream crash, a malformed
//!    answer or a result above [`ProxyLimits::max_result_bytes`] becomes an error result for
//!    the CLI and an `error` in the record, never a hang or a proxy crash.
//! 4. Nothing the proxy started survives [`McpProxy::shutdown`] or the drop of the handle:
//!    stdio servers run in their own process group, which is killed (checked against the OS
//!    in `tests/proxy.rs`). Not yet for a server that leaves its group (`setsid`, a
//!    double fork): ending those is the runner's subreaper's job (#40 item 4, open).
//! 5. A write that failed is reported by [`McpProxy::shutdown`] ([`ProxyError::Record`]):
//!    a step that lost an observation cannot report success.
//!
//! # Counting a call once
//!
//! The CLI reports the same call itself (`agent_emitted`, under the provider's tool id, e.g.
//! `toolu_…`), and MCP does not carry that id to the server, so the two observations have
//! different call ids. [`correlate::pair_observations`] matches them (same step, same
//! qualified or CLI-spelled tool name, equal input, in order) so that counting treats one
//! call seen twice as one, and reports when the two observations disagree (different
//! output, or one side missing).
//!
//! # Threat model
//!
//! - The endpoint listens on `127.0.0.1` only, on a fresh port, and refuses every request
//!   without the run's secret header ([`SECRET_HEADER`], 256 bits from the OS, compared in
//!   constant time): another local process cannot use the run's MCP servers through it. The
//!   secret never goes to argv (readable by every local user in `/proc`): Claude Code and
//!   Gemini CLI read it from their private config files (mode `0o600` in a `0o700`
//!   directory), Codex from its environment ([`preset::CODEX_SECRET_ENV`], readable by its
//!   user only); `Debug` of [`ProxyEndpoints`] and of [`preset::Wiring`] redacts it.
//! - Only the proxy's servers exist for the CLI: the user's own MCP servers (Claude Code's
//!   `.claude.json` and `.mcp.json`, Codex's `config.toml`, Gemini CLI's settings, extensions
//!   and workspace settings) are not started, so no call goes around the proxy; how, per CLI,
//!   and what of the user's configuration is still read: [`preset`] (proof:
//!   `crates/transcript-cli/tests/mcp_no_bypass.rs`). rmcp additionally checks the `Host` header (loopback only)
//!   against DNS rebinding.
//! - Tool arguments and results are untrusted data: they are recorded as JSON values and
//!   never interpreted; upstream commands are argv, never shell source.
//! - A stdio server gets a cleared environment: [`INHERITED_ENV`] of the runner's plus its own
//!   configured `env`, so the runner's provider keys, and the `NATS_*` credentials of its
//!   storage connection, do not leak to third-party servers (proof for the latter:
//!   `crates/transcript-cli/tests/nats_env_withheld.rs`).
//! - A hostile or broken server is bounded in time, result size and lifetime (invariants 3
//!   and 4), and its `tools/list` in time, pages, tools and bytes. Server names follow
//!   [`server_name_problem`]: `[A-Za-z0-9_-]`, no leading `-`, no `__`, no trailing `_`, so
//!   they cannot bend a URL path, a TOML key or an option, and every qualified tool name
//!   `mcp__<server>__<tool>` names one server and one tool.
//!
//! # Integration (exec agent step)
//!
//! `transcript-exec` does not depend on this crate: it defines the port
//! (`transcript_exec::mcp::McpGateway`), and `transcript-cli` adapts this crate to it
//! (`crates/transcript-cli/src/mcp_gateway.rs`). For a CLI preset step with `mcp_servers:`:
//! 1. `McpProxy::start(&servers, Allowlist::from_step_tools(&step.tools), RecordTarget {
//!    recorder, path, iteration, call_id_prefix: "<path>#<iteration>" }, ProxyLimits {
//!    call_deadline: <the step's whole timeout_ms>, ..Default::default() }, step_cancel)`;
//! 2. [`preset::wiring`] for the CLI, in a fresh private directory: Claude Code gets
//!    [`preset::claude_args`] and its `--mcp-config` file; Codex gets [`preset::codex_args`]
//!    (`-c` overrides), the secret in [`preset::CODEX_SECRET_ENV`] and a private
//!    `CODEX_HOME` whose `config.toml` is the user's without servers; Gemini CLI gets
//!    [`preset::gemini_args`] and a private home ([`preset::GEMINI_HOME_ENV`]) whose
//!    `settings.json` is the user's with only the proxy's `mcpServers`. The user's homes are
//!    found from the step's `env:` first, then the runner's environment; their files are never
//!    modified;
//! 3. the CLI runs; then `proxy.shutdown().await` whatever its outcome, and the step fails on
//!    its error (a lost observation).
//!
//! # Versioning
//!
//! Built on rmcp 3.11 (MCP protocol versions it negotiates, up to `2026-07-28`). The recorded
//! shapes are the wire contract's `ToolPayload` unchanged; the qualified tool name and the
//! `mcp-<n>` call-id suffix are this crate's and stable.

#![forbid(unsafe_code)]

pub mod config;
pub mod correlate;
mod error;
pub mod home;
pub mod preset;
mod proxy;
mod record;
mod serve;
mod upstream;

pub use config::{
    Allowlist, ConfigError, DEFAULT_MAX_RESULT_BYTES, MAX_RESULT_BYTES_LIMIT, McpServer,
    ProxyLimits, Upstream, check_server_name, qualified_name, server_name_problem,
    validate_servers,
};
pub use error::ProxyError;
pub use preset::{Endpoint, ProxyEndpoints};
pub use proxy::LIST_DIAGNOSTIC;
pub use record::RecordTarget;
pub use serve::{McpProxy, SECRET_HEADER};
pub use upstream::INHERITED_ENV;

/// What a [`Launch`] keeps alive as long as the server it started runs (dropped after it).
pub type LaunchGuard = Box<dyn std::any::Any + Send + Sync>;

/// The composition root's hook to confine the stdio servers ([`McpProxy::start_launching`]):
/// how a server's command is made, and how the prepared command (its own process group,
/// pipes and environment set) is started.
pub trait Launcher: Send + Sync {
    /// The command that will run `program` (another program may run it: a sandbox's helper).
    fn command(&self, program: &str) -> tokio::process::Command {
        tokio::process::Command::new(program)
    }

    /// Starts the prepared command.
    ///
    /// # Errors
    /// The process could not be started.
    fn spawn(
        &self,
        cmd: &mut tokio::process::Command,
    ) -> std::io::Result<(tokio::process::Child, LaunchGuard)>;
}

/// A shared [`Launcher`].
pub type Launch = std::sync::Arc<dyn Launcher>;
