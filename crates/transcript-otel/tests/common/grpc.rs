//! A real OTLP/gRPC receiver in another process: `support/otlp_grpc_receiver.py` on gRPC's
//! own Python server (PyPI `grpcio`) with the official OTLP definitions (PyPI
//! `opentelemetry-proto`), on a free loopback port, stopped by PID when dropped.
//!
//! The interpreter is `$TRANSCRIPT_OTLP_GRPC_PYTHON`, else
//! `~/.cache/transcript-otlp-grpc-venv/bin/python` (made by
//! `python3 -m venv ~/.cache/transcript-otlp-grpc-venv && ~/.cache/transcript-otlp-grpc-venv/bin/pip install grpcio opentelemetry-proto`).
//! Missing: the test is skipped with a message, or fails under `CI` (nothing skips in CI).
#![allow(dead_code)] // not every test binary uses every helper

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use prost::Message;
use transcript_otel::otlp_proto::collector::trace::v1::ExportTraceServiceRequest;

/// The receiver script (the same path from every crate of `crates/`: the CLI's tests use
/// this module too).
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../transcript-otel/tests/support/otlp_grpc_receiver.py")
}

/// The Python with grpcio and opentelemetry-proto, or `None` (skip) outside CI.
pub fn python() -> Option<PathBuf> {
    let path = std::env::var_os("TRANSCRIPT_OTLP_GRPC_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/transcript-otlp-grpc-venv/bin/python"))
        })?;
    let works = Command::new(&path)
        .args([
            "-c",
            "import grpc; from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if works {
        return Some(path);
    }
    let message = format!(
        "no Python with grpcio and opentelemetry-proto at {} (set TRANSCRIPT_OTLP_GRPC_PYTHON)",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{message}");
    }
    eprintln!("skipped: {message}");
    None
}

/// A running receiver.
pub struct GrpcReceiver {
    child: Child,
    /// Where it writes what it received.
    pub dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl GrpcReceiver {
    /// Starts the receiver with `args` (`--tls CERT KEY`, `--require-header NAME VALUE`);
    /// `None` when no suitable Python is installed (outside CI).
    pub fn start(args: &[&str]) -> Option<Self> {
        let python = python()?;
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(python)
            .arg(script())
            .arg(dir.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the receiver did not print its port: {line:?}"));
        Some(Self { child, dir, port })
    }

    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn endpoint(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The requests received so far, in order, with the metadata of each.
    pub fn received(&self) -> Vec<(ExportTraceServiceRequest, String)> {
        let mut out = Vec::new();
        for n in 1.. {
            let base = self.dir.path().join(n.to_string());
            let Ok(bytes) = std::fs::read(base.with_extension("bin")) else {
                break;
            };
            let meta = std::fs::read_to_string(base.with_extension("meta")).unwrap_or_default();
            out.push((
                ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap(),
                meta,
            ));
        }
        out
    }

    /// Every span received.
    pub fn span_count(&self) -> usize {
        self.received()
            .iter()
            .flat_map(|(r, _)| &r.resource_spans)
            .flat_map(|rs| &rs.scope_spans)
            .map(|ss| ss.spans.len())
            .sum()
    }
}

impl Drop for GrpcReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
