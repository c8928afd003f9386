//! External plugins are bounded (#28 item 5): the protocol version announced in `describe` is
//! checked, the `describe` handshake has a deadline, and a plugin's lines are capped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use transcript_exec::{ExternalPlugin, Plugin, PluginLimits, ToolContext};

use support::*;

fn sh(script: &str) -> Vec<String> {
    vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()]
}

const DESCRIBE_OK: &str =
    r#"{"id":1,"result":{"name":"p","protocol":1,"operations":["big","small"]}}"#;

#[tokio::test]
async fn a_plugin_announcing_another_protocol_or_none_is_refused() {
    for (answer, needle) in [
        (
            r#"{"id":1,"result":{"name":"p","protocol":2,"operations":["x"]}}"#,
            "protocol 2 announced; this runner speaks protocol 1",
        ),
        (
            r#"{"id":1,"result":{"name":"p","operations":["x"]}}"#,
            "no 'protocol' announced",
        ),
        (
            r#"{"id":1,"result":{"name":"p","protocol":"1","operations":["x"]}}"#,
            "no 'protocol' announced",
        ),
    ] {
        let err = ExternalPlugin::start(&sh(&format!("read line; echo '{answer}'; cat")), None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(needle), "{answer}: {err}");
    }
}

#[tokio::test]
async fn a_plugin_that_never_answers_describe_is_refused_at_its_deadline() {
    let limits = PluginLimits {
        describe_timeout: Duration::from_millis(300),
        ..PluginLimits::default()
    };
    // Reads the request and never answers; the outer timeout only guards the test.
    let started = tokio::time::timeout(
        Duration::from_secs(20),
        ExternalPlugin::start_with(&sh("read line; exec sleep 600"), None, limits),
    )
    .await
    .expect("start_with returned at its deadline");
    let err = started.unwrap_err();
    assert!(
        err.to_string().contains("describe: no answer within 300ms"),
        "{err}"
    );
}

#[tokio::test]
async fn an_over_long_line_fails_the_call_and_the_plugin_stays_refused() {
    let limits = PluginLimits {
        max_line_bytes: 64 * 1024,
        ..PluginLimits::default()
    };
    // describe, then answers every call with a 200 KB line.
    let script = format!(
        "read line; echo '{DESCRIBE_OK}'; while read line; do \
         printf '{{\"id\":2,\"result\":\"'; head -c 200000 /dev/zero | tr '\\0' a; printf '\"}}\\n'; done"
    );
    let p = ExternalPlugin::start_with(&sh(&script), None, limits)
        .await
        .unwrap();
    let (_d, ws) = workspace();
    let ctx = ToolContext {
        workspace: ws,
        cancel: CancellationToken::new(),
        call_id: "c".into(),
        limits: Default::default(),
    };
    let err = p.call("big", &ctx, json!({})).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("a response line exceeds 65536 bytes"),
        "{err}"
    );
    let again = tokio::time::timeout(Duration::from_secs(10), p.call("small", &ctx, json!({})))
        .await
        .expect("a broken plugin answers at once");
    assert_eq!(again.unwrap_err().to_string(), err.to_string());
}

#[tokio::test]
async fn a_line_within_the_cap_is_read_whole() {
    let limits = PluginLimits {
        max_line_bytes: 64 * 1024,
        ..PluginLimits::default()
    };
    let script = format!(
        "read line; echo '{DESCRIBE_OK}'; while read line; do \
         printf '{{\"id\":2,\"result\":\"'; head -c 60000 /dev/zero | tr '\\0' a; printf '\"}}\\n'; done"
    );
    let p = ExternalPlugin::start_with(&sh(&script), None, limits)
        .await
        .unwrap();
    let (_d, ws) = workspace();
    let ctx = ToolContext {
        workspace: ws,
        cancel: CancellationToken::new(),
        call_id: "c".into(),
        limits: Default::default(),
    };
    let out = p.call("big", &ctx, json!({})).await.unwrap();
    assert_eq!(out.as_str().unwrap().len(), 60000);
}
