//! Sending spans: OTLP/HTTP protobuf on a dedicated thread, OTLP/JSON to a writer.

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::mapping::MapProblem;

/// `service.name` of the exported resource unless configured otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "transcript";

/// Spans per OTLP request.
pub const DEFAULT_BATCH_SIZE: usize = 512;

/// Why an export could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The endpoint is not an `http://` URL this build can reach.
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Build(String),
    /// The export thread could not be started or died.
    #[error("export thread: {0}")]
    Thread(String),
    /// Some spans were not accepted by the endpoint.
    #[error("{failed} of {total} spans were not exported: {cause}")]
    Incomplete {
        /// Spans not accepted.
        failed: u64,
        /// Spans attempted.
        total: u64,
        /// The last failure.
        cause: String,
        /// Counts of the attempt.
        report: Box<ExportReport>,
    },
    /// Writing OTLP/JSON failed.
    #[error("writing OTLP/JSON: {0}")]
    Io(#[from] std::io::Error),
    /// Encoding OTLP/JSON failed.
    #[error("encoding OTLP/JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// What an export did. Live export never fails the run: its problems end up
/// here, to be reported when the run is over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Spans the endpoint accepted.
    pub spans_sent: u64,
    /// Spans in requests that failed.
    pub spans_failed: u64,
    /// Requests sent (successful or not).
    pub requests: u64,
    /// Failed requests, plus one if the exporter could not be set up.
    pub failures: u64,
    /// Events the live exporter received.
    pub events_received: u64,
    /// Events the live exporter never saw: its queue was full, or the
    /// subscription feeding it lagged. Spans around them may end
    /// "incomplete".
    pub events_dropped: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// The live exporter stopped sending after
    /// [`crate::MAX_CONSECUTIVE_FAILURES`] failed requests in a row; later
    /// spans are counted in `spans_failed` without being sent.
    pub gave_up: bool,
    /// Mapping inconsistencies (the spans were produced regardless).
    pub problems: Vec<MapProblem>,
}

impl ExportReport {
    /// Whether every span was delivered and no event was dropped.
    pub fn is_complete(&self) -> bool {
        self.failures == 0 && self.spans_failed == 0 && self.events_dropped == 0
    }

    fn record(&mut self, spans: usize, outcome: Result<(), String>) {
        self.requests += 1;
        match outcome {
            Ok(()) => self.spans_sent += spans as u64,
            Err(error) => {
                self.failures += 1;
                self.spans_failed += spans as u64;
                self.last_error = Some(error);
            }
        }
    }
}

/// Where the OTLP/HTTP exporter sends, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpHttpConfig {
    /// `http://host:port` (then `/v1/traces` is appended, as the OTLP spec
    /// does for a base endpoint) or a full URL with a path, used as given.
    pub endpoint: String,
    /// Per-request timeout, retries included.
    pub timeout: Duration,
    /// Extra request headers (e.g. an API key for a backend).
    pub headers: Vec<(String, String)>,
    /// `service.name` of the resource.
    pub service_name: String,
    /// Spans per request.
    pub batch_size: usize,
    /// Retries of a failed request (0: one attempt). Retries back off with
    /// the exporter's own policy, within `timeout`.
    pub max_retries: usize,
}

impl OtlpHttpConfig {
    /// Defaults: 10 s timeout, 2 retries, batches of [`DEFAULT_BATCH_SIZE`],
    /// service name [`DEFAULT_SERVICE_NAME`], no headers.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            timeout: Duration::from_secs(10),
            headers: Vec::new(),
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            batch_size: DEFAULT_BATCH_SIZE,
            max_retries: 2,
        }
    }

    /// The URL requests go to.
    pub fn traces_url(&self) -> Result<String, ExportError> {
        traces_url(&self.endpoint)
    }
}

fn traces_url(endpoint: &str) -> Result<String, ExportError> {
    let invalid = |reason: &str| ExportError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
        reason: reason.to_owned(),
    };
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return Err(if endpoint.starts_with("https://") {
            invalid(
                "https is not compiled into this build (no TLS stack); \
                 send to a local collector over http",
            )
        } else {
            invalid("expected an http:// URL")
        });
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.is_empty() {
        return Err(invalid("missing host"));
    }
    if path.is_empty() || path == "/" {
        Ok(format!("http://{authority}/v1/traces"))
    } else {
        Ok(endpoint.to_owned())
    }
}

fn resource(service_name: &str) -> Resource {
    Resource::builder_empty()
        .with_service_name(service_name.to_owned())
        .build()
}

/// Receives batches of finished spans on the export thread.
///
/// Implemented by the OTLP/HTTP exporter; tests and other transports can
/// supply their own through [`crate::LiveExporter::start_with_sink`].
pub trait SpanSink {
    /// Delivers one batch; an error is counted, never propagated to the run.
    fn export(&mut self, batch: Vec<SpanData>) -> Result<(), String>;
}

/// The OTLP/HTTP protobuf exporter. Holds a blocking HTTP client, which must
/// be created, used and dropped outside any tokio runtime: it only ever
/// lives on an export thread of this crate.
pub(crate) struct OtlpHttpSink {
    exporter: opentelemetry_otlp::SpanExporter,
}

impl OtlpHttpSink {
    pub(crate) fn new(config: &OtlpHttpConfig) -> Result<Self, ExportError> {
        // In a binary where reqwest also serves https (the exec crate's HTTP agent), Cargo
        // unifies reqwest's features and every client it builds wants a process-wide rustls
        // crypto provider: install the ring one (idempotent; an already installed provider
        // stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = config.traces_url()?;
        let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(config.timeout)
            .with_headers(headers)
            .with_retry_policy(
                opentelemetry_otlp::RetryPolicy::default().with_max_retries(config.max_retries),
            )
            .build()
            .map_err(|e| ExportError::Build(e.to_string()))?;
        exporter.set_resource(&resource(&config.service_name));
        Ok(Self { exporter })
    }
}

impl SpanSink for OtlpHttpSink {
    fn export(&mut self, batch: Vec<SpanData>) -> Result<(), String> {
        block_on(self.exporter.export(batch)).map_err(|e| e.to_string())
    }
}

/// Sends spans to an OTLP/HTTP endpoint (protobuf), in batches of
/// `config.batch_size`, and waits for the answer.
///
/// The exporter is created, used and dropped on a dedicated thread, so this
/// may be called from anywhere, including from inside a tokio runtime (it
/// blocks the calling thread; from async code call it in `spawn_blocking`).
/// Returns [`ExportError::Incomplete`] if any request failed.
pub fn export_otlp_http(
    spans: Vec<SpanData>,
    config: &OtlpHttpConfig,
) -> Result<ExportReport, ExportError> {
    config.traces_url()?;
    let config = config.clone();
    let worker = thread::Builder::new()
        .name("transcript-otlp-export".into())
        .spawn(move || -> Result<ExportReport, ExportError> {
            let mut sink = OtlpHttpSink::new(&config)?;
            Ok(send_batches(&mut sink, spans, config.batch_size))
        })
        .map_err(|e| ExportError::Thread(e.to_string()))?;
    let report = worker
        .join()
        .map_err(|_| ExportError::Thread("the export thread panicked".into()))??;
    if report.failures > 0 {
        return Err(ExportError::Incomplete {
            failed: report.spans_failed,
            total: report.spans_failed + report.spans_sent,
            cause: report.last_error.clone().unwrap_or_default(),
            report: Box::new(report),
        });
    }
    Ok(report)
}

/// Sends `spans` through `sink` in batches of `batch_size` (at least 1).
fn send_batches(
    sink: &mut dyn SpanSink,
    mut spans: Vec<SpanData>,
    batch_size: usize,
) -> ExportReport {
    let mut report = ExportReport::default();
    let batch_size = batch_size.max(1);
    while !spans.is_empty() {
        let rest = spans.split_off(spans.len().min(batch_size));
        let batch = std::mem::replace(&mut spans, rest);
        let n = batch.len();
        report.record(n, sink.export(batch));
    }
    report
}

/// The OTLP request for `spans` under a resource with `service_name`.
pub fn to_otlp_request(spans: Vec<SpanData>, service_name: &str) -> ExportTraceServiceRequest {
    let resource = ResourceAttributesWithSchema::from(&resource(service_name));
    ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(spans, &resource),
    }
}

/// Writes `spans` as one OTLP/JSON `ExportTraceServiceRequest` on one line
/// (the JSON Protobuf encoding: hex trace and span ids, camelCase fields,
/// 64-bit integers as strings), as file-based collectors read it.
pub fn write_otlp_json<W: Write>(
    spans: Vec<SpanData>,
    service_name: &str,
    mut out: W,
) -> Result<(), ExportError> {
    let request = to_otlp_request(spans, service_name);
    serde_json::to_writer(&mut out, &request)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Wakes the export thread parked in [`block_on`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives a future on the current (non-async) thread. The OTLP exporter's
/// future completes through the blocking client; outside a tokio runtime
/// its retry back-off sleeps the thread, so parking here is correct.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_get_the_traces_path_only_when_they_have_none() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://localhost:6006/v1/traces").unwrap(),
            "http://localhost:6006/v1/traces"
        );
        assert!(matches!(
            traces_url("https://example.invalid"),
            Err(ExportError::InvalidEndpoint { reason, .. }) if reason.contains("https")
        ));
        assert!(traces_url("ftp://x").is_err());
        assert!(traces_url("http:///v1/traces").is_err());
    }

    #[test]
    fn block_on_drives_a_future_woken_from_another_thread() {
        struct Flag(Arc<std::sync::atomic::AtomicBool>, bool);
        impl Future for Flag {
            type Output = u8;
            fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u8> {
                if self.0.load(std::sync::atomic::Ordering::SeqCst) {
                    return Poll::Ready(7);
                }
                if !self.1 {
                    self.1 = true;
                    let flag = self.0.clone();
                    let waker = cx.waker().clone();
                    thread::spawn(move || {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                        waker.wake();
                    });
                }
                Poll::Pending
            }
        }
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        assert_eq!(block_on(Flag(flag, false)), 7);
    }
}
