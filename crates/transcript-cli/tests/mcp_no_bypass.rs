//! #40 item 1 through the binary: a CLI preset step with `mcp_servers:` reaches MCP servers
//! only through the run's proxy, whatever the user's own configuration declares.
//!
//! For each real CLI (Claude Code, Codex, Gemini CLI, against the scripted model server), the
//! user's configuration declares more MCP servers, each a wrapper script that logs its start
//! before it runs our fault server (`examples/mcp_fault_server.rs`):
//!
//! - Claude Code: `$CLAUDE_CONFIG_DIR/.claude.json` and `~/.claude.json` (user servers), the
//!   workspace's `.mcp.json` (project servers, all approved by `enableAllProjectMcpServers`);
//! - Codex: `$CODEX_HOME/config.toml` `[mcp_servers.*]`, one of them named like the step's own
//!   server (so that merged `-c` keys would meet its `command`), and the workspace's
//!   `.codex/config.toml`;
//! - Gemini CLI: an extension under `~/.gemini/extensions/` (one of its servers named like the
//!   step's), `mcpServers` in `~/.gemini/settings.json`, and the workspace's
//!   `.gemini/settings.json` with another name (a workspace server named like the step's own
//!   is refused with its reason: `gemini_refuses_a_workspace_server_shadowing_the_proxys`).
//!
//! The scripted model asks for each of those servers' `echo` tool, then for the step's own
//! (allowed) one. Asserted: no wrapper ever started (its log is empty), no request the CLI
//! sent the model offered a tool of those servers, the transcript holds no successful call of
//! them (only the CLI's own refusals), and the step's own call went through the proxy
//! (`router` pair with the fault server's answer).
//!
//! A CLI that is not installed skips its test, unless `TRANSCRIPT_REQUIRE_AGENTS=1` or
//! `CI=true`, which make it a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

fn fault_server() -> PathBuf {
    common::mcp_fault_server()
}

/// The name `cli` gives its model for MCP tool `tool` of `server`.
fn model_name(cli: AgentCli, server: &str, tool: &str) -> String {
    match cli {
        AgentCli::Gemini => format!("mcp_{server}_{tool}"),
        _ => format!("mcp__{server}__{tool}"),
    }
}

/// A user's MCP server that must never start: a script that appends `started <name>` to
/// `log`, then runs the fault server.
struct Rogue {
    script: PathBuf,
    log: PathBuf,
}

impl Rogue {
    fn new(dir: &Path) -> Rogue {
        let script = dir.join("rogue-server.sh");
        let log = dir.join("rogue.log");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"started $1\" >> '{}'\nexec '{}'\n",
                log.display(),
                fault_server().display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Rogue { script, log }
    }

    /// A stdio server entry (Claude Code, Gemini CLI) whose start logs `name`.
    fn json(&self, name: &str) -> Value {
        json!({"command": self.script.display().to_string(), "args": [name]})
    }

    /// A Codex `[mcp_servers.<name>]` table.
    fn toml(&self, name: &str) -> String {
        format!(
            "[mcp_servers.{name}]\ncommand = {}\nargs = [{}]\n",
            json!(self.script.display().to_string()),
            json!(name)
        )
    }

    fn starts(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Writes the user's (and the workspace's) configuration declaring the rogue servers; returns
/// the names of the servers the model will ask for.
fn declare_rogues(cli: AgentCli, sb: &AgentSandbox, rogue: &Rogue) -> Vec<&'static str> {
    let (home, work, config) = (sb.home(), sb.work(), sb.config());
    match cli {
        AgentCli::Claude => {
            let user = json!({"mcpServers": {"rogue": rogue.json("claude-user")}}).to_string();
            write(&config.join(".claude.json"), &user);
            write(&home.join(".claude.json"), &user);
            write(
                &work.join(".mcp.json"),
                &json!({"mcpServers": {"rogueproject": rogue.json("claude-project")}}).to_string(),
            );
            write(
                &config.join("settings.json"),
                &json!({"enableAllProjectMcpServers": true}).to_string(),
            );
            vec!["rogue", "rogueproject"]
        }
        AgentCli::Codex => {
            let path = config.join("config.toml");
            let mut toml = std::fs::read_to_string(&path).unwrap();
            toml.push('\n');
            toml.push_str(&rogue.toml("rogue"));
            toml.push_str(&rogue.toml("proxied"));
            // A trusted project: Codex then reads the workspace's own `.codex/config.toml`.
            toml.push_str(&format!(
                "[projects.{}]\ntrust_level = \"trusted\"\n",
                json!(work.display().to_string())
            ));
            write(&path, &toml);
            write(
                &work.join(".codex/config.toml"),
                &rogue.toml("rogueproject"),
            );
            vec!["rogue", "rogueproject"]
        }
        AgentCli::Gemini => {
            let ext = json!({
                "name": "rogue-ext",
                "version": "1.0.0",
                "mcpServers": {"rogueext": rogue.json("gemini-extension"), "proxied": rogue.json("gemini-extension-shadow")},
            });
            write(
                &home.join(".gemini/extensions/rogue-ext/gemini-extension.json"),
                &ext.to_string(),
            );
            let path = home.join(".gemini/settings.json");
            let mut settings: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            settings["mcpServers"] = json!({"rogue": rogue.json("gemini-user")});
            write(&path, &settings.to_string());
            write(
                &work.join(".gemini/settings.json"),
                &json!({"mcpServers": {"roguews": rogue.json("gemini-workspace")}}).to_string(),
            );
            trust_workspace(sb);
            vec!["rogue", "rogueext", "roguews"]
        }
    }
}

/// The user trusts the workspace (Gemini CLI's `~/.gemini/trustedFolders.json`): Gemini CLI
/// then merges the workspace's `.gemini/settings.json` (with `--skip-trust` alone it reads its
/// settings before it trusts the folder, and skips them).
fn trust_workspace(sb: &AgentSandbox) {
    write(
        &sb.home().join(".gemini/trustedFolders.json"),
        &json!({ sb.work().display().to_string(): "TRUST_FOLDER" }).to_string(),
    );
}

/// One `transcript run` of a step whose own server is `proxied` (the fault server) with
/// `mcp__proxied__echo` allowed, the model asking for `asks` first.
struct Attempt {
    output: Output,
    events: Vec<Value>,
    server: ModelServer,
    workflow: String,
}

fn attempt(
    cli: AgentCli,
    sb: &AgentSandbox,
    bin: &Path,
    rogue: &Rogue,
    declare: fn(AgentCli, &AgentSandbox, &Rogue) -> Vec<&'static str>,
    step_env: &[(&str, String)],
) -> Attempt {
    attempt_with(cli, sb, bin, rogue, declare, step_env, true)
}

/// [`attempt`]; without `own`, the step has no `mcp_servers:` (and no `tools:`) and the model
/// asks only for the user's servers' tools (#40 follow-up).
fn attempt_with(
    cli: AgentCli,
    sb: &AgentSandbox,
    bin: &Path,
    rogue: &Rogue,
    declare: fn(AgentCli, &AgentSandbox, &Rogue) -> Vec<&'static str>,
    step_env: &[(&str, String)],
    own: bool,
) -> Attempt {
    // The sandbox's own files first (Codex's config.toml, Gemini CLI's settings.json), then the
    // user's servers added to them.
    let probe = ModelServer::start(Script::new([])).unwrap();
    sb.invocation(cli, bin, &probe, "unused", &CliOptions::default())
        .unwrap();
    let asks = declare(cli, sb, rogue);
    let mut turns: Vec<Turn> = asks
        .iter()
        .map(|s| {
            Turn::tool_call(model_name(cli, s, "echo"), json!({"text": "around"}))
                .with_usage(Usage::new(100, 10))
        })
        .collect();
    if own {
        turns.push(
            Turn::tool_call(
                model_name(cli, "proxied", "echo"),
                json!({"text": "through"}),
            )
            .with_usage(Usage::new(100, 10)),
        );
    }
    turns.push(Turn::text("Done.").with_usage(Usage::new(100, 5)));
    let server = ModelServer::start(Script::new(turns)).unwrap();
    // The same files again, now naming `server`: only the endpoint changes.
    let inv = sb
        .invocation(cli, bin, &server, "unused", &CliOptions::default())
        .unwrap();
    declare(cli, sb, rogue);
    let var = common::step_env_var(cli);
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let model = match cli {
        AgentCli::Claude => String::new(),
        AgentCli::Codex => "    model: gpt-5.5\n".to_owned(),
        AgentCli::Gemini => "    model: gemini-2.5-pro\n".to_owned(),
    };
    let (tools, servers) = if own {
        (
            "    tools: [mcp__proxied__echo]\n".to_owned(),
            format!(
                "    mcp_servers: [{{name: proxied, command: {}}}]\n",
                json!(fault_server().display().to_string())
            ),
        )
    } else {
        (String::new(), String::new())
    };
    let workflow = format!(
        "name: no-bypass-{name}\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    \
         type: agent\n    provider: {name}\n    timeout_ms: 120000\n    \
         prompt: Use the tools.\n{model}{tools}    env:\n      \
         {var}: \"{{{{inputs.endpoint}}}}\"\n{extra}{servers}",
        extra = step_env
            .iter()
            .map(|(k, v)| format!("      {k}: {}\n", json!(v)))
            .collect::<String>(),
        name = cli.executable(),
    );
    let (storage, run_id, output) = common::RealCliRun {
        workflow: &workflow,
        dir: &sb.tmp(),
        workspace: &sb.work(),
        env: &inv.env,
        step_var: var,
        bin: (cli.bin_var(), bin),
        endpoint: &endpoint,
    }
    .run();
    let text = std::fs::read_to_string(storage.path().join(format!("{run_id}.jsonl"))).unwrap();
    let events = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Attempt {
        output,
        events,
        server,
        workflow,
    }
}

impl Attempt {
    fn describe(&self) -> String {
        let offered: Vec<Vec<String>> = self
            .server
            .generation_requests()
            .iter()
            .map(|r| r.tool_names())
            .collect();
        format!(
            "{}\nexit {:?}\ntools offered per request: {offered:?}\nstderr:\n{}\ntranscript:\n{}",
            self.workflow,
            self.output.status.code(),
            common::text(&self.output.stderr),
            self.events
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    }

    fn payloads(&self, kind: &str, fidelity: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == kind && e["payload"]["fidelity"] == fidelity)
            .map(|e| &e["payload"])
            .collect()
    }
}

fn no_server_but_the_proxys(cli: AgentCli) {
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    let rogue_dir = tempfile::tempdir().unwrap();
    let rogue = Rogue::new(rogue_dir.path());
    let run = attempt(cli, &sb, &bin, &rogue, declare_rogues, &[]);
    let why = run.describe();

    // No server of the user's configuration ever started.
    assert_eq!(rogue.starts(), Vec::<String>::new(), "{why}");
    // The model was never offered one of their tools.
    let requests = run.server.generation_requests();
    assert!(!requests.is_empty(), "{why}");
    for r in &requests {
        for name in r.tool_names() {
            assert!(!name.contains("rogue"), "offered {name}\n{why}");
        }
    }
    assert!(
        !requests[0].raw_body.contains("rogue"),
        "the first request mentions a rogue server\n{why}"
    );
    // The transcript holds no call that ran around the proxy: every MCP call the CLI reports
    // as answered has the proxy's own observation, and the rogue ones were refused.
    let routed: Vec<&Value> = run.payloads("tool.call", "router");
    assert_eq!(routed.len(), 1, "{why}");
    assert_eq!(routed[0]["name"], "mcp__proxied__echo", "{why}");
    assert_eq!(routed[0]["input"], json!({"text": "through"}), "{why}");
    let routed_results = run.payloads("tool.result", "router");
    assert_eq!(routed_results.len(), 1, "{why}");
    assert!(routed_results[0]["error"].is_null(), "{why}");
    assert!(
        routed_results[0]["output"].to_string().contains("through"),
        "{why}"
    );
    for result in run.payloads("tool.result", "agent_emitted") {
        if result["name"].as_str().unwrap_or("").contains("rogue") {
            assert!(
                result["error"].is_string(),
                "a rogue call answered: {result}\n{why}"
            );
        }
    }
    // What the model got back for the rogue calls is a refusal, never the fault server's echo.
    let last = requests.last().unwrap().tool_results();
    assert!(
        last.iter().filter(|r| r.contains("around")).count() == 0,
        "{last:?}\n{why}"
    );
    assert!(
        last.iter().any(|r| r.contains("through")),
        "{last:?}\n{why}"
    );
}

#[test]
fn claude_code_reaches_no_mcp_server_but_the_proxys() {
    no_server_but_the_proxys(AgentCli::Claude);
}

#[test]
fn codex_reaches_no_mcp_server_but_the_proxys() {
    no_server_but_the_proxys(AgentCli::Codex);
}

#[test]
fn gemini_cli_reaches_no_mcp_server_but_the_proxys() {
    no_server_but_the_proxys(AgentCli::Gemini);
}

/// The workspace's `.gemini/settings.json` declares a server named like the step's own:
/// Gemini CLI would merge it over the proxy's under the allowed name, so the step is refused
/// with the reason before the CLI starts.
#[test]
fn gemini_refuses_a_workspace_server_shadowing_the_proxys() {
    let cli = AgentCli::Gemini;
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    let rogue_dir = tempfile::tempdir().unwrap();
    let rogue = Rogue::new(rogue_dir.path());
    fn shadow(_: AgentCli, sb: &AgentSandbox, rogue: &Rogue) -> Vec<&'static str> {
        write(
            &sb.work().join(".gemini/settings.json"),
            &json!({"mcpServers": {"proxied": rogue.json("gemini-workspace-shadow")}}).to_string(),
        );
        trust_workspace(sb);
        vec![]
    }
    let run = attempt(cli, &sb, &bin, &rogue, shadow, &[]);
    let why = run.describe();
    assert_eq!(rogue.starts(), Vec::<String>::new(), "{why}");
    assert_ne!(run.output.status.code(), Some(0), "{why}");
    let failed = run
        .events
        .iter()
        .find(|e| e["type"] == "step.completed" && e["path"] == "ask")
        .map(|e| e["payload"]["error"].to_string())
        .unwrap_or_default();
    assert!(
        failed.contains(".gemini/settings.json") && failed.contains("proxied"),
        "{failed}\n{why}"
    );
    assert!(run.server.generation_requests().is_empty(), "{why}");
}

/// A step's own `GEMINI_CLI_HOME` is honoured, not ignored: the user's Gemini home (auth
/// settings, an extension with a server) is only there, the runner's `HOME` has none. The CLI
/// authenticates from it (else it exits: no auth method) and its extension's server never
/// starts.
#[test]
fn gemini_honours_the_steps_own_gemini_cli_home() {
    let cli = AgentCli::Gemini;
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    let rogue_dir = tempfile::tempdir().unwrap();
    let rogue = Rogue::new(rogue_dir.path());
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = elsewhere.path().to_path_buf();
    fn move_home(cli: AgentCli, sb: &AgentSandbox, rogue: &Rogue) -> Vec<&'static str> {
        let asks = declare_rogues(cli, sb, rogue);
        let to = PathBuf::from(std::fs::read_to_string(sb.tmp().join("moved-to")).unwrap());
        let from = sb.home().join(".gemini");
        let _ = std::fs::remove_dir_all(to.join(".gemini"));
        std::fs::rename(&from, to.join(".gemini")).unwrap();
        asks
    }
    std::fs::write(sb.tmp().join("moved-to"), moved.display().to_string()).unwrap();
    let run = attempt(
        cli,
        &sb,
        &bin,
        &rogue,
        move_home,
        &[("GEMINI_CLI_HOME", moved.display().to_string())],
    );
    let why = run.describe();
    assert!(!sb.home().join(".gemini/settings.json").exists(), "{why}");
    assert_eq!(run.output.status.code(), Some(0), "{why}");
    assert_eq!(rogue.starts(), Vec::<String>::new(), "{why}");
    assert_eq!(run.payloads("tool.call", "router").len(), 1, "{why}");
}

/// #40 follow-up: a preset step WITHOUT `mcp_servers:` starts none of the user's own MCP
/// servers either (same configuration as above: user, project, extension and workspace
/// servers, the model asking for each one's tool). Asserted from the OS: no wrapper ever
/// started (its log stays empty); the model was never offered one of their tools; the step
/// still succeeds with the user's auth and settings.
fn no_server_without_mcp_servers(cli: AgentCli) {
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    let rogue_dir = tempfile::tempdir().unwrap();
    let rogue = Rogue::new(rogue_dir.path());
    let run = attempt_with(cli, &sb, &bin, &rogue, declare_rogues, &[], false);
    let why = run.describe();
    assert_eq!(rogue.starts(), Vec::<String>::new(), "{why}");
    let requests = run.server.generation_requests();
    assert!(!requests.is_empty(), "{why}");
    for r in &requests {
        for name in r.tool_names() {
            assert!(!name.contains("rogue"), "offered {name}\n{why}");
        }
    }
    assert_eq!(run.output.status.code(), Some(0), "{why}");
    for result in run.payloads("tool.result", "agent_emitted") {
        assert!(
            !result["output"].to_string().contains("around") || result["error"].is_string(),
            "a user's server answered: {result}\n{why}"
        );
    }
}

#[test]
fn claude_code_starts_no_users_mcp_server_without_mcp_servers() {
    no_server_without_mcp_servers(AgentCli::Claude);
}

#[test]
fn codex_starts_no_users_mcp_server_without_mcp_servers() {
    no_server_without_mcp_servers(AgentCli::Codex);
}

#[test]
fn gemini_cli_starts_no_users_mcp_server_without_mcp_servers() {
    no_server_without_mcp_servers(AgentCli::Gemini);
}
