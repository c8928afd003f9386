//! What the proxy is given: the step's MCP servers ([`McpServer`], [`Upstream`]), its
//! allowlist ([`Allowlist`]) and its limits ([`ProxyLimits`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How the proxy reaches one real MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// A server the proxy starts as a child process speaking MCP on stdin / stdout. The child
    /// runs in its own process group, which is killed when the proxy stops.
    Stdio {
        /// The program (looked up on `PATH` when it has no `/`).
        command: String,
        /// Its arguments, handed over as argv (never through a shell).
        args: Vec<String>,
        /// The server's environment variables. The server sees only these and the runner's
        /// [`crate::INHERITED_ENV`] (`PATH`, `HOME`, ...): never the runner's API keys.
        env: BTreeMap<String, String>,
    },
    /// A server reached over MCP's streamable HTTP transport.
    Http {
        /// The endpoint URL (`http://` or `https://`).
        url: String,
        /// Headers sent with every request (e.g. `Authorization`).
        headers: BTreeMap<String, String>,
    },
}

/// One MCP server of a step: the name the agent CLI sees and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The server's name: 1 to 64 characters of `[A-Za-z0-9_-]`. It is the key of the CLI's
    /// MCP configuration, a segment of the proxy's URL path and the middle of the qualified tool
    /// names (`mcp__<name>__<tool>`).
    pub name: String,
    /// How the proxy reaches it.
    pub upstream: Upstream,
}

/// Why a server list or an allowlist was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A server name [`check_server_name`] refuses, with its reason.
    #[error("MCP server name {name:?} {reason}")]
    BadName {
        /// The name.
        name: String,
        /// Why: one of [`check_server_name`]'s rules.
        reason: &'static str,
    },
    /// Two servers with the same name.
    #[error("MCP server name {0:?} is used twice")]
    Duplicate(String),
    /// A stdio server with an empty command.
    #[error("MCP server {0:?} has an empty command")]
    EmptyCommand(String),
    /// [`ProxyLimits::max_result_bytes`] above [`MAX_RESULT_BYTES_LIMIT`].
    #[error(
        "max_result_bytes {max_result_bytes} is above {limit}: such a result could not be recorded on one transcript line"
    )]
    ResultCap {
        /// The configured cap.
        max_result_bytes: usize,
        /// The largest allowed.
        limit: usize,
    },
    /// A cap of [`ProxyLimits`] that is zero (nothing could pass).
    #[error("ProxyLimits::{0} is zero")]
    ZeroLimit(&'static str),
    /// An HTTP server whose URL is neither `http://` nor `https://`.
    #[error("MCP server {name:?}: url {url:?} is not http:// or https://")]
    BadUrl {
        /// The server.
        name: String,
        /// The URL.
        url: String,
    },
}

/// The rule of a server name, and why a name breaks it (`None`: the name is good).
///
/// A name is 1 to 64 characters of `[A-Za-z0-9_-]` (it is a URL path segment of the proxy, a
/// TOML bare key of Codex's configuration and a JSON key of the others'), does not start with
/// `-` (an option to a CLI), and qualifies every tool to a name no other (server, tool) pair
/// qualifies to: `mcp__<server>__<tool>` is read back by cutting at the first `__` after
/// `mcp__` ([`Allowlist`] does), which finds the server exactly when the name contains no `__`
/// and does not end with `_` (server `a_` with tool `x` and server `a` with tool `_x` would
/// both be `mcp__a___x`). Tool names are the server's and need no rule.
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

/// [`server_name_problem`] as a typed error: [`ConfigError::BadName`] with the reason.
pub fn check_server_name(name: &str) -> Result<(), ConfigError> {
    match server_name_problem(name) {
        None => Ok(()),
        Some(reason) => Err(ConfigError::BadName {
            name: name.to_owned(),
            reason,
        }),
    }
}

/// Checks a step's server list: valid, unique names ([`check_server_name`]); a command for stdio servers; an
/// `http(s)://` URL for HTTP servers.
pub fn validate_servers(servers: &[McpServer]) -> Result<(), ConfigError> {
    let mut seen = BTreeSet::new();
    for server in servers {
        let name = &server.name;
        check_server_name(name)?;
        if !seen.insert(name.as_str()) {
            return Err(ConfigError::Duplicate(name.clone()));
        }
        match &server.upstream {
            Upstream::Stdio { command, .. } if command.is_empty() => {
                return Err(ConfigError::EmptyCommand(name.clone()));
            }
            Upstream::Http { url, .. }
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                return Err(ConfigError::BadUrl {
                    name: name.clone(),
                    url: url.clone(),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// The qualified name of MCP tool `tool` of server `server`: `mcp__<server>__<tool>`.
///
/// This is the name the proxy records (`ToolPayload.name`), the name an allowlist entry
/// spells, and Claude Code's own name for the tool (so the same `tools:` entry also
/// pre-approves it in Claude Code's `--allowedTools`).
pub fn qualified_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// Which MCP tools the agent may call: built from the step's `tools:` list.
///
/// An entry `mcp__<server>__<tool>` allows that tool; an entry `mcp__<server>` allows every
/// tool of that server (Claude Code's permission-rule spelling for both). Every other entry
/// (the CLI's own tools, `Read`, `run_shell_command`, ...) is not about MCP and is ignored
/// here. An empty allowlist allows no MCP tool at all: a step names the tools it wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    tools: BTreeSet<String>,
    servers: BTreeSet<String>,
}

impl Allowlist {
    /// The allowlist of a step's `tools:` entries.
    pub fn from_step_tools<S: AsRef<str>>(tools: impl IntoIterator<Item = S>) -> Self {
        let mut list = Self::default();
        for entry in tools {
            let entry = entry.as_ref();
            let Some(rest) = entry.strip_prefix("mcp__") else {
                continue;
            };
            match rest.split_once("__") {
                Some((server, tool)) if !server.is_empty() && !tool.is_empty() => {
                    list.tools.insert(entry.to_owned());
                }
                None if !rest.is_empty() => {
                    list.servers.insert(rest.to_owned());
                }
                _ => {}
            }
        }
        list
    }

    /// Whether the agent may call `tool` of `server`.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        self.servers.contains(server) || self.tools.contains(&qualified_name(server, tool))
    }

    /// The entries, sorted (whole servers as `mcp__<server>`), for refusal messages.
    pub fn entries(&self) -> Vec<String> {
        let mut all: Vec<String> = self.servers.iter().map(|s| format!("mcp__{s}")).collect();
        all.extend(self.tools.iter().cloned());
        all.sort();
        all
    }
}

/// The bounds the proxy puts on every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyLimits {
    /// How long one `tools/call` may take upstream before the proxy answers with an error
    /// (and records it). The exec step passes the step's whole `timeout_ms` (120 s, the default
    /// here, when it has none), not what is left of it when the call starts: the step's own timeout still
    /// ends the CLI, and the proxy with it, at its time.
    pub call_deadline: Duration,
    /// How long starting one upstream server (spawn and MCP `initialize`) may take.
    pub start_deadline: Duration,
    /// The largest tool result, as encoded JSON bytes, the proxy forwards and records. A larger
    /// one is refused: the agent gets an error result and the record says why and how large it
    /// was. At most [`MAX_RESULT_BYTES_LIMIT`] (checked by [`ProxyLimits::check`] when the proxy
    /// starts) so that a result always fits a transcript line. The recorder may bound the
    /// recorded value further: the exec step's recorder cuts every value above the run's
    /// `max_output_bytes` (the CLI still gets the whole result).
    pub max_result_bytes: usize,
    /// Time an upstream child's process group has between `SIGTERM` and `SIGKILL` on stop.
    pub kill_grace: Duration,
    /// How long listing one server's tools (every page) may take; never longer than
    /// [`ProxyLimits::call_deadline`].
    pub list_deadline: Duration,
    /// The most `tools/list` pages the proxy asks one server for (a server that always
    /// answers with a `nextCursor` stops here).
    pub max_list_pages: usize,
    /// The most tools one server may list.
    pub max_list_tools: usize,
    /// The most bytes (the listed tools as encoded JSON) one server may list.
    pub max_list_bytes: usize,
}

/// The largest [`ProxyLimits::max_result_bytes`]: a result is recorded on one transcript line
/// ([`transcript_domain::MAX_LINE_BYTES`]) beside its event's envelope, for which 64 KiB stay
/// free (as the exec layer keeps).
pub const MAX_RESULT_BYTES_LIMIT: usize = transcript_domain::MAX_LINE_BYTES - 64 * 1024;

impl ProxyLimits {
    /// Refuses limits the proxy cannot keep: a result cap above [`MAX_RESULT_BYTES_LIMIT`]
    /// (such a result could not be recorded on one line), a zero cap (nothing could pass).
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.max_result_bytes > MAX_RESULT_BYTES_LIMIT {
            return Err(ConfigError::ResultCap {
                max_result_bytes: self.max_result_bytes,
                limit: MAX_RESULT_BYTES_LIMIT,
            });
        }
        let zero = [
            ("max_result_bytes", self.max_result_bytes == 0),
            ("max_list_pages", self.max_list_pages == 0),
            ("max_list_tools", self.max_list_tools == 0),
            ("max_list_bytes", self.max_list_bytes == 0),
        ];
        match zero.iter().find(|(_, z)| *z) {
            Some((field, _)) => Err(ConfigError::ZeroLimit(field)),
            None => Ok(()),
        }
    }
}

/// 1 MiB: the default cap of one tool result.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;

impl Default for ProxyLimits {
    fn default() -> Self {
        Self {
            call_deadline: Duration::from_secs(120),
            start_deadline: Duration::from_secs(30),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            kill_grace: Duration::from_secs(2),
            list_deadline: Duration::from_secs(30),
            max_list_pages: 100,
            max_list_tools: 10_000,
            max_list_bytes: 16 * 1024 * 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(name: &str) -> McpServer {
        McpServer {
            name: name.into(),
            upstream: Upstream::Stdio {
                command: "x".into(),
                args: vec![],
                env: BTreeMap::new(),
            },
        }
    }

    #[test]
    fn names_that_would_break_a_url_a_config_key_or_a_qualified_name_are_refused() {
        for bad in [
            "", "a/b", "a b", "a__b", "-x", "é", "a.b", "a\"b", "a\nb", "../x",
        ] {
            assert!(
                matches!(validate_servers(&[stdio(bad)]), Err(ConfigError::BadName { name, .. }) if name == bad),
                "{bad:?}"
            );
        }
        assert!(validate_servers(&[stdio(&"a".repeat(65))]).is_err());
        assert!(validate_servers(&[stdio("files"), stdio("my-srv_2")]).is_ok());
        assert_eq!(
            validate_servers(&[stdio("a"), stdio("a")]),
            Err(ConfigError::Duplicate("a".into()))
        );
    }

    #[test]
    fn http_servers_need_an_http_url() {
        let s = McpServer {
            name: "h".into(),
            upstream: Upstream::Http {
                url: "file:///etc/passwd".into(),
                headers: BTreeMap::new(),
            },
        };
        assert!(matches!(
            validate_servers(&[s]),
            Err(ConfigError::BadUrl { .. })
        ));
    }

    #[test]
    fn the_allowlist_reads_tools_and_whole_servers_and_ignores_other_tools() {
        let list = Allowlist::from_step_tools([
            "Read",
            "mcp__files__read_file",
            "mcp__everything",
            "mcp__",
            "mcp____x",
        ]);
        assert!(list.allows("files", "read_file"));
        assert!(!list.allows("files", "write_file"));
        assert!(list.allows("everything", "echo"));
        assert!(!list.allows("other", "Read"));
        assert_eq!(
            list.entries(),
            vec!["mcp__everything", "mcp__files__read_file"]
        );
        assert!(!Allowlist::default().allows("files", "read_file"));
    }

    #[test]
    fn server_names_that_make_a_qualified_name_ambiguous_are_refused_with_the_reason() {
        // The collision: a_ + x and a + _x.
        assert_eq!(qualified_name("a_", "x"), qualified_name("a", "_x"));
        let err = check_server_name("a_").unwrap_err();
        assert!(err.to_string().contains("mcp__a___x"), "{err}");
        assert!(check_server_name("a").is_ok());
        assert!(check_server_name("_a").is_ok());
        assert!(check_server_name("a-_b").is_ok());
        assert!(server_name_problem("a__b").unwrap().contains("separator"));
        assert!(server_name_problem("-a").unwrap().contains("option"));
        assert!(server_name_problem("").unwrap().contains("1 to 64"));
        assert!(
            server_name_problem("a.b")
                .unwrap()
                .contains("[A-Za-z0-9_-]")
        );
        // Exhaustively over a small alphabet: every accepted name reads back from every
        // qualified name it makes, the way the allowlist reads it.
        let alphabet = ['a', '_', '-'];
        let mut names = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = names
                .iter()
                .flat_map(|n| alphabet.iter().map(move |c| format!("{n}{c}")))
                .collect();
            names.extend(longer);
        }
        names.sort();
        names.dedup();
        let good: Vec<&String> = names
            .iter()
            .filter(|n| server_name_problem(n).is_none())
            .collect();
        assert!(good.len() > 20, "{good:?}");
        for server in &good {
            for tool in &names {
                if tool.is_empty() {
                    continue;
                }
                let q = qualified_name(server, tool);
                let (s, t) = q["mcp__".len()..].split_once("__").unwrap();
                assert_eq!((s, t), (server.as_str(), tool.as_str()), "{q}");
            }
        }
    }

    #[test]
    fn a_result_cap_that_cannot_fit_a_line_is_refused_at_construction() {
        assert!(ProxyLimits::default().check().is_ok());
        let at_limit = ProxyLimits {
            max_result_bytes: MAX_RESULT_BYTES_LIMIT,
            ..ProxyLimits::default()
        };
        assert!(at_limit.check().is_ok());
        let over = ProxyLimits {
            max_result_bytes: transcript_domain::MAX_LINE_BYTES,
            ..ProxyLimits::default()
        };
        assert_eq!(
            over.check(),
            Err(ConfigError::ResultCap {
                max_result_bytes: transcript_domain::MAX_LINE_BYTES,
                limit: MAX_RESULT_BYTES_LIMIT
            })
        );
        let zero = ProxyLimits {
            max_list_pages: 0,
            ..ProxyLimits::default()
        };
        assert_eq!(zero.check(), Err(ConfigError::ZeroLimit("max_list_pages")));
    }
}
