//! OpenTelemetry export: stored runs (`export --format otlp|otlp-json`) and
//! live runs (`run --otlp-endpoint`), through `transcript-otel`.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use transcript_domain::{DecodedEvent, RecorderFactory, RunId};
use transcript_otel::config::ResourceSettings;
use transcript_otel::{
    ExportError, ExportReport, LiveConfig, LiveExporter, LiveSender, MapOptions, OtlpFlags,
    OtlpHttpConfig, export_otlp_http, forward, map_run, write_otlp_json_with_resource,
};
use transcript_providers::Pricing;

use crate::CliError;
use crate::cmd::tap::TapFactory;

/// The OTLP settings: `flags` over the process environment (`OTEL_EXPORTER_OTLP_*`,
/// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`); `None` when no endpoint is set anywhere.
/// A bad flag is a usage error (an unreadable `--otlp-certificate`: invalid input, exit 3)
/// whose message never quotes a header value. A bad environment value is warned about here,
/// once, and ignored (the SDK specification's rule): it never stops a command.
pub fn resolve(flags: OtlpFlags) -> Result<Option<OtlpHttpConfig>, CliError> {
    let config = OtlpHttpConfig::resolve(&flags, &|name| std::env::var(name).ok())
        .map_err(settings_error)?;
    for note in config.iter().flat_map(|c| &c.ignored) {
        crate::diag!("transcript: warning: {note}");
    }
    Ok(config)
}

/// The CLI error of an OTLP settings error: an unreadable file is invalid input (3), the
/// rest usage errors (2).
fn settings_error(error: ExportError) -> CliError {
    match error {
        ExportError::Unreadable { path, cause } => CliError::Read {
            path,
            message: cause,
        },
        other => CliError::Usage(other.to_string()),
    }
}

/// What the summary line adds about ignored settings: `; ignored: …` or nothing.
fn ignored_suffix(config: &OtlpHttpConfig) -> String {
    if config.ignored.is_empty() {
        String::new()
    } else {
        format!("; settings ignored: {}", config.ignored.join("; "))
    }
}

/// What the mapping puts on spans: content when asked, and the cost of every turn whose
/// provider reported none, priced from the embedded LiteLLM table (the one `receipts` uses;
/// an unknown model gets no cost attribute, never 0).
fn map_options(capture_content: bool) -> MapOptions {
    map_options_priced(capture_content, Arc::new(Pricing::embedded().clone()))
}

/// [`map_options`] with the price table `pricing` (`export --pricing FILE`).
fn map_options_priced(capture_content: bool, pricing: Arc<Pricing>) -> MapOptions {
    MapOptions::with_content(capture_content).with_pricing(Arc::new(move |model, usage| {
        pricing.cost(model, usage).map(|c| c.usd)
    }))
}

/// What `export --format otlp|otlp-json` sends where.
pub struct OtlpExport<'a> {
    /// Send over OTLP/HTTP (`otlp`) instead of writing OTLP JSON (`otlp-json`).
    pub network: bool,
    /// The transport flags (the environment fills in the rest).
    pub flags: &'a OtlpFlags,
    /// Put prompts and outputs into span attributes.
    pub capture_content: bool,
    /// The OTLP JSON output file (`-` or none: stdout).
    pub output: Option<&'a Path>,
    /// The price table for turns whose provider reported no cost.
    pub pricing: Arc<Pricing>,
}

/// `export --format otlp|otlp-json`.
pub fn export(
    events: &[DecodedEvent],
    lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    how: &OtlpExport<'_>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let OtlpExport {
        network,
        flags,
        capture_content,
        output,
        ..
    } = *how;
    let trace = map_run(
        events,
        lookup,
        map_options_priced(capture_content, how.pricing.clone()),
    );
    for p in &trace.problems {
        crate::diag!("transcript: warning: {p}");
    }
    let spans = trace.spans.len();
    if network {
        let config = resolve(flags.clone())?.ok_or_else(|| {
            CliError::Usage(
                "--format otlp needs --endpoint URL (or OTEL_EXPORTER_OTLP_ENDPOINT)".to_owned(),
            )
        })?;
        let endpoint = config.display_traces_url();
        let report = export_otlp_http(trace.spans, &config).map_err(|e| {
            CliError::Failed(config.mask(&format!("OTLP export to {endpoint} failed: {e}")))
        })?;
        crate::diag!(
            "transcript: sent {} of {spans} spans to {endpoint} ({}) in {} requests{}",
            report.spans_sent,
            config.protocol.as_str(),
            report.requests,
            ignored_suffix(&config)
        );
        return Ok(());
    }
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES apply to files too.
    let mut ignored = Vec::new();
    let resource = ResourceSettings::resolve_noting(&|name| std::env::var(name).ok(), &mut ignored);
    for note in &ignored {
        crate::diag!("transcript: warning: {note}");
    }
    match output {
        Some(p) if p.as_os_str() != "-" => {
            // 0o600, no symlink or FIFO followed: the spans can hold prompts and outputs.
            let file = crate::output_file::create_private(p)?;
            write_otlp_json_with_resource(trace.spans, &resource, std::io::BufWriter::new(file))
                .map_err(|e| CliError::Failed(e.to_string()))?;
        }
        _ => {
            write_otlp_json_with_resource(trace.spans, &resource, &mut *out)
                .map_err(|e| CliError::Failed(e.to_string()))?;
            let _ = writeln!(out);
        }
    }
    crate::diag!("transcript: wrote {spans} spans as OTLP/JSON");
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

/// Starts a live exporter; `Err(why)` when the settings leave nothing to export to (an
/// endpoint that is not a URL), which never stops the run: the caller runs without export
/// and says why in the summary line.
pub fn start_live(config: &OtlpHttpConfig, capture_content: bool) -> Result<LiveExporter, String> {
    LiveExporter::start(
        config.clone(),
        LiveConfig {
            options: map_options(capture_content),
            ..LiveConfig::default()
        },
    )
    .map_err(|e| config.mask(&e.to_string()))
}

/// The summary line of a run whose live export could not start.
pub fn report_live_off(config: &OtlpHttpConfig, why: &str) {
    crate::diag!(
        "transcript: warning: OTLP export off: {why}{}",
        ignored_suffix(config)
    );
}

/// Reports the live export at the end of a run (never fails it): the full URL posted to,
/// and any setting of the environment that was ignored.
pub fn report_live(config: &OtlpHttpConfig, report: &ExportReport) {
    let endpoint = config.display_traces_url();
    let ignored = ignored_suffix(config);
    if report.is_complete() {
        crate::diag!(
            "transcript: exported {} spans to {endpoint} ({}){ignored}",
            report.spans_sent,
            config.protocol.as_str()
        );
    } else {
        crate::diag!(
            "transcript: warning: OTLP export to {endpoint} incomplete: {} spans sent, {} failed, {} failed requests, {} events dropped{}{ignored}",
            report.spans_sent,
            report.spans_failed,
            report.failures,
            report.events_dropped,
            report
                .last_error
                .as_deref()
                .map(|e| format!(" (last error: {})", config.mask(e)))
                .unwrap_or_default()
        );
    }
}
