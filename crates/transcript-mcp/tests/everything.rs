//! The proxy in front of a real MCP server from the npm registry,
//! `@modelcontextprotocol/server-everything` (installed by `.ci/install-agent-clis`), over
//! stdio and over streamable HTTP. Skipped with a message when it is not installed; a failure
//! when `TRANSCRIPT_REQUIRE_AGENTS=1` (CI) asks for it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use transcript_mcp::{Allowlist, McpProxy, McpServer, ProxyLimits, Upstream};

const BIN: &str = "mcp-server-everything";

/// The server's bin, from `PATH` or the install script's default directory.
fn everything() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cache/transcript-agent-clis/node_modules/.bin"));
    }
    if let Some(dir) = std::env::var_os("TRANSCRIPT_AGENT_CLIS_DIR") {
        dirs.insert(0, PathBuf::from(dir).join("node_modules/.bin"));
    }
    let found = dirs.into_iter().map(|d| d.join(BIN)).find(|p| p.is_file());
    if found.is_none() {
        let required = std::env::var("TRANSCRIPT_REQUIRE_AGENTS").is_ok_and(|v| v == "1")
            || std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !required,
            "{BIN} is not installed: run `bash .ci/install-agent-clis` (TRANSCRIPT_REQUIRE_AGENTS=1 or CI=true)"
        );
        eprintln!("skipped: {BIN} is not installed (run `bash .ci/install-agent-clis`)");
    }
    found
}

async fn exercise(server: McpServer) {
    let recorder = Arc::new(MemRecorder::default());
    let proxy = McpProxy::start(
        &[server],
        Allowlist::from_step_tools(["mcp__everything__echo"]),
        target(recorder.clone()),
        ProxyLimits::default(),
        CancellationToken::new(),
    )
    .await
    .expect("proxy starts in front of server-everything");
    let client = connect(proxy.endpoints(), "everything").await;
    let tools: Vec<String> = client
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    assert_eq!(
        tools,
        ["echo"],
        "the real server has more tools; only echo is shown"
    );

    let ok = call(&client, "echo", json!({"message": "hello proxy"})).await;
    assert_eq!(
        text_of(&ok),
        "Echo: hello proxy",
        "the real server's own output"
    );
    let refused = call(&client, "get-sum", json!({"a": 1, "b": 2})).await;
    assert_eq!(refused.is_error, Some(true));

    let events = recorder.tools();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[0].1.name, "mcp__everything__echo");
    assert_eq!(
        events[0].1.input.to_value(),
        json!({"message": "hello proxy"})
    );
    assert_eq!(
        events[1].1.output.to_value()["content"],
        json!([{"type": "text", "text": "Echo: hello proxy"}])
    );
    assert_eq!(events[2].1.name, "mcp__everything__get-sum");
    assert!(
        events[3]
            .1
            .error
            .as_deref()
            .unwrap()
            .contains("not on the step's tools")
    );
    let groups = proxy.process_groups();
    client.cancel().await.ok();
    proxy.shutdown().await.unwrap();
    for g in groups {
        assert!(
            group_members(g).is_empty(),
            "server-everything's group {g} survived"
        );
    }
}

#[tokio::test]
async fn server_everything_over_stdio_through_the_proxy() {
    let Some(bin) = everything() else { return };
    exercise(McpServer {
        name: "everything".into(),
        upstream: Upstream::Stdio {
            command: bin.to_string_lossy().into_owned(),
            args: vec!["stdio".into()],
            env: Default::default(),
        },
    })
    .await;
}

#[tokio::test]
async fn server_everything_over_streamable_http_through_the_proxy() {
    let Some(bin) = everything() else { return };
    // The HTTP server is a process the test starts (in its own group, killed at the end).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(&bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Ready once it says it listens (stderr), not after a sleep.
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("server-everything starts")
            .unwrap()
            .expect("server-everything exited before listening");
        if line.contains("listening on port") {
            break;
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    exercise(McpServer {
        name: "everything".into(),
        upstream: Upstream::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: Default::default(),
        },
    })
    .await;
    let pid = child.id().unwrap();
    let _ = rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    );
    let _ = child.wait().await;
}
