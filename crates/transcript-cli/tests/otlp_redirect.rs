//! An OTLP/HTTP endpoint that redirects. A `301`/`302`/`303` makes an HTTP client repeat a
//! POST as a GET without its body, so following it delivers nothing: before, the export
//! followed it to a page that answered the GET `200` (a web UI, as behind a proxy that
//! redirects `http://` to `https://`) and said "sent 37 of 37 spans" while no span arrived.
//! Such a redirect is now an error naming where the endpoint moved; `307`/`308`, which keep
//! the method and the body, are still followed.
//!
//! Truth: what the receiver got (its requests, methods and decoded bodies).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

mod common;

use common::{DEMO_RUN_ID, demo_command, text};
use prost::Message;
use transcript_otel::otlp_proto::collector::trace::v1::ExportTraceServiceRequest;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A server whose `/v1/traces` redirects with `status` to `/moved/v1/traces`, which answers
/// every method `200` (a GET with a web page).
fn redirecting(rt: &tokio::runtime::Runtime, status: u16) -> MockServer {
    rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(path("/v1/traces"))
            .respond_with(
                ResponseTemplate::new(status).insert_header("location", "/moved/v1/traces"),
            )
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/moved/v1/traces"))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", "text/html")
                    .set_body_string("<html>the app</html>"),
            )
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/moved/v1/traces"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        server
    })
}

/// Spans the server got at `/moved/v1/traces` in POST bodies.
fn spans_delivered(rt: &tokio::runtime::Runtime, server: &MockServer) -> usize {
    rt.block_on(server.received_requests())
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path() == "/moved/v1/traces")
        .map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap())
        .flat_map(|r| r.resource_spans)
        .flat_map(|rs| rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum()
}

fn export(storage: &std::path::Path, endpoint: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args([
            "export",
            DEMO_RUN_ID,
            "--format",
            "otlp",
            "--endpoint",
            endpoint,
        ])
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap()
}

#[test]
fn a_redirect_that_drops_the_body_is_an_error_and_one_that_keeps_it_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    for status in [301, 302, 303] {
        let server = redirecting(&rt, status);
        let out = export(&storage, &server.uri());
        let err = text(&out.stderr);
        assert_eq!(spans_delivered(&rt, &server), 0, "{status}");
        assert_eq!(out.status.code(), Some(1), "{status}: {err}");
        assert!(err.contains(&format!("HTTP {status}")), "{err}");
        assert!(
            err.contains(&format!("redirects to {}/moved/v1/traces", server.uri())),
            "{err}"
        );
    }

    for status in [307, 308] {
        let server = redirecting(&rt, status);
        let out = export(&storage, &server.uri());
        let err = text(&out.stderr);
        assert!(out.status.success(), "{status}: {err}");
        let delivered = spans_delivered(&rt, &server);
        assert!(delivered > 0, "{status}");
        assert!(
            err.contains(&format!("sent {delivered} of {delivered} spans")),
            "{status}: {err}"
        );
    }
}
