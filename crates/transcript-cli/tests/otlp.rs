//! OTLP export from the CLI against an OTLP/HTTP receiver on 127.0.0.1
//! inside the test process, decoding requests with the official protobuf
//! definitions (opentelemetry-proto via transcript-otel).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::{DEMO_RUN_ID, demo_command};
use prost::Message;
use transcript_otel::otlp_proto::collector::trace::v1::ExportTraceServiceRequest;
use transcript_otel::otlp_proto::trace::v1::Span;

/// Accepts connections until the test ends; every decoded span goes to the channel.
fn receiver() -> (SocketAddr, mpsc::Receiver<Span>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    assert!(line.starts_with("POST /v1/traces "), "{line}");
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        reader.read_line(&mut header).unwrap();
                        let header = header.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = header.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0u8; length];
                    reader.read_exact(&mut body).unwrap();
                    let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
                    for rs in request.resource_spans {
                        for ss in rs.scope_spans {
                            for span in ss.spans {
                                let _ = tx.send(span);
                            }
                        }
                    }
                    writer
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n")
                        .unwrap();
                }
            });
        }
    });
    (addr, rx)
}

fn drain(rx: &mpsc::Receiver<Span>) -> Vec<Span> {
    // The CLI has exited: everything it sent has arrived or never will.
    let mut spans = Vec::new();
    while let Ok(s) = rx.recv_timeout(Duration::from_millis(500)) {
        spans.push(s);
    }
    spans
}

fn names(spans: &[Span]) -> BTreeSet<String> {
    spans.iter().map(|s| s.name.clone()).collect()
}

#[test]
fn stored_and_live_export_deliver_the_same_span_tree() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, rx) = receiver();
    let endpoint = format!("http://{addr}");

    // Live export during the run.
    let storage = dir.path().join("live");
    let out = demo_command(&storage, &dir.path().join("ws1"))
        .args(["--otlp-endpoint", &endpoint])
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
    let live = drain(&rx);
    let run_id = DEMO_RUN_ID;

    // The same run exported from its files.
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args([
            "export",
            run_id,
            "--format",
            "otlp",
            "--endpoint",
            &endpoint,
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
    let stored = drain(&rx);

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
