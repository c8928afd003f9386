//! Sending spans: OTLP/HTTP protobuf on a dedicated thread, OTLP/JSON to a writer.

use std::io::Write;
use std::thread;

use opentelemetry_sdk::trace::SpanData;

use crate::config::OtlpHttpConfig;
use crate::live::MAX_CONSECUTIVE_FAILURES;
use crate::outcome::{ExportError, ExportReport, SpanSink};
use crate::request::{resource_of, to_otlp_request, to_otlp_request_for};

/// Sends spans to an OTLP endpoint (OTLP/HTTP protobuf or JSON, or OTLP/gRPC, by
/// `config.protocol`), in batches of
/// `config.batch_size`, and waits for the answer.
///
/// The exporter is created, used and dropped on a dedicated thread, so this
/// may be called from anywhere, including from inside a tokio runtime (it
/// blocks the calling thread; from async code call it in `spawn_blocking`).
/// Returns [`ExportError::Incomplete`] if any request failed or the receiver rejected spans.
pub fn export_otlp_http(
    spans: Vec<SpanData>,
    config: &OtlpHttpConfig,
) -> Result<ExportReport, ExportError> {
    config.check()?;
    let config = config.clone();
    let worker = thread::Builder::new()
        .name("transcript-otlp-export".into())
        .spawn(move || -> Result<ExportReport, ExportError> {
            let mut sink = crate::grpc::sink_for(&config)?;
            Ok(send_batches(sink.as_mut(), spans, config.batch_size))
        })
        .map_err(|e| ExportError::Thread(e.to_string()))?;
    let report = worker
        .join()
        .map_err(|_| ExportError::Thread("the export thread panicked".into()))??;
    if report.failures > 0 || report.spans_failed > 0 {
        return Err(ExportError::Incomplete {
            failed: report.spans_failed,
            total: report.spans_failed + report.spans_sent,
            cause: report.last_error.clone().unwrap_or_default(),
            report: Box::new(report),
        });
    }
    Ok(report)
}

/// Sends `spans` through `sink` in batches of `batch_size` (at least 1). After
/// [`MAX_CONSECUTIVE_FAILURES`] failed requests in a row it gives up, as live export does:
/// the rest is counted as failed, unsent, so an endpoint that never answers costs at most
/// that many timeouts, not one per batch.
fn send_batches(
    sink: &mut dyn SpanSink,
    mut spans: Vec<SpanData>,
    batch_size: usize,
) -> ExportReport {
    let mut report = ExportReport::default();
    let batch_size = batch_size.max(1);
    let mut streak = 0;
    while !spans.is_empty() {
        if streak >= MAX_CONSECUTIVE_FAILURES {
            report.spans_failed += spans.len() as u64;
            report.gave_up = true;
            report.last_error = report.last_error.take().map(|e| {
                format!("{e} (gave up after {MAX_CONSECUTIVE_FAILURES} failed requests in a row)")
            });
            break;
        }
        let rest = spans.split_off(spans.len().min(batch_size));
        let batch = std::mem::replace(&mut spans, rest);
        let n = batch.len();
        let outcome = sink.export(batch);
        streak = if outcome.is_err() { streak + 1 } else { 0 };
        report.record(n, outcome);
    }
    report
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
