//! An OTLP/HTTP endpoint that answers with an error status and then a body that never ends
//! (a broken proxy, a hostile receiver) does not grow the run's memory. Before, the error's
//! body was read whole to quote 200 characters of it: in 3 seconds (the request timeout set
//! below) the run's process held 1.3 GB (`/usr/bin/time -f %M`, debug build), and with the
//! default 10-second timeout it is several GB, enough to get a run killed by the kernel.
//!
//! Truth: the kernel's account of the process's peak resident memory (`VmHWM` in
//! `/proc/<pid>/status`), read until it exits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use common::{demo_command, text};

/// Peak resident memory of a run with live export stays under this.
const LIMIT_KB: u64 = 256 * 1024;

/// Serves every connection `500` and then 64 KiB chunks until the client goes away.
fn endless_error_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 65536];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let mut frame = format!("{:x}\r\n", buf.len()).into_bytes();
                frame.extend_from_slice(&[b'x'; 65536]);
                frame.extend_from_slice(b"\r\n");
                while stream.write_all(&frame).is_ok() {}
            });
        }
    });
    format!("http://{address}")
}

/// `VmHWM` (kB) of process `pid`, while it exists.
fn peak_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn an_error_answer_whose_body_never_ends_costs_the_run_no_memory() {
    let endpoint = endless_error_server();
    let dir = tempfile::tempdir().unwrap();
    let mut child = demo_command(&dir.path().join("s"), &dir.path().join("ws"))
        .args(["--otlp-endpoint", &endpoint])
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "3000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    let mut peak = 0;
    // Read while it runs (a zombie has no VmHWM left: the last reading before it stands).
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run did not end"
        );
        if let Some(kb) = peak_kb(pid) {
            peak = peak.max(kb);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(peak > 0, "never read the run's memory");
    assert!(
        peak < LIMIT_KB,
        "the run's peak resident memory was {peak} kB (limit {LIMIT_KB} kB)"
    );
    assert!(err.contains("HTTP 500"), "the failure is still said: {err}");
}
