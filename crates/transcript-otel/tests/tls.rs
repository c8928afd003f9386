//! OTLP over https to a receiver behind a private CA that requires an auth header
//! (#31 item 4): the header arrives, nothing is accepted without it, a wrong certificate
//! fails with a clear message, and no header value ever shows in a message.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/tls.rs"]
mod tls_receiver;

use common::*;
use tls_receiver::{TestCa, TlsReceiver};
use transcript_otel::config::Protocol;
use transcript_otel::otlp_proto::common::v1::any_value;
use transcript_otel::{ExportError, LiveConfig, LiveExporter, OtlpHttpConfig, export_otlp_http};

const TOKEN: &str = "Bearer sk-test-0f1e2d3c4b5a69788796a5b4";

fn config(endpoint: &str, ca: Option<std::path::PathBuf>, token: Option<&str>) -> OtlpHttpConfig {
    OtlpHttpConfig {
        service_name: "tls-test".into(),
        ..receiver_config(endpoint, Protocol::HttpProtobuf, ca, token)
    }
}

fn resource_attr(r: &tls_receiver::Received, key: &str) -> Option<String> {
    r.body.resource_spans[0]
        .resource
        .as_ref()?
        .attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

#[test]
fn spans_arrive_over_https_with_the_header_and_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("transcript test CA");
    let receiver = TlsReceiver::start(&ca, "authorization", TOKEN);
    let ca_file = ca.write(dir.path(), "ca.pem");

    let report = export_otlp_http(
        demo_spans(),
        &config(&receiver.endpoint, Some(ca_file.clone()), Some(TOKEN)),
    )
    .unwrap();
    assert_eq!((report.spans_sent, report.requests), (12, 3));
    let accepted = receiver.accepted();
    assert_eq!(accepted.len(), 3);
    assert_eq!(receiver.rejected(), 0);
    let spans: usize = accepted
        .iter()
        .flat_map(|r| &r.body.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum();
    assert_eq!(spans, 12);
    for r in &accepted {
        assert_eq!(r.content_type.as_deref(), Some("application/x-protobuf"));
        assert_eq!(
            resource_attr(r, "service.name").as_deref(),
            Some("tls-test")
        );
        assert_eq!(
            resource_attr(r, "openinference.project.name").as_deref(),
            Some("review")
        );
    }

    // The live exporter takes the same road.
    let live = LiveExporter::start(
        config(&receiver.endpoint, Some(ca_file), Some(TOKEN)),
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
}

#[test]
fn without_the_right_header_nothing_is_accepted_and_no_value_is_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("transcript test CA");
    let receiver = TlsReceiver::start(&ca, "authorization", TOKEN);
    let ca_file = ca.write(dir.path(), "ca.pem");

    // No header: 401, said plainly.
    let err = export_otlp_http(
        demo_spans(),
        &config(&receiver.endpoint, Some(ca_file.clone()), None),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ExportError::Incomplete { failed: 12, .. }),
        "{text}"
    );
    assert!(
        text.contains("401") && text.contains("--otlp-header"),
        "{text}"
    );
    assert_eq!(receiver.rejected(), 3);
    assert!(receiver.accepted().is_empty());

    // A wrong value: the receiver's 401 body quotes it; our message must not.
    let wrong = "Bearer sk-wrong-99887766554433221100";
    let err = export_otlp_http(
        demo_spans(),
        &config(&receiver.endpoint, Some(ca_file), Some(wrong)),
    )
    .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains("invalid credentials"), "{text}");
    assert!(!text.contains("sk-wrong-99887766554433221100"), "{text}");
    assert_eq!(receiver.rejected(), 6);
    assert!(receiver.accepted().is_empty());
}

#[test]
fn a_wrong_certificate_fails_clearly_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server_ca = TestCa::new("server CA");
    let other_ca = TestCa::new("another CA");
    let receiver = TlsReceiver::start(&server_ca, "authorization", TOKEN);
    let other = other_ca.write(dir.path(), "other.pem");

    for certificate in [Some(other), None] {
        let err = export_otlp_http(
            demo_spans(),
            &config(&receiver.endpoint, certificate.clone(), Some(TOKEN)),
        )
        .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("TLS handshake failed"), "{text}");
        assert!(text.contains("certificate"), "{text}");
        assert!(text.contains("OTEL_EXPORTER_OTLP_CERTIFICATE"), "{text}");
        assert!(!text.contains("sk-test-0f1e2d3c4b5a69788796a5b4"), "{text}");
    }
    assert!(receiver.accepted().is_empty());
    assert_eq!(receiver.rejected(), 0);
    assert!(receiver.handshakes_failed() > 0);

    // A file that is not a certificate is refused before anything is sent.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let err = export_otlp_http(
        demo_spans(),
        &config(&receiver.endpoint, Some(junk), Some(TOKEN)),
    )
    .unwrap_err();
    assert!(matches!(err, ExportError::Unreadable { .. }), "{err}");
    assert!(err.to_string().contains("junk.pem"), "{err}");
}
