//! Sending spans: OTLP/HTTP protobuf on a dedicated thread, OTLP/JSON to a writer.

use std::io::Write;
use std::thread;

use opentelemetry::KeyValue;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;

use crate::config::OtlpHttpConfig;
use crate::mapping::MapProblem;
use crate::transport::OtlpHttpSink;

/// `service.name` of the exported resource unless configured otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "transcript";

/// Spans per OTLP request.
pub const DEFAULT_BATCH_SIZE: usize = 512;

/// Why an export could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given (a password in it masked).
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting (flag or `OTEL_*` variable) is invalid; the message names it and never
    /// quotes a header value.
    #[error("OTLP settings: {0}")]
    Config(String),
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

/// The resource of the exported spans: `service.name` and the configured attributes.
pub(crate) fn resource(config: &OtlpHttpConfig) -> Resource {
    resource_of(&config.service_name, &config.resource_attributes)
}

fn resource_of(service_name: &str, attributes: &[(String, String)]) -> Resource {
    Resource::builder_empty()
        .with_attributes(
            attributes
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(service_name.to_owned())
        .build()
}

fn service_resource(service_name: &str) -> Resource {
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
    config.check()?;
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
    to_otlp_request_for(spans, &service_resource(service_name))
}

/// The OTLP request for `spans` under `resource`.
pub(crate) fn to_otlp_request_for(
    spans: Vec<SpanData>,
    resource: &Resource,
) -> ExportTraceServiceRequest {
    let resource = ResourceAttributesWithSchema::from(resource);
    ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(spans, &resource),
    }
}

/// [`write_otlp_json`] under a resource with further attributes (e.g. from
/// [`crate::config::ResourceSettings::resolve`]).
pub fn write_otlp_json_with_resource<W: Write>(
    spans: Vec<SpanData>,
    resource: &crate::config::ResourceSettings,
    mut out: W,
) -> Result<(), ExportError> {
    let request = to_otlp_request_for(
        spans,
        &resource_of(&resource.service_name, &resource.attributes),
    );
    serde_json::to_writer(&mut out, &request)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
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
