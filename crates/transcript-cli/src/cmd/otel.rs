//! OpenTelemetry export: stored runs (`export --format otlp|otlp-json`) and
//! live runs (`run --otlp-endpoint`), through `transcript-otel`.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use transcript_domain::{DecodedEvent, RecorderFactory, RunId};
use transcript_otel::{
    DEFAULT_SERVICE_NAME, ExportReport, LiveConfig, LiveExporter, LiveSender, MapOptions,
    OtlpHttpConfig, export_otlp_http, forward, map_run, write_otlp_json,
};

use crate::CliError;
use crate::cmd::tap::TapFactory;

/// `export --format otlp|otlp-json`.
pub fn export(
    events: &[DecodedEvent],
    lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    network: bool,
    endpoint: Option<String>,
    capture_content: bool,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let trace = map_run(events, lookup, MapOptions::with_content(capture_content));
    for p in &trace.problems {
        eprintln!("transcript: warning: {p}");
    }
    let spans = trace.spans.len();
    if network {
        let endpoint = endpoint
            .ok_or_else(|| CliError::Usage("--format otlp needs --endpoint URL".to_owned()))?;
        let report = export_otlp_http(trace.spans, &OtlpHttpConfig::new(endpoint.clone()))
            .map_err(|e| CliError::Failed(format!("OTLP export to {endpoint} failed: {e}")))?;
        eprintln!(
            "transcript: sent {} of {spans} spans to {endpoint} in {} requests",
            report.spans_sent, report.requests
        );
        return Ok(());
    }
    match output {
        Some(p) if p.as_os_str() != "-" => {
            // 0o600, no symlink or FIFO followed: the spans can hold prompts and outputs.
            let file = crate::cmd::export::create_private(p)?;
            write_otlp_json(
                trace.spans,
                DEFAULT_SERVICE_NAME,
                std::io::BufWriter::new(file),
            )
            .map_err(|e| CliError::Failed(e.to_string()))?;
        }
        _ => {
            write_otlp_json(trace.spans, DEFAULT_SERVICE_NAME, &mut *out)
                .map_err(|e| CliError::Failed(e.to_string()))?;
            let _ = writeln!(out);
        }
    }
    eprintln!("transcript: wrote {spans} spans as OTLP/JSON");
    Ok(())
}

/// A recorder factory that also feeds every run it opens (root and child runs) to the live
/// exporter. Recording never waits on the exporter: its queue drops and counts when full.
pub fn live_factory(inner: Arc<dyn RecorderFactory>, sender: LiveSender) -> TapFactory {
    TapFactory::new(
        inner,
        Box::new(move |subscription| {
            let sender = sender.clone();
            Some(tokio::spawn(async move {
                forward(subscription, sender).await;
            }))
        }),
    )
}

/// Starts a live exporter.
pub fn start_live(endpoint: &str, capture_content: bool) -> Result<LiveExporter, CliError> {
    LiveExporter::start(
        OtlpHttpConfig::new(endpoint.to_owned()),
        LiveConfig {
            options: MapOptions::with_content(capture_content),
            ..LiveConfig::default()
        },
    )
    .map_err(|e| CliError::Usage(format!("--otlp-endpoint {endpoint}: {e}")))
}

/// Reports the live export at the end of a run (never fails it).
pub fn report_live(endpoint: &str, report: &ExportReport) {
    if report.is_complete() {
        eprintln!(
            "transcript: exported {} spans to {endpoint}",
            report.spans_sent
        );
    } else {
        eprintln!(
            "transcript: warning: OTLP export to {endpoint} incomplete: {} spans sent, {} failed, {} failed requests, {} events dropped{}",
            report.spans_sent,
            report.spans_failed,
            report.failures,
            report.events_dropped,
            report
                .last_error
                .as_deref()
                .map(|e| format!(" (last error: {e})"))
                .unwrap_or_default()
        );
    }
}
