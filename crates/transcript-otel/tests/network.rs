//! OTLP/HTTP export to a receiver on 127.0.0.1 inside this process, which
//! decodes the requests with the official protobuf definitions.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
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

/// One decoded request.
struct Received {
    path: String,
    content_type: String,
    body: ExportTraceServiceRequest,
}

/// A minimal HTTP/1.1 server: reads requests (Content-Length bodies, keep-alive),
/// decodes them, answers `status` with an empty body.
struct Receiver {
    addr: SocketAddr,
    requests: mpsc::Receiver<Received>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Receiver {
    fn start(status: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, requests) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let accept = thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let tx = tx.clone();
                thread::spawn(move || serve(stream, status, tx));
            }
        });
        Self {
            addr,
            requests,
            stop,
            accept: Some(accept),
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next `n` requests (bounded wait: the exporter already returned).
    fn take(&self, n: usize) -> Vec<Received> {
        (0..n)
            .map(|_| self.requests.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn serve(stream: TcpStream, status: &str, tx: mpsc::Sender<Received>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut content_length = 0usize;
        let mut content_type = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => content_length = value.trim().parse().unwrap(),
                "content-type" => content_type = value.trim().to_owned(),
                "transfer-encoding" => panic!("chunked bodies are not expected"),
                _ => {}
            }
        }
        let mut body = vec![0; content_length];
        reader.read_exact(&mut body).unwrap();
        let body = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let _ = tx.send(Received {
            path,
            content_type,
            body,
        });
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
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
    let receiver = Receiver::start("200 OK");
    let (root, child) = demo();
    let trace = map_run(
        &root.decoded(),
        &mut lookup(&child),
        MapOptions::with_content(true),
    );
    let expected = trace.spans.clone();
    let report = export_otlp_http(trace.spans, &config(receiver.endpoint())).unwrap();
    assert_eq!(report.spans_sent, 10);
    assert_eq!(report.requests, 3, "batches of 4");
    assert!(report.is_complete(), "{report:?}");

    let requests = receiver.take(3);
    for r in &requests {
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(r.content_type, "application/x-protobuf");
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
    assert_eq!(string_attr(plan, "gen_ai.provider.name").unwrap(), "claude");
    assert!(
        string_attr(plan, "gen_ai.input.messages")
            .unwrap()
            .contains("Find x")
    );
}

#[test]
fn offline_export_reports_rejected_and_unreachable_endpoints() {
    let receiver = Receiver::start("400 Bad Request");
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
            assert_eq!((failed, total), (10, 10));
            assert_eq!(report.failures, 3);
        }
        other => panic!("expected Incomplete, got {other}"),
    }
    // The requests did arrive; the receiver refused them.
    assert_eq!(spans_of(&receiver.take(3)).len(), 10);

    let err = export_otlp_http(spans, &config(closed_port())).unwrap_err();
    assert!(
        matches!(err, ExportError::Incomplete { failed: 10, .. }),
        "{err}"
    );
    let err = export_otlp_http(Vec::new(), &config("https://example.invalid".into())).unwrap_err();
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
    let receiver = Receiver::start("200 OK");
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
    assert_eq!(report.spans_sent, 10, "{report:?}");
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
    assert_eq!(report.spans_failed, 10);
    assert!(report.failures >= 1);
    assert!(report.last_error.is_some());
    assert!(!report.is_complete());
}

#[tokio::test(flavor = "current_thread")]
async fn export_works_when_called_from_inside_a_tokio_runtime() {
    // The blocking HTTP client panics if created or dropped inside a runtime;
    // both entry points keep it on their own thread.
    let receiver = Receiver::start("200 OK");
    let (root, child) = demo();
    let spans = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default()).spans;
    let report = export_otlp_http(spans, &config(receiver.endpoint())).unwrap();
    assert_eq!(report.spans_sent, 10);

    let live = LiveExporter::start(config(receiver.endpoint()), LiveConfig::default()).unwrap();
    push_demo(&live.sender());
    let report = live.finish();
    assert_eq!(report.spans_sent, 10, "{report:?}");
    assert_eq!(
        spans_of(&receiver.take(3 + report.requests as usize)).len(),
        20
    );
}
