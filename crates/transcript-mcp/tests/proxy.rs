//! The proxy against the testkit's fault server, a real child process: what reaches the
//! server (its own log), what the agent gets back, what is recorded, and what survives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::Fidelity;
use transcript_mcp::{Allowlist, McpProxy, ProxyError, ProxyLimits};

struct Setup {
    proxy: McpProxy,
    recorder: Arc<MemRecorder>,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
    cancel: CancellationToken,
}

async fn start(tools: &[&str], limits: ProxyLimits, extra_env: &[(&str, &str)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let log_text = log.to_string_lossy().into_owned();
    let mut env = vec![(transcript_testkit::mcp_server::LOG_ENV, log_text.as_str())];
    env.extend_from_slice(extra_env);
    let recorder = Arc::new(MemRecorder::default());
    let cancel = CancellationToken::new();
    let proxy = McpProxy::start(
        &[fault_server("fault", &env)],
        Allowlist::from_step_tools(tools.iter().copied()),
        target(recorder.clone()),
        limits,
        cancel.clone(),
    )
    .await
    .expect("proxy starts");
    Setup {
        proxy,
        recorder,
        log,
        _dir: dir,
        cancel,
    }
}

fn calls_received(s: &Setup) -> Vec<String> {
    read_log(&s.log)
        .into_iter()
        .filter(|l| !l.starts_with("child "))
        .collect()
}

/// (type, name, call_id, input, output, error) of one recorded tool event.
type Recorded = (&'static str, String, String, Value, Value, Option<String>);

/// Every recorded tool event; all at router fidelity.
fn recorded(s: &Setup) -> Vec<Recorded> {
    s.recorder
        .tools()
        .into_iter()
        .map(|(ty, p)| {
            assert_eq!(p.fidelity, Fidelity::Router, "{p:?}");
            (
                ty,
                p.name,
                p.call_id,
                p.input.to_value(),
                p.output.to_value(),
                p.error,
            )
        })
        .collect()
}

#[tokio::test]
async fn an_allowed_call_is_forwarded_and_recorded_with_the_servers_exact_output() {
    let s = start(&["Read", "mcp__fault__echo"], ProxyLimits::default(), &[]).await;
    let client = connect(s.proxy.endpoints(), "fault").await;

    let listed: Vec<String> = client
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    assert_eq!(
        listed,
        ["echo"],
        "tools/list shows only what the step allows"
    );

    let result = call(&client, "echo", json!({"text": "héllo \"world\"\n"})).await;
    assert_eq!(text_of(&result), "héllo \"world\"\n");
    assert_ne!(result.is_error, Some(true));

    let events = recorded(&s);
    assert_eq!(events.len(), 2, "{events:?}");
    let (ty, name, id, input, output, error) = &events[0];
    assert_eq!(
        (*ty, name.as_str(), id.as_str()),
        ("tool.call", "mcp__fault__echo", "agent#0/mcp-1")
    );
    assert_eq!(input, &json!({"text": "héllo \"world\"\n"}));
    assert_eq!(output, &Value::Null);
    assert_eq!(error, &None);
    let (ty, name, id2, input, output, error) = &events[1];
    assert_eq!(
        (*ty, name.as_str(), id2),
        ("tool.result", "mcp__fault__echo", id)
    );
    assert_eq!(input, &Value::Null);
    assert_eq!(
        output,
        &json!({"content": [{"type": "text", "text": "héllo \"world\"\n"}], "structuredContent": {"echo": "héllo \"world\"\n"}, "isError": false})
    );
    assert_eq!(error, &None);
    assert_eq!(calls_received(&s), ["echo"]);
    client.cancel().await.ok();
    s.proxy.shutdown().await.expect("nothing lost");
}

#[tokio::test]
async fn a_forbidden_call_is_refused_recorded_and_never_reaches_the_server() {
    let s = start(&["mcp__fault__echo"], ProxyLimits::default(), &[]).await;
    let client = connect(s.proxy.endpoints(), "fault").await;

    // `crash` would end the server: that it still answers proves the call never got there.
    let refused = call(&client, "crash", json!({})).await;
    assert_eq!(refused.is_error, Some(true));
    let text = text_of(&refused);
    assert!(
        text.contains("mcp__fault__crash is not on the step's tools: list"),
        "{text}"
    );
    assert!(
        text.contains("mcp__fault__echo"),
        "names what is allowed: {text}"
    );
    let also_refused = call(&client, "no_such_tool", json!({"x": 1})).await;
    assert_eq!(also_refused.is_error, Some(true));

    let ok = call(&client, "echo", json!({"text": "still here"})).await;
    assert_eq!(text_of(&ok), "still here");
    assert_eq!(
        calls_received(&s),
        ["echo"],
        "only the allowed call reached the server"
    );

    let events = recorded(&s);
    assert_eq!(events.len(), 6, "{events:?}");
    assert_eq!(events[0].0, "tool.call");
    assert_eq!(events[0].1, "mcp__fault__crash");
    assert_eq!(events[1].0, "tool.result");
    assert_eq!(events[1].2, events[0].2);
    assert!(
        events[1]
            .5
            .as_deref()
            .unwrap()
            .contains("not on the step's tools")
    );
    assert_eq!(events[2].1, "mcp__fault__no_such_tool");
    assert_eq!(
        events[2].3,
        json!({"x": 1}),
        "the refused call's input is recorded"
    );
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_empty_allowlist_shows_and_allows_no_mcp_tool() {
    let s = start(&["Read", "Bash"], ProxyLimits::default(), &[]).await;
    let client = connect(s.proxy.endpoints(), "fault").await;
    assert!(client.peer().list_all_tools().await.unwrap().is_empty());
    let r = call(&client, "echo", json!({"text": "x"})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text_of(&r).contains("allowed MCP tools: none"),
        "{}",
        text_of(&r)
    );
    assert!(calls_received(&s).is_empty());
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_crash_mid_call_is_an_error_result_and_recorded() {
    let s = start(&["mcp__fault"], ProxyLimits::default(), &[]).await;
    let client = connect(s.proxy.endpoints(), "fault").await;
    let r = call(&client, "crash", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text_of(&r).contains("MCP server \"fault\""),
        "{}",
        text_of(&r)
    );
    // The server is gone: the next call fails too, recorded, without hanging.
    let next = call(&client, "echo", json!({"text": "x"})).await;
    assert_eq!(next.is_error, Some(true));
    let events = recorded(&s);
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(events[1].5.is_some() && events[3].5.is_some(), "{events:?}");
    assert_eq!(events[1].4, Value::Null);
    assert_eq!(calls_received(&s), ["crash"]);
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_hanging_server_is_answered_with_an_error_at_the_deadline() {
    let limits = ProxyLimits {
        call_deadline: Duration::from_millis(300),
        ..ProxyLimits::default()
    };
    let s = start(&["mcp__fault"], limits, &[]).await;
    let groups = s.proxy.process_groups();
    let client = connect(s.proxy.endpoints(), "fault").await;
    let r = call(&client, "hang", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text_of(&r).contains("gave no answer within 300ms"),
        "{}",
        text_of(&r)
    );
    let events = recorded(&s);
    assert_eq!(events.len(), 2);
    assert!(events[1].5.as_deref().unwrap().contains("no answer within"));
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
    for g in groups {
        assert!(
            group_members(g).is_empty(),
            "the hung server's group {g} survived"
        );
    }
}

#[tokio::test]
async fn an_oversized_result_is_refused_with_its_size_and_recorded() {
    let limits = ProxyLimits {
        max_result_bytes: 1000,
        ..ProxyLimits::default()
    };
    let s = start(&["mcp__fault"], limits, &[]).await;
    let client = connect(s.proxy.endpoints(), "fault").await;
    let small = call(&client, "big", json!({"bytes": 100})).await;
    assert_eq!(text_of(&small).len(), 100);
    let r = call(&client, "big", json!({"bytes": 5000})).await;
    assert_eq!(r.is_error, Some(true));
    let text = text_of(&r);
    assert!(text.contains("exceeds the proxy's 1000-byte cap"), "{text}");
    let events = recorded(&s);
    assert_eq!(events.len(), 4);
    assert_eq!(
        events[3].4,
        Value::Null,
        "the oversized output is not recorded"
    );
    assert!(
        events[3].5.as_deref().unwrap().contains("result of 50"),
        "{events:?}"
    );
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_and_garbage_results_are_error_results_and_recorded() {
    let limits = ProxyLimits {
        call_deadline: Duration::from_secs(5),
        ..ProxyLimits::default()
    };
    for tool in ["malformed", "garbage"] {
        let s = start(&["mcp__fault"], limits, &[]).await;
        let client = connect(s.proxy.endpoints(), "fault").await;
        let r = call(&client, tool, json!({})).await;
        assert_eq!(r.is_error, Some(true), "{tool}: {r:?}");
        let events = recorded(&s);
        assert_eq!(events.len(), 2, "{tool}: {events:?}");
        assert_eq!(events[1].1, format!("mcp__fault__{tool}"));
        assert!(events[1].5.is_some(), "{tool}: {events:?}");
        client.cancel().await.ok();
        s.proxy.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_tool_error_is_forwarded_and_recorded_as_an_error() {
    let s = start(&["mcp__fault__fail"], ProxyLimits::default(), &[]).await;
    let client = connect(s.proxy.endpoints(), "fault").await;
    let r = call(&client, "fail", json!({"text": "no such file"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(text_of(&r), "no such file");
    let events = recorded(&s);
    assert_eq!(events[1].5.as_deref(), Some("no such file"));
    assert_eq!(
        events[1].4["isError"],
        json!(true),
        "the output is the server's own"
    );
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn cancelling_the_run_ends_a_call_in_flight_and_records_it() {
    let s = start(&["mcp__fault"], ProxyLimits::default(), &[]).await;
    let client = connect(s.proxy.endpoints(), "fault").await;
    let cancel = s.cancel.clone();
    let peer = client.peer().clone();
    let call = tokio::spawn(async move {
        peer.call_tool(rmcp::model::CallToolRequestParams::new("hang"))
            .await
    });
    // The call is in flight once its tool.call is recorded (the server never answers it).
    s.recorder.wait_for(1).await;
    cancel.cancel();
    let r = call
        .await
        .unwrap()
        .expect("the agent gets an answer after the cancellation");
    assert_eq!(r.is_error, Some(true));
    assert!(
        text_of(&r).contains("cancelled: the run stopped"),
        "{}",
        text_of(&r)
    );
    // A call after the cancellation is not forwarded.
    let late = common::call(&client, "echo", json!({"text": "late"})).await;
    assert_eq!(late.is_error, Some(true));
    assert_eq!(calls_received(&s), ["hang"]);
    let events = recorded(&s);
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(
        events[1].5.as_deref().unwrap().contains("cancelled"),
        "{events:?}"
    );
    assert!(
        events[3].5.as_deref().unwrap().contains("cancelled"),
        "{events:?}"
    );
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn nothing_survives_shutdown_or_drop_not_even_a_grandchild() {
    for by_drop in [false, true] {
        let s = start(
            &["mcp__fault"],
            ProxyLimits::default(),
            &[(transcript_testkit::mcp_server::CHILD_ENV, "1")],
        )
        .await;
        let groups = s.proxy.process_groups();
        assert_eq!(groups.len(), 1);
        let client = connect(s.proxy.endpoints(), "fault").await;
        // The log holds the grandchild's pid once the server is up (it logs before serving).
        let child: u32 = read_log(&s.log)
            .iter()
            .find_map(|l| l.strip_prefix("child ").map(|p| p.parse().unwrap()))
            .expect("the server logged its child");
        assert!(alive(child) && alive(groups[0]));
        assert!(
            group_members(groups[0]).contains(&child),
            "the grandchild is in the server's group"
        );
        client.cancel().await.ok();
        if by_drop {
            drop(s.proxy);
        } else {
            s.proxy.shutdown().await.unwrap();
            // Once shutdown returned, neither can run again: each is gone, a zombie, exiting,
            // or has a SIGKILL pending (delivered when next scheduled).
            assert!(doomed(child), "grandchild {child} survived shutdown");
            assert!(!alive(groups[0]), "server {} survived shutdown", groups[0]);
        }
        // SIGKILL is synchronous to send; dying and reaping are the OS's (and tokio's).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while (alive(child) || alive(groups[0])) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            !alive(child),
            "grandchild {child} survived (drop: {by_drop})"
        );
        assert!(
            !alive(groups[0]),
            "server {} survived (drop: {by_drop})",
            groups[0]
        );
        assert!(group_members(groups[0]).is_empty());
    }
}

#[tokio::test]
async fn requests_without_the_runs_secret_are_refused() {
    let s = start(&["mcp__fault"], ProxyLimits::default(), &[]).await;
    let url = s.proxy.endpoints().endpoints[0].url.clone();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let http = http_client();
    for secret in [None, Some("wrong"), Some("")] {
        let mut req = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(secret) = secret {
            req = req.header(transcript_mcp::SECRET_HEADER, secret);
        }
        let status = req.send().await.unwrap().status();
        assert_eq!(status.as_u16(), 401, "secret {secret:?}");
    }
    let right = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(
            transcript_mcp::SECRET_HEADER,
            s.proxy.endpoints().secret.as_str(),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(right.status().is_success(), "{}", right.status());
    // Every SSE event carries a JSON message: no priming event with empty data, which the MCP
    // client of Gemini CLI 0.61 cannot parse ("Unexpected end of JSON input": no tools).
    let session = right
        .headers()
        .get("mcp-session-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let mut bodies = vec![right.text().await.unwrap()];
    let secret = s.proxy.endpoints().secret.clone();
    for (id, body) in [
        (
            None,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ),
        (Some(2), r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#),
        (
            Some(3),
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#,
        ),
    ] {
        let response = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .header(transcript_mcp::SECRET_HEADER, &secret)
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{id:?}: {}",
            response.status()
        );
        if id.is_some() {
            bodies.push(response.text().await.unwrap());
        }
    }
    for body in bodies {
        let data: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .collect();
        assert!(!data.is_empty(), "{body}");
        for d in data {
            serde_json::from_str::<Value>(d.trim())
                .unwrap_or_else(|e| panic!("{e}: {d:?} in {body:?}"));
        }
    }
    assert!(s.recorder.tools().is_empty());
    s.proxy.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_lost_record_makes_shutdown_fail() {
    let recorder = Arc::new(MemRecorder {
        fail: true,
        ..MemRecorder::default()
    });
    let proxy = McpProxy::start(
        &[fault_server("fault", &[])],
        Allowlist::from_step_tools(["mcp__fault"]),
        target(recorder),
        ProxyLimits::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let client = connect(proxy.endpoints(), "fault").await;
    let r = call(&client, "echo", json!({"text": "x"})).await;
    assert_eq!(text_of(&r), "x", "the agent is still served");
    client.cancel().await.ok();
    let err = proxy.shutdown().await.unwrap_err();
    assert!(matches!(err, ProxyError::Record(_)), "{err}");
}

#[tokio::test]
async fn a_server_that_cannot_start_fails_the_start_and_leaves_nothing() {
    let good = fault_server("good", &[]);
    let bad = transcript_mcp::McpServer {
        name: "bad".into(),
        upstream: transcript_mcp::Upstream::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
            env: Default::default(),
        },
    };
    let err = McpProxy::start(
        &[good, bad],
        Allowlist::default(),
        target(Arc::new(MemRecorder::default())),
        ProxyLimits::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("MCP server \"bad\" did not start"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stdio_server_sees_only_the_inherited_environment_and_its_own() {
    let s = start(
        &["mcp__fault__getenv"],
        ProxyLimits::default(),
        &[("MY_SERVER_TOKEN", "t0k")],
    )
    .await;
    let client = connect(s.proxy.endpoints(), "fault").await;
    let getenv = |name: &'static str| {
        let peer = client.peer().clone();
        async move {
            let args = json!({"name": name});
            let Value::Object(args) = args else {
                unreachable!()
            };
            let r = peer
                .call_tool(rmcp::model::CallToolRequestParams::new("getenv").with_arguments(args))
                .await
                .unwrap();
            text_of(&r)
        }
    };
    assert_eq!(getenv("MY_SERVER_TOKEN").await, "t0k");
    assert_eq!(getenv("PATH").await, std::env::var("PATH").unwrap());
    // cargo sets these for the test process (the runner); the server must not see them.
    for withheld in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "CARGO"] {
        assert!(
            std::env::var(withheld).is_ok(),
            "{withheld} set for the runner"
        );
        assert_eq!(
            getenv(withheld).await,
            "",
            "{withheld} leaked to the server"
        );
    }
    client.cancel().await.ok();
    s.proxy.shutdown().await.unwrap();
}
