//! OTLP/HTTP export to a receiver on 127.0.0.1 inside this process, which
//! decodes the requests with the official protobuf definitions.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use prost::Message;
use transcript_otel::otlp_proto::collector::trace::v1::ExportTraceServiceRequest;
use transcript_otel::otlp_proto::common::v1::any_value;
use transcript_otel::otlp_proto::trace::v1::Span;
use transcript_otel::{
    ExportError, LiveConfig, LiveExporter, MapOptions, OtlpHttpConfig, export_otlp_http, ids,
    map_run,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// One decoded request.
struct Received {
    path: String,
    content_type: String,
    api_key: Option<String>,
    body: ExportTraceServiceRequest,
}

/// An OTLP/HTTP receiver: a wiremock server on 127.0.0.1 (its own thread) that answers every
/// `POST /v1/traces` with `status` and keeps the requests. Sync tests drive it through the
/// runtime it owns; async tests use [`Receiver::start_async`] and [`Receiver::requests`].
struct Receiver {
    server: MockServer,
    rt: Option<tokio::runtime::Runtime>,
}

impl Receiver {
    fn start(status: u16) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(Self::mounted(status));
        Self {
            server,
            rt: Some(rt),
        }
    }

    async fn start_async(status: u16) -> Self {
        Self {
            server: Self::mounted(status).await,
            rt: None,
        }
    }

    async fn mounted(status: u16) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/traces"))
            .respond_with(
                ResponseTemplate::new(status)
                    .insert_header("content-type", "application/x-protobuf"),
            )
            .mount(&server)
            .await;
        server
    }

    fn endpoint(&self) -> String {
        self.server.uri()
    }

    /// Every request received so far, decoded (the exporter already returned, so every
    /// request it sent has arrived).
    async fn requests(&self) -> Vec<Received> {
        self.server
            .received_requests()
            .await
            .unwrap()
            .into_iter()
            .map(|r| {
                let text = |name: &str| r.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
                assert!(
                    text("transfer-encoding").is_none(),
                    "chunked bodies are not expected"
                );
                Received {
                    path: r.url.path().to_owned(),
                    content_type: text("content-type").unwrap_or_default(),
                    api_key: text("x-api-key"),
                    body: ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap(),
                }
            })
            .collect()
    }

    /// Every request received so far, which must be `n`.
    fn take(&self, n: usize) -> Vec<Received> {
        let rt = self.rt.as_ref().expect("a receiver started by `start`");
        let requests = rt.block_on(self.requests());
        assert_eq!(requests.len(), n, "requests received");
        requests
    }
}

fn spans_of(requests: &[Received]) -> Vec<Span> {
    requests
        .iter()
        .flat_map(|r| &r.body.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| ss.spans.clone())
        .collect()
}

fn string_attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

fn config(endpoint: String) -> OtlpHttpConfig {
    OtlpHttpConfig {
        batch_size: 4,
        max_retries: 0,
        timeout: Duration::from_secs(5),
        service_name: "transcript-test".into(),
        headers: vec![("x-api-key".into(), "k".into())],
        ..OtlpHttpConfig::new(endpoint)
    }
}

fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[test]
fn offline_export_delivers_every_span_over_otlp_http() {
    let receiver = Receiver::start(200);
    let (root, child) = demo();
    let trace = map_run(
        &root.decoded(),
        &mut lookup(&child),
        MapOptions::with_content(true),
    );
    let expected = trace.spans.clone();
    let report = export_otlp_http(trace.spans, &config(receiver.endpoint())).unwrap();
    assert_eq!(report.spans_sent, 12);
    assert_eq!(report.requests, 3, "batches of 4");
    assert!(report.is_complete(), "{report:?}");

    let requests = receiver.take(3);
    for r in &requests {
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(r.content_type, "application/x-protobuf");
        assert_eq!(
            r.api_key.as_deref(),
            Some("k"),
            "configured headers are sent"
        );
        let resource = r.body.resource_spans[0].resource.as_ref().unwrap();
        let service = resource
            .attributes
            .iter()
            .find(|kv| kv.key == "service.name")
            .unwrap();
        assert_eq!(
            service.value.as_ref().unwrap().value,
            Some(any_value::Value::StringValue("transcript-test".into()))
        );
        assert_eq!(
            r.body.resource_spans[0].scope_spans[0]
                .scope
                .as_ref()
                .unwrap()
                .name,
            "transcript-otel"
        );
    }
    let spans = spans_of(&requests);
    assert_eq!(spans.len(), expected.len());
    let trace_id = ids::trace_id(ROOT).to_bytes().to_vec();
    for sent in &expected {
        let got = spans
            .iter()
            .find(|s| s.span_id == sent.span_context.span_id().to_bytes())
            .unwrap_or_else(|| panic!("span {} arrived", sent.name));
        assert_eq!(got.trace_id, trace_id);
        assert_eq!(got.name, sent.name);
        assert_eq!(got.parent_span_id, {
            let p = sent.parent_span_id;
            if p == opentelemetry::trace::SpanId::INVALID {
                Vec::new()
            } else {
                p.to_bytes().to_vec()
            }
        });
        let start = sent
            .start_time
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert_eq!(got.start_time_unix_nano, start);
        assert_eq!(got.attributes.len(), sent.attributes.len());
    }
    let write = spans
        .iter()
        .find(|s| s.name == "execute_tool write")
        .unwrap();
    let status = write.status.as_ref().unwrap();
    assert_eq!(status.code, 2, "STATUS_CODE_ERROR");
    assert_eq!(status.message, "denied");
    let plan = spans
        .iter()
        .find(|s| s.name == "invoke_agent plan")
        .unwrap();
    assert_eq!(
        string_attr(plan, "gen_ai.provider.name").unwrap(),
        "anthropic"
    );
    assert!(
        string_attr(plan, "gen_ai.input.messages")
            .unwrap()
            .contains("Find x")
    );
}

#[test]
fn offline_export_reports_rejected_and_unreachable_endpoints() {
    let receiver = Receiver::start(400);
    let (root, child) = demo();
    let spans = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default()).spans;
    let err = export_otlp_http(spans.clone(), &config(receiver.endpoint())).unwrap_err();
    match err {
        ExportError::Incomplete {
            failed,
            total,
            report,
            ..
        } => {
            assert_eq!((failed, total), (12, 12));
            assert_eq!(report.failures, 3);
        }
        other => panic!("expected Incomplete, got {other}"),
    }
    // The requests did arrive; the receiver refused them.
    assert_eq!(spans_of(&receiver.take(3)).len(), 12);

    let err = export_otlp_http(spans, &config(closed_port())).unwrap_err();
    assert!(
        matches!(err, ExportError::Incomplete { failed: 12, .. }),
        "{err}"
    );
    let err = export_otlp_http(Vec::new(), &config("ftp://example.invalid".into())).unwrap_err();
    assert!(matches!(err, ExportError::InvalidEndpoint { .. }), "{err}");
}

/// Pushes the demo's events as a recording would: the child's events after
/// the parent's call_workflow step started, before it completed.
fn push_demo(sender: &transcript_otel::LiveSender) -> usize {
    let (root, child) = demo();
    let mut pushed = 0;
    for event in &root.events {
        assert!(sender.push(Arc::new(event.clone())));
        pushed += 1;
        if event.child_run_id.is_some() && event.seq == 15 {
            for c in &child.events {
                assert!(sender.push(Arc::new(c.clone())));
                pushed += 1;
            }
        }
    }
    pushed
}

#[test]
fn live_export_arrives_with_the_offline_tree() {
    let receiver = Receiver::start(200);
    let live = LiveExporter::start(
        config(receiver.endpoint()),
        LiveConfig {
            batch_size: 3,
            ..LiveConfig::default()
        },
    )
    .unwrap();
    let pushed = push_demo(&live.sender());
    let report = live.finish();
    assert_eq!(report.events_received, pushed as u64);
    assert_eq!(report.spans_sent, 12, "{report:?}");
    assert!(report.is_complete(), "{report:?}");
    assert!(report.problems.is_empty());

    let requests = receiver.take(report.requests as usize);
    let mut got: Vec<_> = spans_of(&requests)
        .into_iter()
        .map(|s| (s.span_id, s.parent_span_id, s.name))
        .collect();
    let (root, child) = demo();
    let offline = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default());
    let mut want: Vec<_> = offline
        .spans
        .iter()
        .map(|s| {
            let parent = if s.parent_span_id == opentelemetry::trace::SpanId::INVALID {
                Vec::new()
            } else {
                s.parent_span_id.to_bytes().to_vec()
            };
            (
                s.span_context.span_id().to_bytes().to_vec(),
                parent,
                s.name.to_string(),
            )
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn live_export_to_a_dead_endpoint_counts_failures_and_never_fails() {
    let live = LiveExporter::start(config(closed_port()), LiveConfig::default()).unwrap();
    push_demo(&live.sender());
    let report = live.finish();
    assert_eq!(report.spans_sent, 0);
    assert_eq!(report.spans_failed, 12);
    assert!(report.failures >= 1);
    assert!(report.last_error.is_some());
    assert!(!report.is_complete());
}

#[tokio::test(flavor = "current_thread")]
async fn export_works_when_called_from_inside_a_tokio_runtime() {
    // The blocking HTTP client panics if created or dropped inside a runtime;
    // both entry points keep it on their own thread.
    let receiver = Receiver::start_async(200).await;
    let (root, child) = demo();
    let spans = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default()).spans;
    let report = export_otlp_http(spans, &config(receiver.endpoint())).unwrap();
    assert_eq!(report.spans_sent, 12);

    let live = LiveExporter::start(config(receiver.endpoint()), LiveConfig::default()).unwrap();
    push_demo(&live.sender());
    let report = live.finish();
    assert_eq!(report.spans_sent, 12, "{report:?}");
    let requests = receiver.requests().await;
    assert_eq!(requests.len(), 3 + report.requests as usize);
    assert_eq!(spans_of(&requests).len(), 24);
}

/// `http/json`: the same spans as the OTLP JSON encoding (what `write_otlp_json` writes),
/// with `Content-Type: application/json`, to the same path.
#[test]
fn http_json_sends_the_otlp_json_encoding() {
    let receiver = Receiver::start(200);
    let (root, child) = demo();
    let spans = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default()).spans;
    let mut expected = Vec::new();
    transcript_otel::write_otlp_json(spans.clone(), "transcript-test", &mut expected).unwrap();
    let config = OtlpHttpConfig {
        batch_size: 100,
        protocol: transcript_otel::config::Protocol::HttpJson,
        ..config(receiver.endpoint())
    };
    let report = export_otlp_http(spans, &config).unwrap();
    assert_eq!(report.requests, 1);
    let rt = receiver.rt.as_ref().unwrap();
    let requests = rt.block_on(receiver.server.received_requests()).unwrap();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.url.path(), "/v1/traces");
    assert_eq!(
        r.headers.get("content-type").unwrap().to_str().unwrap(),
        "application/json"
    );
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let want: serde_json::Value = serde_json::from_slice(&expected).unwrap();
    assert_eq!(body, want, "the OTLP JSON encoding of the same spans");
    assert!(body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"].is_string());
}

/// `http/json`: a receiver's partial success in the OTLP JSON encoding (`rejectedSpans` an
/// int64, a string in JSON; a number read too) counts the rejected spans as failed and the
/// rest as sent, the receiver's reason kept (header values masked); `{}` rejects none.
#[test]
fn http_json_partial_success_counts_the_rejected_spans() {
    let (root, child) = demo();
    let spans = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default()).spans;
    assert_eq!(spans.len(), 12);
    for (answer, rejected) in [
        (
            r#"{"partialSuccess":{"rejectedSpans":"3","errorMessage":"too big for s3kr1t"}}"#,
            3,
        ),
        (
            r#"{"partialSuccess":{"rejectedSpans":3,"errorMessage":"too big for s3kr1t"}}"#,
            3,
        ),
        ("{}", 0),
        ("", 0),
    ] {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(async {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .and(path("/v1/traces"))
                .respond_with(ResponseTemplate::new(200).set_body_string(answer))
                .mount(&server)
                .await;
            server
        });
        let config = OtlpHttpConfig {
            batch_size: 100,
            protocol: transcript_otel::config::Protocol::HttpJson,
            headers: vec![("x-api-key".into(), "s3kr1t".into())],
            ..config(server.uri())
        };
        match export_otlp_http(spans.clone(), &config) {
            Ok(report) => {
                assert_eq!(rejected, 0, "{answer}");
                assert_eq!(report.spans_sent, 12);
            }
            Err(ExportError::Incomplete {
                failed,
                total,
                cause,
                report,
            }) => {
                assert_eq!((failed, total), (rejected, 12), "{answer}");
                assert_eq!(report.failures, 0, "the request itself did not fail");
                assert!(cause.contains("rejected 3 spans: too big for"), "{cause}");
                assert!(
                    !cause.contains("s3kr1t"),
                    "the header value is masked: {cause}"
                );
            }
            Err(other) => panic!("{answer}: {other}"),
        }
    }
}
