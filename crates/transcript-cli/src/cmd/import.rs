//! `transcript import`: raw provider logs to canonical transcripts, one run
//! per input, with `run.*`, a single agent step, `message.assistant` turns
//! and agent-emitted `tool.*` events. Bad input writes nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::{
    EventDraft, EventMask, Payload, RecorderFactory, RunIdGenerator, StepPayload,
};
use transcript_infra::JsonlRecorderFactory;
use transcript_providers::{DiagnosticKind, Provider, detect};

use crate::CliError;

/// How much of a log is looked at to detect its provider (detection never reads further).
const DETECT_PREFIX: usize = 1024 * 1024;

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

/// How many bytes are read per step: memory stays bounded by this plus the normalizer's own
/// line cap ([`transcript_domain::MAX_LINE_BYTES`]), whatever the input's size (`/dev/zero`).
const CHUNK: usize = 64 * 1024;

/// Reads up to `limit` bytes (fewer at end of input).
fn read_prefix(file: &mut std::fs::File, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut prefix = Vec::with_capacity(limit.min(CHUNK));
    file.by_ref().take(limit as u64).read_to_end(&mut prefix)?;
    Ok(prefix)
}

/// Diagnostics summarised per kind: how many, and the first one in full.
#[derive(Default)]
struct DiagnosticSummary {
    kinds: std::collections::BTreeMap<&'static str, (usize, String)>,
    total: usize,
    provider_errors: Vec<String>,
}

impl DiagnosticSummary {
    fn add(&mut self, d: &transcript_providers::Diagnostic) {
        self.total += 1;
        let entry = self
            .kinds
            .entry(d.kind.as_str())
            .or_insert_with(|| (0, d.to_string()));
        entry.0 += 1;
        // A few are enough to say why the step failed; the count says how many there were.
        if d.kind == DiagnosticKind::ProviderError && self.provider_errors.len() < 8 {
            self.provider_errors.push(d.to_string());
        }
    }

    fn malformed(&self) -> usize {
        self.kinds.get("malformed").map_or(0, |(n, _)| *n)
    }
}

/// The transcript of one import, opened when the first content arrives (bad input writes
/// nothing) and fed as the input streams in.
struct ImportWriter<'a> {
    factory: &'a JsonlRecorderFactory,
    ids: &'a dyn RunIdGenerator,
    input: &'a Path,
    workflow: StepPayload,
    step: StepPayload,
    open: Option<(
        transcript_domain::RunId,
        Arc<dyn transcript_domain::Recorder>,
    )>,
    events: u64,
}

impl ImportWriter<'_> {
    async fn record(&mut self, payload: Payload) -> Result<(), CliError> {
        if self.open.is_none() {
            let run_id = self.ids.next_run_id();
            let recorder = self
                .factory
                .create(run_id, None)
                .await
                .map_err(|e| bad(self.input, format!("cannot open transcript: {e}")))?;
            self.open = Some((run_id, recorder));
            self.write(EventDraft::run_level(Payload::RunStarted(
                self.workflow.clone(),
            )))
            .await?;
            self.write(EventDraft::new(
                "agent",
                0,
                Payload::StepStarted(self.step.clone()),
            ))
            .await?;
        }
        self.write(EventDraft::new("agent", 0, payload)).await
    }

    async fn write(&mut self, draft: EventDraft) -> Result<(), CliError> {
        let Some((_, recorder)) = &self.open else {
            return Ok(());
        };
        recorder
            .record(draft)
            .await
            .map_err(|e| bad(self.input, format!("writing the transcript failed: {e}")))?;
        self.events += 1;
        Ok(())
    }
}

async fn import_one(
    ctx: &ImportContext,
    factory: &JsonlRecorderFactory,
    ids: &dyn RunIdGenerator,
    input: &Path,
) -> Result<Imported, CliError> {
    use std::io::Read;
    let mut file =
        std::fs::File::open(input).map_err(|e| bad(input, format!("cannot read: {e}")))?;
    let read_err = |e: std::io::Error| bad(input, format!("cannot read: {e}"));
    let prefix = read_prefix(&mut file, DETECT_PREFIX).map_err(read_err)?;
    let short = prefix.len() < DETECT_PREFIX;
    if short && prefix.iter().all(u8::is_ascii_whitespace) {
        return Err(bad(input, "empty file: nothing to import"));
    }
    let provider = match ctx.provider {
        Some(p) => p,
        None => detect(&prefix).ok_or_else(|| {
            bad(
                input,
                format!(
                    "unknown format: the first {} bytes are not the output of a supported agent CLI or API (name the provider instead of auto)",
                    prefix.len()
                ),
            )
        })?,
    };
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "import".to_owned());
    let mut writer = ImportWriter {
        factory,
        ids,
        input,
        workflow: StepPayload::new(format!("import {name}"), "workflow"),
        step: StepPayload::new(provider.name(), "agent"),
        open: None,
        events: 0,
    };
    let mut normalizer = provider.normalizer();
    let mut diagnostics = DiagnosticSummary::default();
    let mut outputs = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    let mut pending: Option<Vec<u8>> = Some(prefix);
    loop {
        let done = match pending.take() {
            Some(bytes) => {
                normalizer.feed(&bytes, &mut outputs);
                false
            }
            None => match file.read(&mut chunk).map_err(read_err)? {
                0 => {
                    normalizer.finish(&mut outputs);
                    true
                }
                n => {
                    normalizer.feed(&chunk[..n], &mut outputs);
                    false
                }
            },
        };
        for output in outputs.drain(..) {
            match output.to_payload() {
                Some(payload) => writer.record(payload).await?,
                None => {
                    if let Some(d) = output.as_diagnostic() {
                        diagnostics.add(d);
                    }
                }
            }
        }
        if done {
            break;
        }
    }
    let Some((run_id, recorder)) = writer.open.clone() else {
        let kinds: Vec<String> = diagnostics
            .kinds
            .iter()
            .map(|(kind, (n, first))| format!("{n} {kind} (first: {first})"))
            .collect();
        return Err(bad(
            input,
            format!(
                "no {provider} agent output found ({} diagnostics, {} malformed records{}{})",
                diagnostics.total,
                diagnostics.malformed(),
                if kinds.is_empty() { "" } else { ": " },
                kinds.join("; ")
            ),
        ));
    };
    let error =
        (!diagnostics.provider_errors.is_empty()).then(|| diagnostics.provider_errors.join("; "));
    let completed = match &error {
        Some(e) => writer.step.clone().with_error(e.clone()),
        None => writer.step.clone(),
    };
    writer
        .write(EventDraft::new(
            "agent",
            0,
            Payload::StepCompleted(completed),
        ))
        .await?;
    let run_completed = match &error {
        Some(e) => writer
            .workflow
            .clone()
            .with_error(format!("agent step failed: {e}")),
        None => writer.workflow.clone(),
    };
    writer
        .write(EventDraft::run_level(Payload::RunCompleted(run_completed)))
        .await?;
    recorder
        .close()
        .await
        .map_err(|e| bad(input, format!("closing the transcript failed: {e}")))?;
    for (kind, (n, first)) in &diagnostics.kinds {
        crate::diag!(
            "transcript: {}: {n} {kind} diagnostic(s), first: {}",
            input.display(),
            crate::style::one_line(first)
        );
    }
    Ok(Imported {
        input: input.to_path_buf(),
        run_id,
        path: ctx.storage.join(run_id.file_name()),
        provider,
        events: writer.events,
        diagnostics: diagnostics.total,
    })
}
