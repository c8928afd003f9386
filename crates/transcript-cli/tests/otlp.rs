//! OTLP export from the CLI against an OTLP/HTTP receiver on 127.0.0.1
//! inside the test process, decoding requests with the official protobuf
//! definitions (opentelemetry-proto via transcript-otel).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::process::Command;

mod common;

use common::{DEMO_RUN_ID, demo_command};
use transcript_otel::otlp_proto::trace::v1::Span;

use common::otlp_receiver::Receiver;

fn names(spans: &[Span]) -> BTreeSet<String> {
    spans.iter().map(|s| s.name.clone()).collect()
}

#[test]
fn stored_and_live_export_deliver_the_same_span_tree() {
    let dir = tempfile::tempdir().unwrap();
    let live_receiver = Receiver::start();
    let stored_receiver = Receiver::start();

    // Live export during the run.
    let storage = dir.path().join("live");
    let out = demo_command(&storage, &dir.path().join("ws1"))
        .args(["--otlp-endpoint", &live_receiver.endpoint()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exported"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live = live_receiver.spans();
    let run_id = DEMO_RUN_ID;

    // The same run exported from its files.
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args([
            "export",
            run_id,
            "--format",
            "otlp",
            "--endpoint",
            &stored_receiver.endpoint(),
            "--storage",
        ])
        .arg(&storage)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stored = stored_receiver.spans();

    assert!(!stored.is_empty());
    assert_eq!(
        live.len(),
        stored.len(),
        "live and stored export send the same spans"
    );
    assert_eq!(names(&live), names(&stored));
    let ids = |spans: &[Span]| {
        spans
            .iter()
            .map(|s| (s.trace_id.clone(), s.span_id.clone()))
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(ids(&live), ids(&stored), "ids are derived, not random");
    let n = names(&stored);
    assert!(n.contains("invoke_workflow demo"), "{n:?}");
    assert!(
        n.contains("invoke_workflow grandchild"),
        "child runs are in the same trace: {n:?}"
    );
    assert!(n.iter().any(|s| s.starts_with("invoke_agent")), "{n:?}");
    assert!(n.iter().any(|s| s.starts_with("execute_tool")), "{n:?}");
    let traces: BTreeSet<_> = stored.iter().map(|s| s.trace_id.clone()).collect();
    assert_eq!(traces.len(), 1, "one trace per root run");
    let roots = stored
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .count();
    assert_eq!(roots, 1);
    // The failing branch carries an error status.
    let flaky = stored.iter().find(|s| s.name.contains("flaky")).unwrap();
    assert_eq!(flaky.status.as_ref().unwrap().code, 2, "STATUS_CODE_ERROR");
}

#[test]
fn otlp_json_export_and_a_dead_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let run_id = DEMO_RUN_ID;
    let file = dir.path().join("spans.json");
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["export", run_id, "--format", "otlp-json", "-o"])
        .arg(&file)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let spans = &v["resourceSpans"][0]["scopeSpans"][0]["spans"];
    assert!(spans.as_array().unwrap().len() > 20);
    // A run exporting live to a dead endpoint still succeeds, and says so.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = demo_command(&dir.path().join("s2"), &dir.path().join("ws2"))
        .args(["--otlp-endpoint", &format!("http://{dead}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "export failures never fail the run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("incomplete"));
    // --format otlp without an endpoint is a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["export", run_id, "--format", "otlp", "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
