//! The agent step option `mcp_servers:` (#33): the servers a CLI preset step's agent reaches
//! through the runner's MCP proxy (the `mcp` module), as written and as modelled, and their
//! load-time checks.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

/// One MCP server of an agent step: the name the CLI sees and how the proxy reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// 1 to 64 characters of `[A-Za-z0-9_-]`, no `__`, no leading `-`: a key of the CLI's
    /// MCP configuration and the middle of the qualified tool names `mcp__<name>__<tool>`.
    pub name: String,
    /// How the proxy reaches it.
    pub transport: McpTransport,
}

/// How the proxy reaches one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A server the proxy starts, speaking MCP on stdin / stdout (argv, never a shell).
    Stdio {
        /// The program (looked up on `PATH` when it has no `/`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its environment (on top of a few inherited variables such as `PATH` and `HOME`;
        /// never the runner's API keys).
        env: BTreeMap<String, String>,
    },
    /// A server reached over MCP's streamable HTTP transport.
    Http {
        /// `http://` or `https://` URL.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// One `mcp_servers:` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpServerDef {
    name: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
}

/// The model of the written entries: each is a stdio server (`command`, optional `args`,
/// `env`) or an HTTP server (`url`, optional `headers`), never both.
pub(crate) fn servers_of(defs: Vec<McpServerDef>) -> Result<Vec<McpServerSpec>, String> {
    defs.into_iter()
        .map(|d| {
            let transport = match (d.command, d.url) {
                (Some(command), None) if d.headers.is_none() => McpTransport::Stdio {
                    command,
                    args: d.args.unwrap_or_default(),
                    env: d.env.unwrap_or_default(),
                },
                (None, Some(url)) if d.args.is_none() && d.env.is_none() => McpTransport::Http {
                    url,
                    headers: d.headers.unwrap_or_default(),
                },
                (Some(_), Some(_)) | (None, None) => {
                    return Err(format!(
                        "mcp_servers '{}': give either command (stdio) or url (streamable HTTP)",
                        d.name
                    ));
                }
                (Some(_), None) => {
                    return Err(format!(
                        "mcp_servers '{}': headers belong to url servers, not command ones",
                        d.name
                    ));
                }
                (None, Some(_)) => {
                    return Err(format!(
                        "mcp_servers '{}': args and env belong to command servers, not url ones",
                        d.name
                    ));
                }
            };
            Ok(McpServerSpec {
                name: d.name,
                transport,
            })
        })
        .collect()
}

/// Why `name` cannot be an MCP server name, or `None` when it can: 1 to 64 characters of
/// `[A-Za-z0-9_-]` (a URL path segment, a TOML bare key and a CLI argument hold it as is),
/// not starting with `-` (an option to a CLI), without `__` and not ending with `_`, so that
/// `mcp__<server>__<tool>` is read back at its first `__` after `mcp__` to exactly one server
/// (server `a_` with tool `x` and server `a` with tool `_x` would both be `mcp__a___x`).
///
/// The same rule, with the same reasons, as transcript-mcp's `config::server_name_problem`
/// (exec does not depend on transcript-mcp; a transcript-cli test checks they agree), so a
/// name the proxy would refuse is refused when the workflow is loaded.
pub fn server_name_problem(name: &str) -> Option<&'static str> {
    if !(1..=64).contains(&name.len()) {
        return Some("is not 1 to 64 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Some("has a character outside [A-Za-z0-9_-]");
    }
    if name.starts_with('-') {
        return Some("starts with \"-\", which a CLI would read as an option");
    }
    if name.contains("__") {
        return Some(
            "contains \"__\", the separator of qualified tool names mcp__<server>__<tool>",
        );
    }
    if name.ends_with('_') {
        return Some(
            "ends with \"_\": mcp__<server>__<tool> would be ambiguous (server \"a_\" with tool \"x\" and server \"a\" with tool \"_x\" are both mcp__a___x)",
        );
    }
    None
}

/// Checks a step's servers: names [`server_name_problem`] accepts, unique; a non-empty
/// command; an `http(s)://` URL; literal values.
pub fn check_servers(servers: &[McpServerSpec]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for s in servers {
        let name = &s.name;
        if let Some(reason) = server_name_problem(name) {
            return Err(format!("mcp_servers: name {name:?} {reason}"));
        }
        if !seen.insert(name.as_str()) {
            return Err(format!("mcp_servers: name {name:?} is used twice"));
        }
        match &s.transport {
            McpTransport::Stdio { command, .. } => {
                if command.is_empty() {
                    return Err(format!("mcp_servers '{name}': empty command"));
                }
            }
            McpTransport::Http { url, .. } => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "mcp_servers '{name}': url {url:?} is not http:// or https://"
                    ));
                }
            }
        }
        if let McpTransport::Stdio { command, args, .. } = &s.transport {
            let argv: Vec<String> = std::iter::once(command).chain(args).cloned().collect();
            super::argv_rule::check_literal_argv(&argv)
                .map_err(|r| format!("mcp_servers '{name}': {r}"))?;
        }
        let templated = match &s.transport {
            McpTransport::Stdio { env, .. } => env.values().any(|v| v.contains("{{")),
            McpTransport::Http { url, headers } => std::iter::once(url)
                .chain(headers.values())
                .any(|v| v.contains("{{")),
        };
        if templated {
            return Err(format!(
                "mcp_servers '{name}': values are literal, {{{{…}}}} is not rendered here"
            ));
        }
    }
    Ok(())
}

/// The load-time rule of an agent step's `mcp_servers`: only on a CLI preset step
/// (`claude`, `codex`, `gemini` without `command:`), whose configuration the runner writes;
/// then [`check_servers`].
pub(crate) fn check_step<T>(
    provider: &crate::provider::AgentProvider,
    command: &[T],
    servers: &[McpServerSpec],
) -> Result<(), String> {
    if servers.is_empty() {
        return Ok(());
    }
    if crate::preset::Preset::of_agent(provider).is_none() || !command.is_empty() {
        return Err(format!(
            "mcp_servers needs a CLI preset step (provider claude, codex or gemini, without command:), not provider '{provider}'{}",
            if command.is_empty() {
                ""
            } else {
                " with a command"
            }
        ));
    }
    check_servers(servers)
}
