//! #33 through the binary: `transcript run` of a workflow whose CLI preset step has
//! `mcp_servers:`, for each real CLI (Claude Code, Codex, Gemini CLI) against the scripted model
//! server, with `@modelcontextprotocol/server-everything` (npm) and our fault server
//! (`examples/mcp_fault_server.rs`) behind the run's MCP proxy. The model asks for an allowed
//! tool and a forbidden one. The transcript holds both observations of the allowed call (the
//! proxy's `router` pair with the server's real output, the CLI's `agent_emitted` report), the
//! refusal of the forbidden one (which never reached its server), and the receipts equal the
//! scripted server's bill. Failure paths: an upstream crash mid-call, an upstream hanging past
//! the step's timeout (nothing survives: checked in /proc), an oversized result capped.
//!
//! A CLI (or server-everything) that is not installed skips its test with a message, unless
//! `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`, which make it a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use tempfile::TempDir;
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions, agents_required};
use transcript_testkit::model_server::{ModelServer, Provider, Script, Turn, Usage};

const CODEX_MODEL: &str = "gpt-5.5";

fn fault_server() -> PathBuf {
    common::mcp_fault_server()
}

/// `mcp-server-everything` (installed by `.ci/install-agent-clis`), or `None` (skip).
fn everything() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cache/transcript-agent-clis/node_modules/.bin"));
    }
    let found = dirs
        .into_iter()
        .map(|d| d.join("mcp-server-everything"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            !agents_required(),
            "mcp-server-everything is not installed: run `bash .ci/install-agent-clis`"
        );
        eprintln!("skipped: mcp-server-everything is not installed");
    }
    found
}

/// The name `cli` gives its model for MCP tool `tool` of `server` (the scripted server sends
/// Codex's namespaced call for the qualified name).
fn model_name(cli: AgentCli, server: &str, tool: &str) -> String {
    match cli {
        AgentCli::Gemini => format!("mcp_{server}_{tool}"),
        _ => format!("mcp__{server}__{tool}"),
    }
}

/// One `transcript run` of an MCP workflow in a sandbox.
struct Run {
    storage: TempDir,
    sb: AgentSandbox,
    output: Output,
    events: Vec<Value>,
    run_id: String,
    workflow: String,
}

impl Run {
    /// `tools` and `servers` are YAML flow values; `timeout_ms` the step's.
    fn start(
        cli: AgentCli,
        server: &ModelServer,
        tools: &str,
        servers: &str,
        timeout_ms: u64,
    ) -> Option<Run> {
        let bin = cli.require()?;
        let sb = AgentSandbox::new().unwrap();
        let inv = sb
            .invocation(cli, &bin, server, "unused", &CliOptions::default())
            .unwrap();
        let var = common::step_env_var(cli);
        let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
        let model = match cli {
            AgentCli::Claude => String::new(),
            AgentCli::Codex => format!("    model: {CODEX_MODEL}\n"),
            AgentCli::Gemini => format!(
                "    model: {}\n",
                CliOptions::default_model(cli).unwrap_or("gemini-2.5-pro")
            ),
        };
        let workflow = format!(
            "name: mcp-{name}\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    \
             type: agent\n    provider: {name}\n    timeout_ms: {timeout_ms}\n    \
             prompt: Use the tools.\n{model}    tools: {tools}\n    env:\n      \
             {var}: \"{{{{inputs.endpoint}}}}\"\n    mcp_servers: {servers}\n",
            name = cli.executable(),
        );
        let (storage, run_id, output) = common::RealCliRun {
            workflow: &workflow,
            dir: &sb.tmp(),
            workspace: &sb.work(),
            env: &inv.env,
            step_var: var,
            bin: (cli.bin_var(), &bin),
            endpoint: &endpoint,
        }
        .run();
        let text = std::fs::read_to_string(storage.path().join(format!("{run_id}.jsonl"))).unwrap();
        let events = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        Some(Run {
            storage,
            sb,
            output,
            events,
            run_id,
            workflow,
        })
    }

    fn describe(&self, server: &ModelServer) -> String {
        let bodies: Vec<String> = server
            .generation_requests()
            .iter()
            .map(|r| r.tool_results().join(" | "))
            .collect();
        format!(
            "{}\nexit {:?}\ntool results sent to the model: {bodies:?}\nstderr:\n{}\ntranscript:\n{}",
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

    fn tools(&self, kind: &str, fidelity: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == kind && e["payload"]["fidelity"] == fidelity)
            .map(|e| &e["payload"])
            .collect()
    }

    fn step_completed(&self) -> &Value {
        self.events
            .iter()
            .find(|e| e["type"] == "step.completed" && e["path"] == "ask")
            .expect("step.completed of the agent step")
    }

    fn transcript(&self, args: &[&str]) -> Output {
        common::bin()
            .arg("--storage")
            .arg(self.storage.path())
            .args(args)
            .output()
            .unwrap()
    }
}

fn read_log(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with("child "))
        .map(str::to_owned)
        .collect()
}

/// The server's bill in receipt terms (decision 10).
fn expected_usage(provider: Provider, billed: Usage) -> Value {
    let mut u = serde_json::Map::new();
    let mut set = |k: &str, v: u64| {
        if v > 0 {
            u.insert(k.to_owned(), json!(v));
        }
    };
    set("input_tokens", billed.input_tokens);
    set("output_tokens", billed.output_tokens);
    set("cache_read_tokens", billed.cache_read_input_tokens);
    set("cache_write_tokens", billed.cache_creation_input_tokens);
    if provider != Provider::Anthropic {
        set("reasoning_tokens", billed.reasoning_tokens);
    }
    Value::Object(u)
}

fn tokens(usage: &Value) -> Value {
    let mut u = usage.as_object().cloned().unwrap_or_default();
    u.remove("cost_usd");
    u.retain(|_, v| v != &json!(0));
    Value::Object(u)
}

/// The allowed call (server-everything's echo) and the forbidden one (the fault server's
/// crash, not on the step's list), through the binary.
fn allowed_and_forbidden(cli: AgentCli) {
    let Some(everything) = everything() else {
        return;
    };
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("calls.log");
    let script = Script::new([
        Turn::tool_call(
            model_name(cli, "everything", "echo"),
            json!({"message": "hello proxy"}),
        )
        .with_usage(Usage::new(120, 15)),
        Turn::tool_call(model_name(cli, "fault", "crash"), json!({}))
            .with_usage(Usage::new(140, 9)),
        Turn::text("All done.").with_usage(Usage::new(160, 5)),
    ]);
    let server = ModelServer::start(script.clone()).unwrap();
    let servers = format!(
        "[{{name: everything, command: {}}}, {{name: fault, command: {}, env: {{TRANSCRIPT_MCP_FAULT_LOG: {}}}}}]",
        json!(everything.display().to_string()),
        json!(fault_server().display().to_string()),
        json!(log.display().to_string()),
    );
    let Some(run) = Run::start(
        cli,
        &server,
        "[mcp__everything__echo, mcp__fault__echo]",
        &servers,
        120_000,
    ) else {
        return;
    };
    let why = run.describe(&server);
    assert_eq!(run.output.status.code(), Some(0), "{why}");
    assert!(run.step_completed()["payload"]["error"].is_null(), "{why}");

    // The proxy's observation: the allowed call, with the server's real output.
    let calls = run.tools("tool.call", "router");
    let results = run.tools("tool.result", "router");
    assert_eq!(calls.len(), 1, "{why}");
    assert_eq!(calls[0]["name"], "mcp__everything__echo");
    assert_eq!(calls[0]["input"], json!({"message": "hello proxy"}));
    assert_eq!(results.len(), 1, "{why}");
    assert_eq!(results[0]["call_id"], calls[0]["call_id"]);
    assert_eq!(
        results[0]["output"]["content"],
        json!([{"type": "text", "text": "Echo: hello proxy"}]),
        "{why}"
    );
    assert!(
        calls[0]["call_id"]
            .as_str()
            .unwrap()
            .starts_with("ask#0/mcp-"),
        "{why}"
    );
    // The CLI's own observation of the same call, its output the server's.
    let agent_calls = run.tools("tool.call", "agent_emitted");
    let echo = agent_calls
        .iter()
        .find(|c| c["input"] == json!({"message": "hello proxy"}))
        .unwrap_or_else(|| panic!("the CLI's report of the allowed call\n{why}"));
    let agent_results = run.tools("tool.result", "agent_emitted");
    let echoed = agent_results
        .iter()
        .find(|r| r["call_id"] == echo["call_id"])
        .unwrap_or_else(|| panic!("the CLI's report of the allowed result\n{why}"));
    assert!(
        echoed["output"].to_string().contains("Echo: hello proxy"),
        "{why}"
    );

    // The forbidden tool was never listed to the CLI (tools/list hides it), so the CLI refused
    // the call itself: it never reached its server, and the model got the refusal.
    assert!(read_log(&log).is_empty(), "{:?}\n{why}", read_log(&log));
    let requests = server.generation_requests();
    let sent = requests.last().unwrap().tool_results();
    assert_eq!(sent.len(), 2, "{sent:?}\n{why}");
    assert!(sent[0].contains("Echo: hello proxy"), "{sent:?}\n{why}");
    assert!(
        sent[1].contains("crash") && !sent[1].contains("Echo"),
        "{sent:?}\n{why}"
    );
    // Claude Code and Gemini CLI report the refused call and its error; Codex 0.169 answers
    // its model "unsupported call" without reporting the call in its --json output.
    if cli != AgentCli::Codex {
        let refusal = agent_results
            .iter()
            .find(|r| r["call_id"] != echo["call_id"])
            .unwrap_or_else(|| panic!("the refusal of the forbidden call\n{why}"));
        assert!(refusal["error"].is_string(), "{refusal}\n{why}");
        assert!(refusal["name"].as_str().unwrap().contains("crash"), "{why}");
    }

    // The two observations agree: neither stats nor show reports a disagreement.
    let out = run.transcript(&["stats", "--json", &run.run_id]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["mcp_disagreements"], json!([]), "{why}");
    let out = run.transcript(&["show", &run.run_id]);
    assert!(!common::text(&out.stdout).contains("disagree"), "{why}");

    // Receipts equal the scripted server's bill.
    let provider = cli.provider();
    assert_eq!(server.billed(provider), script.total_usage(), "{why}");
    let out = run.transcript(&["receipts", &run.run_id, "--json"]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = expected_usage(provider, server.billed(provider));
    assert_eq!(tokens(&r["total"]), want, "{r}\n{why}");
    assert_eq!(tokens(&r["receipts"][0]["usage"]), want, "{r}\n{why}");
    let _ = &run.sb;
}

#[test]
fn claude_code_calls_an_allowed_mcp_tool_through_the_binarys_proxy() {
    allowed_and_forbidden(AgentCli::Claude);
}

#[test]
fn codex_calls_an_allowed_mcp_tool_through_the_binarys_proxy() {
    allowed_and_forbidden(AgentCli::Codex);
}

#[test]
fn gemini_cli_calls_an_allowed_mcp_tool_through_the_binarys_proxy() {
    allowed_and_forbidden(AgentCli::Gemini);
}

/// Processes whose command line or environment mentions `needle` (this user's, from /proc).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == std::process::id().to_string() {
            continue;
        }
        for file in ["cmdline", "environ"] {
            let bytes = std::fs::read(entry.path().join(file)).unwrap_or_default();
            if String::from_utf8_lossy(&bytes).contains(needle) {
                found.push(format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&bytes).replace('\0', " ")
                ));
                break;
            }
        }
    }
    found
}

/// One Codex run (the fastest CLI) whose model calls the fault server's `tool` with `args`;
/// the step lists that tool and has `timeout_ms`.
fn codex_fault(tool: &str, args: Value, timeout_ms: u64) -> Option<(Run, ModelServer, String)> {
    let token = format!("fault-{tool}-{}", std::process::id());
    let script = Script::new([
        Turn::tool_call(format!("mcp__fault__{tool}"), args).with_usage(Usage::new(100, 10)),
        Turn::text("Done.").with_usage(Usage::new(110, 5)),
    ]);
    let server = ModelServer::start(script).unwrap();
    // The token (an argument the server ignores) finds its processes in /proc.
    let servers = format!(
        "[{{name: fault, command: {}, args: [{token}], env: {{TRANSCRIPT_MCP_FAULT_CHILD: \"1\"}}}}]",
        json!(fault_server().display().to_string()),
    );
    let run = Run::start(
        AgentCli::Codex,
        &server,
        &format!("[mcp__fault__{tool}]"),
        &servers,
        timeout_ms,
    )?;
    Some((run, server, token))
}

#[test]
fn an_upstream_crash_mid_call_is_an_error_result_at_once_and_nothing_survives() {
    let Some((run, server, token)) = codex_fault("crash", json!({}), 15_000) else {
        return;
    };
    let why = run.describe(&server);
    let results = run.tools("tool.result", "router");
    assert_eq!(results.len(), 1, "{why}");
    assert_eq!(results[0]["name"], "mcp__fault__crash");
    // At once, not at the step's timeout: the server's exit ends the call even though the
    // child it started still holds its stdout open.
    let error = results[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("MCP server \"fault\""), "{error}\n{why}");
    assert!(!error.contains("cancelled"), "{error}\n{why}");
    assert!(run.step_completed()["payload"]["error"].is_null(), "{why}");
    assert_eq!(processes_mentioning(&token), Vec::<String>::new(), "{why}");
}

#[test]
fn an_upstream_hanging_past_the_step_timeout_fails_the_step_and_nothing_survives() {
    let Some((run, server, token)) = codex_fault("hang", json!({}), 6_000) else {
        return;
    };
    let why = run.describe(&server);
    assert_ne!(run.output.status.code(), Some(0), "{why}");
    let error = run.step_completed()["payload"]["error"].to_string();
    assert!(error.contains("timed out after 6000ms"), "{error}\n{why}");
    // The proxy's observation of the call ends too (the call was cut, never left open).
    let calls = run.tools("tool.call", "router");
    assert_eq!(calls.len(), 1, "{why}");
    // No process of the run survives: the server (and the child it started) and the CLI.
    assert_eq!(processes_mentioning(&token), Vec::<String>::new(), "{why}");
    let sandbox = run.sb.config().display().to_string();
    assert_eq!(
        processes_mentioning(&sandbox),
        Vec::<String>::new(),
        "{why}"
    );
}

#[test]
fn an_oversized_result_is_capped_at_the_proxy_and_recorded_as_such() {
    let Some((run, server, _)) = codex_fault("big", json!({"bytes": 3_000_000}), 120_000) else {
        return;
    };
    let why = run.describe(&server);
    let results = run.tools("tool.result", "router");
    assert_eq!(results.len(), 1, "{why}");
    let error = results[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("exceeds the proxy's 1048576-byte cap"),
        "{error}\n{why}"
    );
    // What the model got is the refusal, not three megabytes.
    let sent = server.generation_requests().last().unwrap().tool_results();
    assert!(sent.iter().all(|r| r.len() < 10_000), "{why}");
    assert!(run.events.iter().all(|e| e.to_string().len() < 1_100_000));
}
