//! A real agent CLI through the proxy: Claude Code, driven by the testkit's scripted model
//! server, calls an MCP tool of the testkit's fault server through the proxy. The recording
//! holds both observations of the call (the proxy's `router` pair and Claude's own report,
//! `agent_emitted`), which [`transcript_mcp::correlate`] pairs as one call; a tool the step
//! does not allow was never listed to Claude, so its call never reaches the server.
//! Skipped with a message when Claude Code is not installed; a failure when
//! `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventDraft, Fidelity, Payload, RawJson, ToolPayload};
use transcript_mcp::correlate::pair_observations;
use transcript_mcp::{Allowlist, McpProxy, ProxyLimits, preset};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn};

const FINAL: &str = "The echo came back.";

/// Claude's own reports of tool calls and results in its stream-json output, recorded as
/// `agent_emitted` events the way the exec agent step records them (tool_use -> tool.call,
/// tool_result -> tool.result, under Claude's tool id).
fn agent_emitted(stdout: &str) -> Vec<Payload> {
    let mut names = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        for block in v["message"]["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => {
                    let id = block["id"].as_str().unwrap().to_owned();
                    let name = block["name"].as_str().unwrap().to_owned();
                    names.insert(id.clone(), name.clone());
                    out.push(Payload::ToolCall(ToolPayload::call(
                        name,
                        id,
                        RawJson::from_value(&block["input"]).unwrap(),
                        Fidelity::AgentEmitted,
                    )));
                }
                Some("tool_result") => {
                    let id = block["tool_use_id"].as_str().unwrap().to_owned();
                    let error = (block["is_error"] == true).then(|| "tool error".to_owned());
                    out.push(Payload::ToolResult(ToolPayload::result(
                        names.get(&id).cloned().unwrap_or_default(),
                        id,
                        RawJson::from_value(&block["content"]).unwrap(),
                        error,
                        Fidelity::AgentEmitted,
                    )));
                }
                _ => {}
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_calls_an_mcp_tool_through_the_proxy_and_both_observations_pair() {
    let Some(bin) = AgentCli::Claude.require() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let recorder = Arc::new(MemRecorder::default());
    let proxy = McpProxy::start(
        &[fault_server(
            "fault",
            &[(
                transcript_testkit::mcp_server::LOG_ENV,
                &log.to_string_lossy(),
            )],
        )],
        Allowlist::from_step_tools(["mcp__fault__echo"]),
        target(recorder.clone()),
        ProxyLimits::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap();

    // The model asks for the allowed tool, then for a forbidden one, then answers.
    let script = Script::new([
        Turn::tool_call("mcp__fault__echo", json!({"text": "through the proxy"})),
        Turn::tool_call("mcp__fault__crash", json!({})),
        Turn::text(FINAL),
    ]);
    let server = ModelServer::start(script).unwrap();
    let sb = AgentSandbox::new().unwrap();
    let mut inv = sb
        .invocation(
            AgentCli::Claude,
            &bin,
            &server,
            "Echo something.",
            &CliOptions::default(),
        )
        .unwrap();
    // The preset's file, mode 0o600, in the CLI's private config dir; the step's MCP tool
    // pre-approved (headless Claude Code denies tools it would ask about).
    let config_file = sb.config().join("transcript-mcp.json");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&config_file)
            .unwrap();
        f.write_all(preset::claude_mcp_config(proxy.endpoints()).as_bytes())
            .unwrap();
    }
    let allowed = inv.args.iter().position(|a| a == "Read,Bash").unwrap();
    inv.args[allowed] = "mcp__fault__echo".into();
    let prompt_at = inv.args.iter().position(|a| a == "-p").unwrap();
    let extra = preset::claude_args(&config_file.to_string_lossy());
    inv.args.splice(prompt_at..prompt_at, extra);

    let output = tokio::task::spawn_blocking(move || inv.command(120).output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let why = format!(
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{why}");

    // The forbidden tool was never listed to Claude: it refused the call itself, and the
    // call never reached the proxy or the server.
    assert!(
        stdout.contains("No such tool available: mcp__fault__crash"),
        "{why}"
    );
    // What reached the server (its own log): the allowed call only.
    assert_eq!(read_log(&log), ["echo"], "{why}");
    // What Claude's model got back: the server's real output for the allowed call.
    let results: Vec<String> = server
        .generation_requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("through the proxy")),
        "{results:?}\n{why}"
    );
    // The proxy's observation: one router pair with the server's output.
    let router = recorder.tools();
    assert_eq!(router.len(), 2, "{router:?}\n{why}");
    assert_eq!(router[0].1.name, "mcp__fault__echo");
    assert_eq!(
        router[0].1.input.to_value(),
        json!({"text": "through the proxy"})
    );
    assert_eq!(
        router[1].1.output.to_value()["content"][0]["text"],
        "through the proxy"
    );

    // Claude's own observation, recorded beside it as the exec step does.
    for payload in agent_emitted(&stdout) {
        recorder
            .record(EventDraft::new("agent", 0, payload))
            .await
            .unwrap();
    }
    let pairs = pair_observations(&recorder.events());
    assert_eq!(pairs.len(), 1, "{pairs:?}\n{why}");
    assert!(
        pairs[0]
            .agent_call_id
            .as_deref()
            .is_some_and(|id| id.starts_with("toolu_")),
        "{pairs:?}"
    );
    assert_eq!(pairs[0].disagreement, None, "{pairs:?}\n{why}");
    proxy.shutdown().await.unwrap();
}

use transcript_domain::Recorder as _;
