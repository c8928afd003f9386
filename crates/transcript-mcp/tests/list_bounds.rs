//! #40 item 2: `tools/list` toward a server is bounded in time, pages, items and bytes. The
//! fault server (a real child process) answers `tools/list` with a `nextCursor` on every page,
//! a 100 MB page, 100 000 tools or nothing at all (`TRANSCRIPT_MCP_FAULT_LIST`). The agent's
//! client gets a JSON-RPC error naming the bound, the transcript a `router` diagnostic pair
//! named `tools/list`, and the proxy still serves calls afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use transcript_mcp::{Allowlist, McpProxy, ProxyLimits};
use transcript_testkit::mcp_server::LIST_ENV;

/// The proxy in front of a fault server whose `tools/list` is `mode`; the agent lists its
/// tools (within `guard`, so that a proxy which never answers fails the test instead of
/// hanging it): the error text and what was recorded.
async fn list_with(mode: &str, limits: ProxyLimits) -> (String, Vec<(String, Option<String>)>) {
    let recorder = Arc::new(MemRecorder::default());
    let proxy = McpProxy::start(
        &[fault_server("fault", &[(LIST_ENV, mode)])],
        Allowlist::from_step_tools(["mcp__fault"]),
        target(recorder.clone()),
        limits,
        CancellationToken::new(),
    )
    .await
    .expect("proxy starts");
    let client = connect(proxy.endpoints(), "fault").await;
    let guard = Duration::from_secs(120);
    let listed = tokio::time::timeout(guard, client.peer().list_tools(None))
        .await
        .unwrap_or_else(|_| panic!("{mode}: no answer to tools/list within {guard:?}"));
    let error = match listed {
        Ok(page) => panic!(
            "{mode}: the agent got a list of {} tools, next cursor {:?}",
            page.tools.len(),
            page.next_cursor
        ),
        Err(e) => e.to_string(),
    };
    // The proxy still serves the server's calls (a server that hangs hangs them too).
    if mode != "hang" {
        let echoed = call(&client, "echo", json!({"text": "still here"})).await;
        assert_eq!(text_of(&echoed), "still here", "{mode}");
    }
    let events = recorder
        .tools()
        .into_iter()
        .map(|(ty, p)| (format!("{ty} {} {}", p.name, p.input.to_value()), p.error))
        .collect();
    client.cancel().await.ok();
    proxy.shutdown().await.unwrap();
    (error, events)
}

/// The recorded diagnostic: a `tools/list` pair for server `fault` whose error contains
/// `needle`, before the echo call's pair (when there is one).
fn assert_diagnostic(events: &[(String, Option<String>)], needle: &str) {
    assert!(events.len() >= 2, "{events:?}");
    assert_eq!(events[0].0, "tool.call tools/list {\"server\":\"fault\"}");
    assert!(events[0].1.is_none(), "{events:?}");
    assert!(
        events[1].0.starts_with("tool.result tools/list"),
        "{events:?}"
    );
    let error = events[1].1.as_deref().unwrap_or_default();
    assert!(error.contains(needle), "{error}");
    assert!(error.contains("\"fault\""), "{error}");
    if let Some(next) = events.get(2) {
        assert!(
            next.0.starts_with("tool.call mcp__fault__echo"),
            "{events:?}"
        );
    }
}

#[tokio::test]
async fn a_server_that_always_sends_a_next_cursor_stops_at_the_page_cap() {
    let (error, events) = list_with("endless", ProxyLimits::default()).await;
    assert!(error.contains("more than 100 pages"), "{error}");
    assert_diagnostic(&events, "more than 100 pages");
}

#[tokio::test]
async fn a_list_above_the_byte_cap_is_refused_with_the_cap() {
    let limits = ProxyLimits {
        max_list_bytes: 100_000,
        ..ProxyLimits::default()
    };
    let (error, events) = list_with("huge:1000000", limits).await;
    assert!(error.contains("100000-byte cap"), "{error}");
    assert_diagnostic(&events, "100000-byte cap");
}

#[tokio::test]
async fn a_100_mb_list_never_stalls_past_the_deadline() {
    // rmcp 3.11's stdio transport drops a line above 16 MiB (its DEFAULT_MAX_LINE_LENGTH)
    // without buffering it and keeps the connection: the page never arrives, and the deadline
    // answers the agent.
    let limits = ProxyLimits {
        list_deadline: Duration::from_secs(3),
        ..ProxyLimits::default()
    };
    let (error, events) = list_with("huge:100000000", limits).await;
    assert!(
        error.contains("no complete tools/list within 3s"),
        "{error}"
    );
    assert_diagnostic(&events, "within 3s");
}

#[tokio::test]
async fn a_list_of_100000_tools_stops_at_the_item_cap() {
    let (error, events) = list_with("many:100000", ProxyLimits::default()).await;
    assert!(error.contains("more than 10000 tools"), "{error}");
    assert_diagnostic(&events, "more than 10000 tools");
}

#[tokio::test]
async fn a_server_that_never_answers_the_list_is_cut_at_the_deadline() {
    let limits = ProxyLimits {
        list_deadline: Duration::from_millis(500),
        ..ProxyLimits::default()
    };
    let (error, events) = list_with("hang", limits).await;
    assert!(
        error.contains("no complete tools/list within 500ms"),
        "{error}"
    );
    assert_diagnostic(&events, "no complete tools/list within 500ms");
}

#[tokio::test]
async fn the_list_deadline_is_never_longer_than_the_call_deadline() {
    // The exec step passes its timeout as the call deadline: a list never outlives it.
    let limits = ProxyLimits {
        call_deadline: Duration::from_millis(400),
        ..ProxyLimits::default()
    };
    let (error, events) = list_with("hang", limits).await;
    assert!(
        error.contains("no complete tools/list within 400ms"),
        "{error}"
    );
    assert_diagnostic(&events, "within 400ms");
}
