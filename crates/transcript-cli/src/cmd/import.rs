//! `transcript import`: raw provider logs to canonical transcripts, one run
//! per input, with `run.*`, a single agent step, `message.assistant` turns
//! and agent-emitted `tool.*` events. Bad input writes nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::{
    EventDraft, EventMask, Payload, RecorderFactory, RunIdGenerator, StepPayload,
};
use transcript_infra::JsonlRecorderFactory;
use transcript_providers::{DiagnosticKind, Output, Provider, detect, normalize};

use crate::CliError;

/// How much of a log is looked at to detect its provider.
const DETECT_PREFIX: usize = 64 * 1024;

/// What one import produced.
#[derive(Debug)]
pub struct Imported {
    /// The input file.
    pub input: PathBuf,
    /// The new run's id.
    pub run_id: transcript_domain::RunId,
    /// Its transcript.
    pub path: PathBuf,
    /// The provider used.
    pub provider: Provider,
    /// Events written.
    pub events: u64,
    /// Diagnostics by kind (not transcript events).
    pub diagnostics: usize,
}

/// Import settings.
pub struct ImportContext {
    /// Storage directory.
    pub storage: PathBuf,
    /// `None` for auto-detection.
    pub provider: Option<Provider>,
    /// Masking stage.
    pub mask: Option<Arc<dyn EventMask>>,
    /// Sequential ids and a manual clock.
    pub deterministic: bool,
}

/// Parses the `<provider|auto>` argument.
pub fn parse_provider(text: &str) -> Result<Option<Provider>, CliError> {
    if text == "auto" {
        return Ok(None);
    }
    Provider::from_name(text).map(Some).map_err(|e| {
        CliError::Usage(format!(
            "{e} (expected auto, claude, codex, gemini, copilot, openai or anthropic)"
        ))
    })
}

/// Runs `import`: one line per imported run on stdout (`run_id<TAB>provider<TAB>path`), a
/// summary per input and every failure on stderr.
pub fn run(
    ctx: &ImportContext,
    logs: &[PathBuf],
    redactor: Option<&transcript_redact::Redactor>,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    let (done, failed) = runtime.block_on(import_all(ctx, logs));
    for i in &done {
        crate::exit::stdout_result(writeln!(
            out,
            "{}\t{}\t{}",
            i.run_id,
            i.provider,
            i.path.display()
        ))?;
        crate::diag!(
            "transcript: imported {} ({}): {} events, {} diagnostics",
            i.input.display(),
            i.provider,
            i.events,
            i.diagnostics
        );
    }
    if let Some(r) = redactor {
        crate::diag!("transcript: {} masks applied", r.masks_made());
    }
    for e in &failed {
        crate::diag!("transcript: {}", crate::style::one_line(&e.to_string()));
    }
    if !failed.is_empty() {
        return Err(CliError::Invalid(format!(
            "{} of {} inputs not imported",
            failed.len(),
            logs.len()
        )));
    }
    Ok(())
}

/// Imports every input; returns what was written and the per-file failures.
pub async fn import_all(ctx: &ImportContext, inputs: &[PathBuf]) -> (Vec<Imported>, Vec<CliError>) {
    let (clock, ids) = crate::source::clock_and_ids(ctx.deterministic);
    let mut factory = JsonlRecorderFactory::new(&ctx.storage).with_clock(clock);
    if let Some(mask) = &ctx.mask {
        factory = factory.with_mask(mask.clone());
    }
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for input in inputs {
        match import_one(ctx, &factory, ids.as_ref(), input).await {
            Ok(i) => done.push(i),
            Err(e) => failed.push(e),
        }
    }
    (done, failed)
}

fn bad(input: &Path, message: impl Into<String>) -> CliError {
    CliError::Read {
        path: input.to_path_buf(),
        message: message.into(),
    }
}

async fn import_one(
    ctx: &ImportContext,
    factory: &JsonlRecorderFactory,
    ids: &dyn RunIdGenerator,
    input: &Path,
) -> Result<Imported, CliError> {
    let bytes = std::fs::read(input).map_err(|e| bad(input, format!("cannot read: {e}")))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(bad(input, "empty file: nothing to import"));
    }
    let provider = match ctx.provider {
        Some(p) => p,
        None => detect(&bytes[..bytes.len().min(DETECT_PREFIX)])
            .or_else(|| detect(&bytes))
            .ok_or_else(|| bad(input, "unknown format: not the output of a supported agent CLI or API (name the provider instead of auto)"))?,
    };
    let outputs = normalize(provider, &bytes);
    let content = outputs.iter().filter(|o| o.to_payload().is_some()).count();
    let diagnostics: Vec<_> = outputs.iter().filter_map(Output::as_diagnostic).collect();
    if content == 0 {
        let malformed = diagnostics
            .iter()
            .filter(|d| d.kind == DiagnosticKind::Malformed)
            .count();
        return Err(bad(
            input,
            format!(
                "no {provider} agent output found ({} diagnostics, {malformed} malformed records)",
                diagnostics.len()
            ),
        ));
    }
    let run_id = ids.next_run_id();
    let recorder = factory
        .create(run_id, None)
        .await
        .map_err(|e| bad(input, format!("cannot open transcript: {e}")))?;
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "import".to_owned());
    let workflow = StepPayload::new(format!("import {name}"), "workflow");
    let step = StepPayload::new(provider.name(), "agent");
    let provider_errors: Vec<String> = diagnostics
        .iter()
        .filter(|d| d.kind == DiagnosticKind::ProviderError)
        .map(|d| d.to_string())
        .collect();
    let mut drafts = vec![
        EventDraft::run_level(Payload::RunStarted(workflow.clone())),
        EventDraft::new("agent", 0, Payload::StepStarted(step.clone())),
    ];
    drafts.extend(
        outputs
            .iter()
            .filter_map(Output::to_payload)
            .map(|p| EventDraft::new("agent", 0, p)),
    );
    let error = (!provider_errors.is_empty()).then(|| provider_errors.join("; "));
    let completed = match &error {
        Some(e) => step.with_error(e.clone()),
        None => step,
    };
    drafts.push(EventDraft::new(
        "agent",
        0,
        Payload::StepCompleted(completed),
    ));
    drafts.push(EventDraft::run_level(Payload::RunCompleted(match &error {
        Some(e) => workflow.with_error(format!("agent step failed: {e}")),
        None => workflow,
    })));
    let mut events = 0;
    for draft in drafts {
        recorder
            .record(draft)
            .await
            .map_err(|e| bad(input, format!("writing the transcript failed: {e}")))?;
        events += 1;
    }
    recorder
        .close()
        .await
        .map_err(|e| bad(input, format!("closing the transcript failed: {e}")))?;
    Ok(Imported {
        input: input.to_path_buf(),
        run_id,
        path: ctx.storage.join(run_id.file_name()),
        provider,
        events,
        diagnostics: diagnostics.len(),
    })
}
