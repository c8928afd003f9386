//! `export --format otlp` of a large run to a collector that accepts connections and never
//! answers gives up after as many timed-out requests as live export does
//! (`transcript_otel::MAX_CONSECUTIVE_FAILURES`, 3), instead of waiting out the timeout once
//! per batch of 512 spans: a day's imported session of thousands of spans held the command
//! for minutes (here, 5 batches: 5 timeouts) before it said the export failed.
//!
//! Truth: the hung receiver's own count of the requests it was sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod common;

use common::{bin, text};
use serde_json::json;

/// Tool calls in the run (each a span): 5 batches of 512.
const CALLS: u64 = 2100;

/// A receiver that reads each request's head, counts it, and never answers.
fn hung_receiver() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicU64::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            if seen.starts_with(b"POST") {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            held.push(stream);
        }
    });
    (format!("http://{address}"), requests)
}

/// A stored run of one agent step with `CALLS` tool calls and their results.
fn big_run(storage: &std::path::Path) -> String {
    let run = "11111111-2222-4333-8444-555555555555";
    let mut seq = 0;
    let mut lines = Vec::new();
    let mut line = |kind: &str, path: &str, payload: serde_json::Value| {
        seq += 1;
        let ms = seq % 1000;
        lines.push(
            json!({"seq": seq, "run_id": run, "type": kind, "path": path, "iteration": 0,
                "timestamp": format!("2026-06-08T08:{:02}:{:02}.{ms:03}Z", seq / 60_000 % 60, seq / 1000 % 60),
                "payload": payload})
            .to_string(),
        );
    };
    line(
        "run.started",
        "",
        json!({"name": "big", "kind": "workflow"}),
    );
    line(
        "step.started",
        "work",
        json!({"name": "work", "kind": "agent"}),
    );
    for i in 0..CALLS {
        let id = format!("call-{i}");
        line(
            "tool.call",
            "work",
            json!({"name": "Read", "call_id": id,
            "input": {"path": "a"}, "output": null, "fidelity": "agent_emitted"}),
        );
        line(
            "tool.result",
            "work",
            json!({"name": "Read", "call_id": id,
            "input": null, "output": "ok", "fidelity": "agent_emitted"}),
        );
    }
    line(
        "step.completed",
        "work",
        json!({"name": "work", "kind": "agent"}),
    );
    line(
        "run.completed",
        "",
        json!({"name": "big", "kind": "workflow"}),
    );
    std::fs::create_dir_all(storage).unwrap();
    std::fs::write(
        storage.join(format!("{run}.jsonl")),
        lines.join("\n") + "\n",
    )
    .unwrap();
    run.to_owned()
}

#[test]
fn a_stored_export_to_a_hung_collector_gives_up_like_live_export() {
    let dir = tempfile::tempdir().unwrap();
    let run = big_run(dir.path());
    let (endpoint, requests) = hung_receiver();
    let out = bin()
        .args([
            "export",
            &run,
            "--format",
            "otlp",
            "--endpoint",
            &endpoint,
            "--storage",
        ])
        .arg(dir.path())
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let sent = requests.load(Ordering::SeqCst);
    assert_eq!(
        sent,
        u64::from(transcript_otel::MAX_CONSECUTIVE_FAILURES),
        "requests the hung receiver got: {err}"
    );
    assert!(err.contains("timed out"), "{err}");
    assert!(err.contains("gave up after 3 failed requests"), "{err}");
    // Every span is counted as not exported.
    let spans: u64 = err
        .split(" of ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no span count in: {err}"));
    assert!(spans > CALLS, "{err}");
    assert!(
        err.contains(&format!("{spans} of {spans} spans were not exported")),
        "{err}"
    );
}
