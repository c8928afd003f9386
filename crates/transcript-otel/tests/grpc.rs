//! OTLP/gRPC (#41 item 2) against a real gRPC OTLP receiver (gRPC's own Python server with
//! the official OTLP service definitions, see `common/grpc.rs`) on a free loopback port:
//! every span arrives under the configured resource, over plain HTTP/2 and over TLS with a
//! private CA; a required header travels as gRPC metadata and its absence is refused and said
//! plainly; no header value is ever echoed; the live exporter takes the same road.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/grpc.rs"]
mod grpc_receiver;
#[path = "common/tls.rs"]
mod tls_receiver;

use std::time::Duration;

use common::*;
use grpc_receiver::GrpcReceiver;
use tls_receiver::TestCa;
use transcript_otel::config::Protocol;
use transcript_otel::{ExportError, LiveConfig, LiveExporter, OtlpHttpConfig, export_otlp_http};

const TOKEN: &str = "Bearer sk-grpc-0f1e2d3c4b5a69788796a5b4";

fn config(endpoint: &str, ca: Option<std::path::PathBuf>, token: Option<&str>) -> OtlpHttpConfig {
    let mut c = receiver_config(endpoint, Protocol::Grpc, ca, token);
    // Mixed case on purpose: gRPC metadata keys are lowercase on the wire.
    for (name, _) in &mut c.headers {
        *name = "Authorization".into();
    }
    c
}

#[test]
fn spans_arrive_over_grpc_in_batches_under_the_resource() {
    let Some(receiver) = GrpcReceiver::start(&[]) else {
        return;
    };
    let spans = demo_spans();
    let names: std::collections::BTreeSet<String> =
        spans.iter().map(|s| s.name.to_string()).collect();
    let report = export_otlp_http(spans, &config(&receiver.endpoint("http"), None, None)).unwrap();
    assert_eq!((report.spans_sent, report.requests), (12, 3));
    let received = receiver.received();
    assert_eq!(received.len(), 3);
    assert_eq!(receiver.span_count(), 12);
    let got: std::collections::BTreeSet<String> = received
        .iter()
        .flat_map(|(r, _)| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(got, names);
    for (request, meta) in &received {
        let keys: Vec<&str> = request.resource_spans[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes
            .iter()
            .map(|a| a.key.as_str())
            .collect();
        assert!(keys.contains(&"service.name") && keys.contains(&"openinference.project.name"));
        assert!(meta.contains("user-agent: transcript-otel/"), "{meta}");
    }

    // The live exporter takes the same road.
    let live = LiveExporter::start(
        config(&receiver.endpoint("http"), None, None),
        LiveConfig::default(),
    )
    .unwrap();
    let (root, child) = demo();
    for e in root.events.iter().chain(&child.events) {
        live.push(std::sync::Arc::new(e.clone()));
    }
    let report = live.finish();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.spans_sent, 12);
    assert_eq!(receiver.span_count(), 24);
}

#[test]
fn grpc_over_tls_with_a_private_ca_and_a_required_header() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("transcript gRPC test CA");
    let (cert, key) = ca.server_pem();
    let (cert_file, key_file) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    let ca_file = ca.write(dir.path(), "ca.pem");
    let Some(receiver) = GrpcReceiver::start(&[
        "--tls",
        cert_file.to_str().unwrap(),
        key_file.to_str().unwrap(),
        "--require-header",
        "authorization",
        TOKEN,
    ]) else {
        return;
    };
    let endpoint = receiver.endpoint("https");

    let report = export_otlp_http(
        demo_spans(),
        &config(&endpoint, Some(ca_file.clone()), Some(TOKEN)),
    )
    .unwrap();
    assert_eq!(report.spans_sent, 12);
    assert_eq!(receiver.span_count(), 12);

    // Without the header: refused, said plainly, nothing written.
    let err = export_otlp_http(
        demo_spans(),
        &config(&endpoint, Some(ca_file.clone()), None),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ExportError::Incomplete { failed: 12, .. }),
        "{text}"
    );
    assert!(
        text.contains("Unauthenticated") && text.contains("--otlp-header"),
        "{text}"
    );
    // A wrong value is refused and never echoed.
    let wrong = "Bearer sk-wrong-99887766554433221100";
    let err =
        export_otlp_http(demo_spans(), &config(&endpoint, Some(ca_file), Some(wrong))).unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains("sk-wrong-99887766554433221100"), "{text}");
    assert_eq!(receiver.span_count(), 12, "nothing more was accepted");

    // Without the private CA: the TLS failure, with where a CA goes; the token never shows.
    let err = export_otlp_http(demo_spans(), &config(&endpoint, None, Some(TOKEN))).unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains("certificate"), "{text}");
    assert!(text.contains("OTEL_EXPORTER_OTLP_CERTIFICATE"), "{text}");
    assert!(!text.contains("sk-grpc-0f1e2d3c4b5a69788796a5b4"), "{text}");
    assert_eq!(receiver.span_count(), 12);
}

#[test]
fn a_dead_grpc_endpoint_is_a_counted_failure_within_the_timeout() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    drop(std::net::TcpListener::bind(dead));
    let mut c = config(&format!("http://{dead}"), None, None);
    c.timeout = Duration::from_secs(2);
    c.max_retries = 2;
    let err = export_otlp_http(demo_spans(), &c).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ExportError::Incomplete { failed: 12, .. }),
        "{text}"
    );
    assert!(text.contains("Unavailable"), "{text}");
    assert!(
        text.contains("/opentelemetry.proto.collector.trace.v1.TraceService/Export"),
        "the message names the full URL: {text}"
    );
}
