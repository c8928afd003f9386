//! Each agent CLI's own MCP configuration, pointing at the proxy: pure functions from
//! [`ProxyEndpoints`] to file contents and arguments.
//!
//! The secret never travels in argv (which other local users can read in `/proc`): it is in
//! these files, which the caller writes into the step's private configuration directory with
//! mode `0o600`, or in the CLI's environment (Codex), which only its user can read.
//!
//! # Only the proxy's servers exist for the CLI
//!
//! Each CLI would otherwise also start the MCP servers of the user's own configuration, whose
//! calls would be neither recorded nor allowlisted. Measured with the pinned CLIs
//! (`crates/transcript-cli/tests/mcp_no_bypass.rs`):
//!
//! | CLI | how | what of the user's configuration is still read |
//! |-----|-----|-----|
//! | Claude Code 2.1 | `--mcp-config <file> --strict-mcp-config` ([`claude_args`]): the user's `~/.claude.json`, `$CLAUDE_CONFIG_DIR/.claude.json` and the workspace's `.mcp.json` servers are ignored | everything else: settings, credentials, session logs |
//! | Codex 0.169 | a private `CODEX_HOME` ([`CODEX_HOME_ENV`]): its `config.toml` is the user's without `mcp_servers` and without `projects` ([`codex_config_without_servers`]; `-c` merges into a table, it cannot replace one), every other entry of the user's `CODEX_HOME` linked into it; the proxy's servers as `-c` overrides ([`codex_args`]) | model and provider settings, `auth.json`, sessions and history (linked) |
//! | Gemini CLI 0.61 | a private home ([`GEMINI_HOME_ENV`]) whose `settings.json` is the user's with `mcpServers` and `mcp` replaced ([`gemini_user_settings`]); `--allowed-mcp-server-names` with only the proxy's names and `--extensions=none` ([`gemini_args`]); a workspace `.gemini/settings.json` declaring a server of the same name as one of the proxy's is refused ([`gemini_workspace_shadows`]) | every other setting (auth, model, retries), credentials, chats (linked) |
//!
//! Gemini CLI's servers are marked `trust: true` (no confirmation prompt, which a headless run
//! could not answer): the proxy, not the CLI, enforces the step's allowlist.

use serde_json::{Map, Value, json};

/// One server's endpoint on the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The server's name (the CLI's configuration key).
    pub server: String,
    /// `http://127.0.0.1:<port>/mcp/<server>`.
    pub url: String,
}

/// Where the agent CLI finds the proxy: one endpoint per server and the header that proves
/// the caller is this run's CLI.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyEndpoints {
    /// The endpoints, in the step's server order.
    pub endpoints: Vec<Endpoint>,
    /// The header's name ([`crate::SECRET_HEADER`]).
    pub secret_header: String,
    /// The per-run secret (256 bits from the OS, hex).
    pub secret: String,
}

impl std::fmt::Debug for ProxyEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyEndpoints")
            .field("endpoints", &self.endpoints)
            .field("secret_header", &self.secret_header)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl ProxyEndpoints {
    fn headers(&self) -> Value {
        json!({ self.secret_header.clone(): self.secret })
    }
}

/// Why an existing configuration could not be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PresetError {
    /// The existing Codex `config.toml` is not TOML, or its `mcp_servers` is not a table.
    #[error("codex config.toml: {0}")]
    CodexConfig(String),
    /// The existing Gemini CLI `settings.json` is not a JSON object, or its `mcpServers` is
    /// not an object.
    #[error("gemini settings.json: {0}")]
    GeminiSettings(String),
}

/// Claude Code's `--mcp-config` file: every server of the proxy as an `http` server.
pub fn claude_mcp_config(endpoints: &ProxyEndpoints) -> String {
    let servers: Map<String, Value> = endpoints
        .endpoints
        .iter()
        .map(|e| {
            let server = json!({"type": "http", "url": e.url, "headers": endpoints.headers()});
            (e.server.clone(), server)
        })
        .collect();
    json!({ "mcpServers": servers }).to_string()
}

/// Claude Code's arguments for the file [`claude_mcp_config`] was written to:
/// `--mcp-config <file> --strict-mcp-config` (only the proxy's servers, none of the user's).
pub fn claude_args(config_file: &str) -> Vec<String> {
    vec![
        "--mcp-config".to_owned(),
        config_file.to_owned(),
        "--strict-mcp-config".to_owned(),
    ]
}

/// Codex's `config.toml` with the proxy's servers added as `[mcp_servers.<name>]` tables
/// (`url`, `http_headers`); everything already in `existing` is kept, a server of the same
/// name is replaced.
pub fn codex_config_toml(
    existing: &str,
    endpoints: &ProxyEndpoints,
) -> Result<String, PresetError> {
    let mut doc: toml_edit::DocumentMut = existing
        .parse()
        .map_err(|e: toml_edit::TomlError| PresetError::CodexConfig(e.to_string()))?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| PresetError::CodexConfig("mcp_servers is not a table".into()))?;
    for e in &endpoints.endpoints {
        let mut server = toml_edit::Table::new();
        server.insert("url", toml_edit::value(e.url.as_str()));
        let mut headers = toml_edit::InlineTable::new();
        headers.insert(
            endpoints.secret_header.as_str(),
            endpoints.secret.as_str().into(),
        );
        server.insert("http_headers", toml_edit::value(headers));
        servers.insert(&e.server, toml_edit::Item::Table(server));
    }
    Ok(doc.to_string())
}

/// The user's Codex `config.toml` for the private `CODEX_HOME` of a step with MCP servers:
/// `existing` without its `mcp_servers` table (top level and in every `profiles.<name>`) and
/// without `projects` (a trusted project's own `.codex/config.toml` would add its servers);
/// everything else (model, providers, approvals) is kept as written.
pub fn codex_config_without_servers(existing: &str) -> Result<String, PresetError> {
    let mut doc: toml_edit::DocumentMut = existing
        .parse()
        .map_err(|e: toml_edit::TomlError| PresetError::CodexConfig(e.to_string()))?;
    doc.remove("mcp_servers");
    doc.remove("projects");
    if let Some(profiles) = doc.get_mut("profiles").and_then(|p| p.as_table_like_mut()) {
        for (_, profile) in profiles.iter_mut() {
            if let Some(profile) = profile.as_table_like_mut() {
                profile.remove("mcp_servers");
            }
        }
    }
    Ok(doc.to_string())
}

/// The variable that moves Codex's home (`~/.codex` by default), where it reads
/// `config.toml`.
pub const CODEX_HOME_ENV: &str = "CODEX_HOME";

/// Where the private Codex home goes, relative to the wiring's directory.
pub const CODEX_HOME_DIR: &str = "codex-home";

/// The variable that carries the proxy's secret to Codex (see [`codex_args`]).
pub const CODEX_SECRET_ENV: &str = "TRANSCRIPT_MCP_SECRET";

/// Codex's `-c` overrides pointing it at the proxy without touching its `config.toml`: per
/// server `mcp_servers.<name>.url` and `mcp_servers.<name>.env_http_headers`, which names the
/// variable [`CODEX_SECRET_ENV`] holding the secret (set it in Codex's environment, which only
/// its user can read, unlike argv). A server of the same name in `config.toml` is overridden.
/// Values are TOML strings (JSON's quoting, valid TOML for these ASCII values); names are
/// `[A-Za-z0-9_-]`, TOML bare keys.
pub fn codex_args(endpoints: &ProxyEndpoints) -> Vec<String> {
    let quote = |s: &str| Value::String(s.to_owned()).to_string();
    let mut args = Vec::new();
    for e in &endpoints.endpoints {
        args.push("-c".to_owned());
        args.push(format!("mcp_servers.{}.url={}", e.server, quote(&e.url)));
        args.push("-c".to_owned());
        args.push(format!(
            "mcp_servers.{}.env_http_headers={{{}={}}}",
            e.server,
            quote(&endpoints.secret_header),
            quote(CODEX_SECRET_ENV)
        ));
        // Headless Codex refuses a tool that is not read-only ("requires approval, but
        // approval policy is never"): the step's tools: is the approval, enforced by the proxy.
        args.push("-c".to_owned());
        args.push(format!(
            "mcp_servers.{}.default_tools_approval_mode=\"approve\"",
            e.server
        ));
    }
    args
}

/// Gemini CLI's `settings.json` with the proxy's servers set under `mcpServers`
/// (`httpUrl`, `headers`, `trust`); everything else in `existing` is kept, a server of the
/// same name is replaced.
pub fn gemini_settings(existing: Value, endpoints: &ProxyEndpoints) -> Result<Value, PresetError> {
    let Value::Object(mut settings) = existing else {
        return Err(PresetError::GeminiSettings("not a JSON object".into()));
    };
    let servers = settings
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| PresetError::GeminiSettings("mcpServers is not an object".into()))?;
    for e in &endpoints.endpoints {
        servers.insert(
            e.server.clone(),
            json!({"httpUrl": e.url, "headers": endpoints.headers(), "trust": true}),
        );
    }
    Ok(Value::Object(settings))
}

/// The variable that moves Gemini CLI's home (`$GEMINI_CLI_HOME/.gemini`, default `~`).
/// Gemini CLI 0.61 has no flag for MCP servers and skips a "system" settings file that is not
/// root-owned up to `/`, so the runner gives it a private home whose `.gemini/settings.json`
/// holds the proxy's servers ([`GEMINI_SETTINGS_FILE`]); the caller links the rest of the
/// user's `.gemini` into it.
pub const GEMINI_HOME_ENV: &str = "GEMINI_CLI_HOME";

/// Where the private Gemini home's settings go, relative to the wiring's directory.
pub const GEMINI_SETTINGS_FILE: &str = "gemini-home/.gemini/settings.json";

/// The one name Gemini CLI is allowed when the step has no MCP server: Gemini CLI reads an
/// empty allowlist as "allow every server" and refuses an empty name, so the empty set is a
/// list of one name no server of ours has (a workspace server declaring it is a shadow,
/// [`gemini_workspace_shadows`], and is refused like one).
pub const GEMINI_NO_SERVER: &str = "transcript-no-mcp-server";

/// The server names Gemini CLI is allowed: the proxy's, or [`GEMINI_NO_SERVER`] when it has
/// none.
pub fn gemini_allowed_names(endpoints: &ProxyEndpoints) -> Vec<&str> {
    let names: Vec<&str> = endpoints
        .endpoints
        .iter()
        .map(|e| e.server.as_str())
        .collect();
    if names.is_empty() {
        vec![GEMINI_NO_SERVER]
    } else {
        names
    }
}

/// Gemini CLI's arguments: `--allowed-mcp-server-names=<name>` for each of
/// [`gemini_allowed_names`] (any other server, from settings or elsewhere, is blocked by
/// name) and `--extensions=none` (an extension's server would otherwise be merged into one of
/// the same name).
pub fn gemini_args(endpoints: &ProxyEndpoints) -> Vec<String> {
    let mut args: Vec<String> = gemini_allowed_names(endpoints)
        .into_iter()
        .map(|name| format!("--allowed-mcp-server-names={name}"))
        .collect();
    args.push("--extensions=none".to_owned());
    args
}

/// The user's Gemini CLI `settings.json` for the private home: `user` with everything about
/// MCP (`mcpServers`, `mcp`: its `serverCommand` starts a server too) replaced by the proxy's
/// servers ([`gemini_settings`]); a value that is not an object counts as empty.
pub fn gemini_user_settings(user: Value, endpoints: &ProxyEndpoints) -> Value {
    let mut user = match user {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    user.remove("mcpServers");
    user.remove("mcp");
    // An object without `mcpServers` always merges.
    gemini_settings(Value::Object(user), endpoints).unwrap_or_default()
}

/// The servers a workspace's `.gemini/settings.json` (`workspace`) declares under a name
/// Gemini CLI is allowed ([`gemini_allowed_names`]: the proxy's, or [`GEMINI_NO_SERVER`]):
/// Gemini CLI merges workspace servers over the user's by name, so such a server would
/// replace the proxy's (or run, for the empty set) under the name
/// `--allowed-mcp-server-names` allows (a `mcp.serverCommand` declares the server `mcp`).
/// The caller refuses to start the CLI then.
pub fn gemini_workspace_shadows(workspace: &Value, endpoints: &ProxyEndpoints) -> Vec<String> {
    let mut declared: Vec<&str> = workspace["mcpServers"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if !workspace["mcp"]["serverCommand"].is_null() {
        declared.push("mcp");
    }
    gemini_allowed_names(endpoints)
        .into_iter()
        .filter(|name| declared.contains(name))
        .map(str::to_owned)
        .collect()
}

/// What the wiring keeps of the user's own configuration (read by the caller).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserConfig {
    /// The user's Codex `config.toml` text (empty when there is none).
    pub codex_config: String,
    /// The user's Gemini CLI `settings.json` (`Null` when there is none).
    pub gemini_settings: Value,
}

/// An agent CLI the proxy can be wired into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
    /// Gemini CLI.
    Gemini,
}

impl Cli {
    /// The CLI of a provider name (`claude`, `codex`, `gemini`).
    pub fn of(provider: &str) -> Option<Cli> {
        match provider {
            "claude" => Some(Cli::Claude),
            "codex" => Some(Cli::Codex),
            "gemini" => Some(Cli::Gemini),
            _ => None,
        }
    }
}

/// How one CLI is pointed at the proxy without touching the user's own configuration.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Wiring {
    /// Arguments for the CLI (before its prompt).
    pub args: Vec<String>,
    /// Files to create (mode `0o600`, they may hold the secret): path and contents.
    pub files: Vec<(std::path::PathBuf, String)>,
    /// Environment variables for the CLI (may hold the secret).
    pub env: Vec<(String, String)>,
}

impl std::fmt::Debug for Wiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring")
            .field("args", &self.args)
            .field(
                "files",
                &self.files.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .finish()
    }
}

/// The [`Wiring`] of `cli` for `endpoints`, its files in `dir` (a private directory):
/// Claude Code: `dir/transcript-mcp.json` ([`claude_mcp_config`]) and [`claude_args`] (only
/// these servers); Codex: [`codex_args`], the secret in [`CODEX_SECRET_ENV`] and a private
/// home `dir/`[`CODEX_HOME_DIR`] ([`CODEX_HOME_ENV`]) whose `config.toml` is the user's
/// without servers ([`codex_config_without_servers`]); Gemini CLI: [`gemini_args`] and
/// `dir/`[`GEMINI_SETTINGS_FILE`] ([`gemini_user_settings`]), its home named by
/// [`GEMINI_HOME_ENV`]. The caller links the other entries of the user's homes into the
/// private ones.
pub fn wiring(
    cli: Cli,
    endpoints: &ProxyEndpoints,
    dir: &std::path::Path,
    user: UserConfig,
) -> Result<Wiring, PresetError> {
    Ok(match cli {
        Cli::Claude => {
            let file = dir.join("transcript-mcp.json");
            Wiring {
                args: claude_args(&file.to_string_lossy()),
                files: vec![(file, claude_mcp_config(endpoints))],
                env: Vec::new(),
            }
        }
        Cli::Codex => {
            let home = dir.join(CODEX_HOME_DIR);
            Wiring {
                args: codex_args(endpoints),
                files: vec![(
                    home.join("config.toml"),
                    codex_config_without_servers(&user.codex_config)?,
                )],
                env: vec![
                    (CODEX_SECRET_ENV.to_owned(), endpoints.secret.clone()),
                    (
                        CODEX_HOME_ENV.to_owned(),
                        home.to_string_lossy().into_owned(),
                    ),
                ],
            }
        }
        Cli::Gemini => Wiring {
            args: gemini_args(endpoints),
            env: vec![(
                GEMINI_HOME_ENV.to_owned(),
                dir.join("gemini-home").to_string_lossy().into_owned(),
            )],
            files: vec![(
                dir.join(GEMINI_SETTINGS_FILE),
                gemini_user_settings(user.gemini_settings, endpoints).to_string(),
            )],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints() -> ProxyEndpoints {
        ProxyEndpoints {
            endpoints: vec![
                Endpoint {
                    server: "files".into(),
                    url: "http://127.0.0.1:4000/mcp/files".into(),
                },
                Endpoint {
                    server: "every-thing".into(),
                    url: "http://127.0.0.1:4000/mcp/every-thing".into(),
                },
            ],
            secret_header: "x-transcript-mcp-secret".into(),
            secret: "s3cr3t".into(),
        }
    }

    #[test]
    fn claude_gets_http_servers_with_the_secret_header_and_strict_args() {
        let v: Value = serde_json::from_str(&claude_mcp_config(&endpoints())).unwrap();
        assert_eq!(
            v,
            json!({"mcpServers": {
                "files": {"type": "http", "url": "http://127.0.0.1:4000/mcp/files", "headers": {"x-transcript-mcp-secret": "s3cr3t"}},
                "every-thing": {"type": "http", "url": "http://127.0.0.1:4000/mcp/every-thing", "headers": {"x-transcript-mcp-secret": "s3cr3t"}}
            }})
        );
        assert_eq!(
            claude_args("/c/m.json"),
            ["--mcp-config", "/c/m.json", "--strict-mcp-config"]
        );
    }

    #[test]
    fn codex_config_keeps_what_is_there_and_adds_the_servers() {
        let existing = "model_provider = \"testkit\"\n\n[model_providers.testkit]\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[mcp_servers.files]\ncommand = \"old\"\n";
        let merged = codex_config_toml(existing, &endpoints()).unwrap();
        let doc: toml_edit::DocumentMut = merged.parse().unwrap();
        assert_eq!(doc["model_provider"].as_str(), Some("testkit"));
        assert_eq!(
            doc["model_providers"]["testkit"]["base_url"].as_str(),
            Some("http://127.0.0.1:1/v1")
        );
        assert_eq!(
            doc["mcp_servers"]["files"]["url"].as_str(),
            Some("http://127.0.0.1:4000/mcp/files")
        );
        assert!(
            doc["mcp_servers"]["files"].get("command").is_none(),
            "{merged}"
        );
        assert_eq!(
            doc["mcp_servers"]["every-thing"]["http_headers"]["x-transcript-mcp-secret"].as_str(),
            Some("s3cr3t")
        );
        assert!(codex_config_toml("mcp_servers = 3", &endpoints()).is_err());
        assert!(codex_config_toml("[unclosed", &endpoints()).is_err());
    }

    #[test]
    fn codex_args_carry_urls_and_name_the_secret_variable_never_the_secret() {
        let args = codex_args(&endpoints());
        assert_eq!(
            args,
            [
                "-c",
                "mcp_servers.files.url=\"http://127.0.0.1:4000/mcp/files\"",
                "-c",
                "mcp_servers.files.env_http_headers={\"x-transcript-mcp-secret\"=\"TRANSCRIPT_MCP_SECRET\"}",
                "-c",
                "mcp_servers.files.default_tools_approval_mode=\"approve\"",
                "-c",
                "mcp_servers.every-thing.url=\"http://127.0.0.1:4000/mcp/every-thing\"",
                "-c",
                "mcp_servers.every-thing.env_http_headers={\"x-transcript-mcp-secret\"=\"TRANSCRIPT_MCP_SECRET\"}",
                "-c",
                "mcp_servers.every-thing.default_tools_approval_mode=\"approve\"",
            ]
        );
        assert!(!args.concat().contains("s3cr3t"));
        // Each value is TOML Codex can read.
        for kv in args.iter().filter(|a| *a != "-c") {
            let doc: toml_edit::DocumentMut = kv.parse().unwrap();
            assert!(doc.get("mcp_servers").is_some(), "{kv}");
        }
    }

    #[test]
    fn gemini_settings_keep_what_is_there_and_add_trusted_http_servers() {
        let existing = json!({"security": {"auth": {"selectedType": "gemini-api-key"}}, "mcpServers": {"other": {"command": "x"}}});
        let merged = gemini_settings(existing, &endpoints()).unwrap();
        assert_eq!(merged["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(merged["mcpServers"]["other"]["command"], "x");
        assert_eq!(
            merged["mcpServers"]["files"],
            json!({"httpUrl": "http://127.0.0.1:4000/mcp/files", "headers": {"x-transcript-mcp-secret": "s3cr3t"}, "trust": true})
        );
        assert!(gemini_settings(json!([]), &endpoints()).is_err());
        assert!(gemini_settings(json!({"mcpServers": 1}), &endpoints()).is_err());
    }

    #[test]
    fn the_secret_is_not_printed_by_debug() {
        assert!(!format!("{:?}", endpoints()).contains("s3cr3t"));
        let dir = std::path::Path::new("/private");
        for cli in [Cli::Claude, Cli::Codex, Cli::Gemini] {
            let w = wiring(cli, &endpoints(), dir, UserConfig::default()).unwrap();
            assert!(!format!("{w:?}").contains("s3cr3t"));
        }
    }

    #[test]
    fn each_cli_gets_its_secret_in_a_file_or_the_environment_never_in_argv() {
        let dir = std::path::Path::new("/private");
        let claude = wiring(Cli::Claude, &endpoints(), dir, UserConfig::default()).unwrap();
        assert_eq!(claude.args, claude_args("/private/transcript-mcp.json"));
        assert_eq!(claude.files[0].0, dir.join("transcript-mcp.json"));
        assert_eq!(claude.files[0].1, claude_mcp_config(&endpoints()));
        let codex_user = UserConfig {
            codex_config: "model = \"m\"\n[mcp_servers.own]\ncommand = \"x\"\n".into(),
            ..UserConfig::default()
        };
        let codex = wiring(Cli::Codex, &endpoints(), dir, codex_user).unwrap();
        assert_eq!(codex.args, codex_args(&endpoints()));
        assert_eq!(
            codex.env,
            [
                (CODEX_SECRET_ENV.to_owned(), "s3cr3t".to_owned()),
                (CODEX_HOME_ENV.to_owned(), "/private/codex-home".to_owned())
            ]
        );
        assert_eq!(codex.files[0].0, dir.join("codex-home/config.toml"));
        assert_eq!(codex.files[0].1, "model = \"m\"\n");
        let user = json!({"security": {"auth": {"selectedType": "gemini-api-key"}}, "mcpServers": {"own": {"command": "x"}}, "mcp": {"serverCommand": "rogue"}});
        let gemini_user = UserConfig {
            gemini_settings: user,
            ..UserConfig::default()
        };
        let gemini = wiring(Cli::Gemini, &endpoints(), dir, gemini_user).unwrap();
        assert_eq!(gemini.args, gemini_args(&endpoints()));
        assert_eq!(
            gemini.env,
            [(
                GEMINI_HOME_ENV.to_owned(),
                "/private/gemini-home".to_owned()
            )]
        );
        assert_eq!(
            gemini.files[0].0,
            dir.join("gemini-home/.gemini/settings.json")
        );
        let settings: Value = serde_json::from_str(&gemini.files[0].1).unwrap();
        assert_eq!(
            settings["security"]["auth"]["selectedType"],
            "gemini-api-key"
        );
        assert!(settings["mcpServers"].get("own").is_none(), "{settings}");
        assert!(settings.get("mcp").is_none(), "{settings}");
        assert_eq!(
            settings["mcpServers"]["files"]["headers"]["x-transcript-mcp-secret"],
            "s3cr3t"
        );
        for w in [claude, codex, gemini] {
            assert!(!w.args.concat().contains("s3cr3t"));
        }
        assert_eq!(Cli::of("codex"), Some(Cli::Codex));
        assert_eq!(Cli::of("openai"), None);
    }

    #[test]
    fn codex_keeps_the_users_config_but_its_servers_and_project_layers() {
        let existing = "model = \"gpt\"\nmodel_provider = \"p\"\n\n[model_providers.p]\nbase_url = \"http://x\"\n\n[mcp_servers.rogue]\ncommand = \"r\"\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n\n[profiles.fast]\nmodel = \"m\"\n\n[profiles.fast.mcp_servers.r2]\ncommand = \"r\"\n";
        let kept = codex_config_without_servers(existing).unwrap();
        let doc: toml_edit::DocumentMut = kept.parse().unwrap();
        assert_eq!(doc["model"].as_str(), Some("gpt"));
        assert_eq!(
            doc["model_providers"]["p"]["base_url"].as_str(),
            Some("http://x")
        );
        assert_eq!(doc["profiles"]["fast"]["model"].as_str(), Some("m"));
        assert!(!kept.contains("mcp_servers"), "{kept}");
        assert!(!kept.contains("projects"), "{kept}");
        assert_eq!(codex_config_without_servers("").unwrap(), "");
        assert!(codex_config_without_servers("[unclosed").is_err());
    }

    #[test]
    fn gemini_allows_only_the_proxys_server_names_and_no_extension() {
        assert_eq!(
            gemini_args(&endpoints()),
            [
                "--allowed-mcp-server-names=files",
                "--allowed-mcp-server-names=every-thing",
                "--extensions=none"
            ]
        );
    }

    #[test]
    fn a_workspace_server_named_like_the_proxys_is_a_shadow() {
        let e = endpoints();
        assert!(gemini_workspace_shadows(&json!({}), &e).is_empty());
        assert!(gemini_workspace_shadows(&json!({"mcpServers": {"other": {}}}), &e).is_empty());
        assert_eq!(
            gemini_workspace_shadows(&json!({"mcpServers": {"files": {"command": "r"}}}), &e),
            ["files"]
        );
        let mut named_mcp = endpoints();
        named_mcp.endpoints[0].server = "mcp".into();
        assert_eq!(
            gemini_workspace_shadows(&json!({"mcp": {"serverCommand": "r"}}), &named_mcp),
            ["mcp"]
        );
        assert!(gemini_workspace_shadows(&json!([1]), &e).is_empty());
    }

    /// #40 follow-up: the wiring of the empty set lets each CLI reach no server at all.
    #[test]
    fn the_empty_set_is_wired_as_no_server_at_all() {
        let none = ProxyEndpoints {
            endpoints: Vec::new(),
            ..endpoints()
        };
        let dir = std::path::Path::new("/private");
        let claude = wiring(Cli::Claude, &none, dir, UserConfig::default()).unwrap();
        assert!(claude.args.contains(&"--strict-mcp-config".to_owned()));
        assert_eq!(claude.files[0].1, r#"{"mcpServers":{}}"#);
        let codex = wiring(
            Cli::Codex,
            &none,
            dir,
            UserConfig {
                codex_config: "model = \"m\"\n[mcp_servers.rogue]\ncommand = \"r\"\n".into(),
                ..UserConfig::default()
            },
        )
        .unwrap();
        assert!(codex.args.is_empty(), "{:?}", codex.args);
        assert_eq!(codex.files[0].1, "model = \"m\"\n");
        assert_eq!(
            gemini_args(&none),
            [
                "--allowed-mcp-server-names=transcript-no-mcp-server",
                "--extensions=none"
            ]
        );
        // A workspace server under the one allowed name would run: it is a shadow.
        let declared = json!({"mcpServers": {GEMINI_NO_SERVER: {"command": "r"}}});
        assert_eq!(
            gemini_workspace_shadows(&declared, &none),
            [GEMINI_NO_SERVER]
        );
        let settings = gemini_user_settings(json!({"mcpServers": {"rogue": {}}, "x": 1}), &none);
        assert_eq!(settings, json!({"mcpServers": {}, "x": 1}));
    }
}
