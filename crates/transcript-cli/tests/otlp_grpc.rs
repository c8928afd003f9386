//! `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` and `--otlp-protocol grpc` through the binary (#41 item
//! 2), against a real gRPC OTLP receiver (gRPC's own Python server with the official OTLP
//! definitions; see transcript-otel's `tests/common/grpc.rs`) on a free loopback port: the
//! live export of a run and the export of a stored run deliver the same spans as the
//! OTLP/JSON file of that run, the flag wins over the environment, and the summary line names
//! the full URL posted to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../transcript-otel/tests/common/grpc.rs"]
mod grpc_receiver;

use std::process::Command;

use common::{DEMO_RUN_ID, demo_command};
use grpc_receiver::GrpcReceiver;

const METHOD: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The number of spans of the stored demo run, from its OTLP/JSON file (jq-like count).
fn json_span_count(storage: &std::path::Path) -> usize {
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["export", DEMO_RUN_ID, "--format", "otlp-json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rs| rs["scopeSpans"].as_array().unwrap())
        .map(|ss| ss["spans"].as_array().unwrap().len())
        .sum()
}

#[test]
fn a_run_exports_live_over_grpc_from_the_environment_alone() {
    let Some(receiver) = GrpcReceiver::start(&[]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint("http"))
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "openinference.project.name=grpc",
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let expected = json_span_count(&storage);
    assert!(expected > 20);
    assert_eq!(receiver.span_count(), expected, "{stderr}");
    let summary = format!(
        "exported {expected} spans to {}{METHOD} (grpc)",
        receiver.endpoint("http")
    );
    assert!(stderr.contains(&summary), "{summary:?} in:\n{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn the_flag_wins_over_the_environment_and_a_stored_run_exports_over_grpc() {
    let Some(receiver) = GrpcReceiver::start(&[]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let expected = json_span_count(&storage);
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args([
            "export",
            DEMO_RUN_ID,
            "--format",
            "otlp",
            "--otlp-protocol",
            "grpc",
        ])
        .args(["--endpoint", &receiver.endpoint("http"), "--storage"])
        .arg(&storage)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(receiver.span_count(), expected, "{stderr}");
    let sent = format!(
        "sent {expected} of {expected} spans to {}{METHOD} (grpc)",
        receiver.endpoint("http")
    );
    assert!(stderr.contains(&sent), "{sent:?} in:\n{stderr}");
    // A value the flag does not know is a usage error naming the flag.
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args([
            "export",
            DEMO_RUN_ID,
            "--format",
            "otlp",
            "--otlp-protocol",
            "grcp",
        ])
        .args(["--endpoint", &receiver.endpoint("http"), "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--otlp-protocol"));
}
