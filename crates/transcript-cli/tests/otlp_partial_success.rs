//! A receiver that accepts a request but rejects some of its spans (OTLP's partial success:
//! HTTP 200 with an `ExportTraceServiceResponse` whose `partial_success` names
//! `rejected_spans` and an `error_message`, what a backend answers to spans over its limits)
//! is not a complete export. Before, OTLP/HTTP read only the status: `run` said "exported N
//! spans" and `export --format otlp` "sent N of N spans" while the receiver had dropped some.
//!
//! Over gRPC, a partial success failed the whole request: "0 spans sent, 37 failed, 1 failed
//! requests" while the receiver had kept 35.
//!
//! Truth: the receiver's own answer (2 spans rejected per request) and the requests it got:
//! a wiremock OTLP/HTTP receiver, and the real OTLP/gRPC receiver (gRPC's Python server with
//! the official OTLP definitions, `transcript-otel/tests/support/otlp_grpc_receiver.py`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

mod common;
#[path = "../../transcript-otel/tests/common/grpc.rs"]
mod grpc_receiver;

use common::{DEMO_RUN_ID, demo_command, text};
use prost::Message;
use transcript_otel::otlp_proto::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Spans each answer says were rejected.
const REJECTED: i64 = 2;

/// An OTLP/HTTP receiver answering every request 200 with a partial success.
struct Rejecting {
    server: MockServer,
    rt: tokio::runtime::Runtime,
}

impl Rejecting {
    fn start() -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answer = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess {
                rejected_spans: REJECTED,
                error_message: "span exceeds the attribute limit".to_owned(),
            }),
        }
        .encode_to_vec();
        let server = rt.block_on(async {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .and(path("/v1/traces"))
                .respond_with(
                    ResponseTemplate::new(200)
                        .insert_header("content-type", "application/x-protobuf")
                        .set_body_bytes(answer),
                )
                .mount(&server)
                .await;
            server
        });
        Self { server, rt }
    }

    /// (requests, spans) received.
    fn received(&self) -> (u64, u64) {
        let requests = self.rt.block_on(self.server.received_requests()).unwrap();
        let spans = requests
            .iter()
            .map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap())
            .flat_map(|r| r.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .map(|ss| ss.spans.len() as u64)
            .sum();
        (requests.len() as u64, spans)
    }
}

fn stderr(out: &Output) -> String {
    text(&out.stderr)
}

#[test]
fn spans_a_receiver_rejects_are_reported_not_counted_as_exported() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");

    // Live: the run is not failed by it, and its summary says what was rejected.
    let live = Rejecting::start();
    let out = demo_command(&storage, &dir.path().join("ws"))
        .args(["--otlp-endpoint", &live.server.uri()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let (requests, spans) = live.received();
    assert!(
        requests > 0 && spans > requests * REJECTED as u64,
        "{requests} {spans}"
    );
    let rejected = requests * REJECTED as u64;
    let want = format!(
        "incomplete: {} spans sent, {rejected} failed",
        spans - rejected
    );
    let err = stderr(&out);
    assert!(err.contains(&want), "want {want:?} in:\n{err}");
    assert!(err.contains("span exceeds the attribute limit"), "{err}");
    assert!(!err.contains("transcript: exported"), "{err}");

    // Stored: the command fails (exit 1), saying how many and why.
    let stored = Rejecting::start();
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["export", DEMO_RUN_ID, "--format", "otlp", "--endpoint"])
        .arg(stored.server.uri())
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    let (requests, _) = stored.received();
    assert_eq!(requests, 1, "one batch");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("rejected 2"), "{err}");
    assert!(err.contains("span exceeds the attribute limit"), "{err}");
}

#[test]
fn over_grpc_the_spans_a_receiver_keeps_are_counted_as_sent() {
    let Some(receiver) = grpc_receiver::GrpcReceiver::start(&[
        "--reject-spans",
        "2",
        "span exceeds the attribute limit",
    ]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = demo_command(&dir.path().join("s"), &dir.path().join("ws"))
        .args(["--otlp-protocol", "grpc", "--otlp-endpoint"])
        .arg(receiver.endpoint("http"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = receiver.received().len() as u64;
    let spans = receiver.span_count() as u64;
    assert!(requests > 0, "nothing received");
    let rejected = requests * REJECTED as u64;
    let want = format!(
        "incomplete: {} spans sent, {rejected} failed, 0 failed requests",
        spans - rejected
    );
    let err = stderr(&out);
    assert!(err.contains(&want), "want {want:?} in:\n{err}");
    assert!(err.contains("span exceeds the attribute limit"), "{err}");
}
