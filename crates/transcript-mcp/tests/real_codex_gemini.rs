//! Codex and Gemini CLI through the proxy, configured by the preset's merge functions
//! (`preset::codex_config_toml`, `preset::gemini_settings`), driven by the testkit's scripted
//! model server. Gemini CLI lists only the allowed MCP tool to its model, calls it through
//! the proxy, and the recording holds the proxy's router pair with the server's real output.
//! Codex 0.169 lists only the allowed tool, inside a Responses `namespace` tool
//! `mcp__<server>`, and calls it when the scripted server answers with a `function_call`
//! carrying that `namespace` and the bare tool name.
//! Skipped with a message when the CLI is not installed; a failure when
//! `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use transcript_mcp::{Allowlist, McpProxy, ProxyLimits, preset};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn};

/// The name `cli` gives its model for MCP tool `tool` of server `server`, as measured here
/// (Gemini CLI 0.61: `mcp_<server>_<tool>`; Codex 0.169: `<tool>` inside namespace
/// `mcp__<server>`).
fn model_tool_name(cli: AgentCli, server: &str, tool: &str) -> String {
    match cli {
        // The scripted server sends a qualified name inside its namespace (`mcp__<server>`),
        // as `tool` (testkit `responses.rs`).
        AgentCli::Codex => format!("mcp__{server}__{tool}"),
        _ => format!("mcp_{server}_{tool}"),
    }
}

async fn through_the_proxy(cli: AgentCli) {
    let Some(bin) = cli.require() else {
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
    let name = model_tool_name(cli, "fault", "echo");
    let script = Script::new([
        Turn::tool_call(name.clone(), json!({"text": "through the proxy"})),
        Turn::text("done"),
    ]);
    let server = ModelServer::start(script).unwrap();
    let sb = AgentSandbox::new().unwrap();
    let inv = sb
        .invocation(
            cli,
            &bin,
            &server,
            "Echo something.",
            &CliOptions::default(),
        )
        .unwrap();
    match cli {
        AgentCli::Codex => {
            let path = sb.config().join("config.toml");
            let existing = std::fs::read_to_string(&path).unwrap();
            let merged = preset::codex_config_toml(&existing, proxy.endpoints()).unwrap();
            std::fs::write(&path, merged).unwrap();
        }
        _ => {
            let path = sb.home().join(".gemini/settings.json");
            let existing: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let merged = preset::gemini_settings(existing, proxy.endpoints()).unwrap();
            std::fs::write(&path, merged.to_string()).unwrap();
        }
    }
    let output = tokio::task::spawn_blocking(move || inv.command(120).output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let first_tools = server
        .generation_requests()
        .first()
        .map(|r| r.tool_names())
        .unwrap_or_default();
    let why = format!(
        "exit {:?}\nmodel's tools: {first_tools:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    if cli == AgentCli::Codex {
        // One Responses `namespace` tool per server, `mcp__<server>`, holding its tools.
        let body: Value = serde_json::from_str(&server.generation_requests()[0].raw_body).unwrap();
        let namespace = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["name"] == "mcp__fault")
            .unwrap_or_else(|| panic!("{why}"));
        assert_eq!(namespace["type"], "namespace", "{why}");
        let inner: Vec<&str> = namespace["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(
            inner,
            ["echo"],
            "tools/list hides what the step does not allow\n{why}"
        );
    } else {
        assert!(first_tools.contains(&name), "{why}");
        assert!(
            !first_tools.iter().any(|t| t.contains("crash")),
            "tools/list hides what the step does not allow\n{why}"
        );
    }
    assert_eq!(read_log(&log), ["echo"], "{why}");
    let router = recorder.tools();
    assert_eq!(router.len(), 2, "{router:?}\n{why}");
    assert_eq!(router[0].1.name, "mcp__fault__echo");
    assert_eq!(
        router[1].1.output.to_value()["content"][0]["text"],
        "through the proxy",
        "{why}"
    );
    let results: Vec<String> = server
        .generation_requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("through the proxy")),
        "{results:?}\n{why}"
    );
    proxy.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_lists_only_the_allowed_mcp_tool_and_calls_it_through_the_proxy() {
    through_the_proxy(AgentCli::Codex).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_calls_an_mcp_tool_through_the_proxy() {
    through_the_proxy(AgentCli::Gemini).await;
}
