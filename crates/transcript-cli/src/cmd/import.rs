//! `transcript import`: raw provider logs to canonical transcripts, one run
//! per input, with `run.*`, a single agent step, `message.user` for each prompt the capture
//! shows, `message.assistant` turns and agent-emitted `tool.*` events. Bad input (nothing
//! but lines that are not the provider's records) writes nothing; a capture holding only
//! records without a reply (a lone `system` or `result` record, a run that failed before the
//! model answered) is a run whose agent step carries what is there (issue #18).
//!
//! - **Times** come from the provider when the capture has them, else from the run's
//!   reported duration, else from the import's clock (see `transcript_providers::ClockSource`).
//!   The recorder's clock is driven by the normalizer's facts, so each event gets the time
//!   of the record that produced it.
//! - **The agent step's `step.completed` result** is
//!   `{"clock": "provider"|"duration"|"import", "diagnostics": {kind: {"count", "first"}},
//!   "duration_ms"?, "result"?}` (`result`: the final answer a terminal record repeats);
//!   `run.completed`'s result is `{"clock": …}`. Provider errors are the step's error, quoted.
//!   Refusals keep their text block and are counted under `diagnostics.refusal`.
//! - **Incomplete captures** (no terminal record, torn last line): the step completes with an
//!   error saying what is missing, and no `run.completed` is written, so the run reads as
//!   `incomplete`, never `succeeded`.
//! - **Memory** stays bounded: the input is read in 64 KiB chunks, detection looks at a
//!   bounded prefix, and the transcript is written as the input arrives.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::{
    Clock, ContentBlock, EventDraft, EventMask, Fidelity, MessagePayload, Payload, RawJson,
    RecorderFactory, Role, RunIdGenerator, StepPayload, Timestamp,
};
use transcript_infra::JsonlRecorderFactory;
use transcript_providers::{ClockSource, DiagnosticKind, Fact, Item, Provider, detect};

use crate::CliError;

mod clock;
pub mod store;
use clock::ImportClock;

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
    /// Where the transcript's times come from.
    pub clock: ClockSource,
    /// `succeeded`, `failed`, or `incomplete: <why>`.
    pub status: String,
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
            "transcript: imported {} ({}): {} events, {} diagnostics, times from the {} clock; run {}",
            i.input.display(),
            i.provider,
            i.events,
            i.diagnostics,
            i.clock.as_str(),
            i.status
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
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for input in inputs {
        match import_one(ctx, &clock, ids.as_ref(), input).await {
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
    /// Whether anything but noise (malformed, unknown, repaired) was seen:
    /// a capture with only such diagnostics holds no agent output.
    recognized: bool,
}

impl DiagnosticSummary {
    fn add(&mut self, d: &transcript_providers::Diagnostic) {
        self.total += 1;
        self.recognized |= !matches!(
            d.kind,
            DiagnosticKind::Malformed | DiagnosticKind::Unknown | DiagnosticKind::Repaired
        );
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

    /// `{kind: {"count": n, "first": "..."}}`, kept in the agent step's result.
    fn to_json(&self) -> serde_json::Value {
        self.kinds
            .iter()
            .map(|(kind, (n, first))| {
                (
                    (*kind).to_owned(),
                    serde_json::json!({"count": n, "first": first}),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// The transcript of one import, opened when the first content arrives (bad input writes
/// nothing) and fed as the input streams in.
struct ImportWriter<'a> {
    factory: JsonlRecorderFactory,
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
        self.ensure_open().await?;
        self.write(EventDraft::new("agent", 0, payload)).await
    }

    async fn ensure_open(&mut self) -> Result<(), CliError> {
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
        Ok(())
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

/// What the facts of a capture said, besides its outputs.
#[derive(Default)]
struct Seen {
    provider_time: bool,
    duration_ms: Option<u64>,
    result_text: Option<String>,
    unfinished: Option<&'static str>,
    torn: Option<String>,
}

impl Seen {
    fn clock(&self) -> ClockSource {
        match (self.provider_time, self.duration_ms) {
            (true, _) => ClockSource::Provider,
            (false, Some(_)) => ClockSource::Duration,
            (false, None) => ClockSource::Import,
        }
    }

    /// Why the capture is incomplete, if it is.
    fn incomplete(&self) -> Option<String> {
        let mut why = Vec::new();
        if let Some(missing) = self.unfinished {
            why.push(format!(
                "the capture ends without its terminal record ({missing})"
            ));
        }
        if let Some(torn) = &self.torn {
            why.push(format!("its last line is torn ({torn})"));
        }
        (!why.is_empty()).then(|| format!("incomplete: {}", why.join("; ")))
    }
}

/// Opens the run (at the capture's first time), then moves the clock to the latest time seen.
async fn opened(
    writer: &mut ImportWriter<'_>,
    clock: &ImportClock,
    latest: &mut Option<Timestamp>,
) -> Result<(), CliError> {
    writer.ensure_open().await?;
    if let Some(t) = latest.take() {
        clock.pin(t);
    }
    Ok(())
}

/// The prompt as `message.user` (decision 11: `[text(prompt), text(system)?]`).
fn user_message(text: String, system: Option<String>) -> Payload {
    let mut blocks = vec![ContentBlock::text(Fidelity::AgentEmitted, text)];
    if let Some(system) = system.filter(|s| !s.is_empty()) {
        blocks.push(ContentBlock::text(Fidelity::AgentEmitted, system));
    }
    Payload::MessageUser(MessagePayload::new(Role::User, blocks))
}

/// The first provider time in the detection prefix, so the run starts at
/// the capture's time even when its first records carry none.
fn first_time(provider: Provider, prefix: &[u8]) -> Option<Timestamp> {
    let mut n = provider.normalizer();
    let mut items = Vec::new();
    n.feed_items(prefix, &mut items);
    items.into_iter().find_map(|i| match i {
        Item::Fact(Fact::Time(t)) => Some(t),
        _ => None,
    })
}

async fn import_one(
    ctx: &ImportContext,
    clock: &Arc<dyn Clock>,
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
    let import_clock = Arc::new(ImportClock::new(clock.clone()));
    if let Some(t) = first_time(provider, &prefix) {
        import_clock.pin(t);
    }
    let mut factory = JsonlRecorderFactory::new(&ctx.storage).with_clock(import_clock.clone());
    if let Some(mask) = &ctx.mask {
        factory = factory.with_mask(mask.clone());
    }
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
    let mut seen = Seen::default();
    // The latest provider time seen before the run was opened.
    let mut latest: Option<Timestamp> = None;
    let mut items = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    let mut pending: Option<Vec<u8>> = Some(prefix);
    loop {
        let done = match pending.take() {
            Some(bytes) => {
                normalizer.feed_items(&bytes, &mut items);
                false
            }
            None => match file.read(&mut chunk).map_err(read_err)? {
                0 => {
                    normalizer.finish_items(&mut items);
                    true
                }
                n => {
                    normalizer.feed_items(&chunk[..n], &mut items);
                    false
                }
            },
        };
        for item in items.drain(..) {
            match item {
                Item::Output(output) => match output.to_payload() {
                    Some(payload) => {
                        opened(&mut writer, &import_clock, &mut latest).await?;
                        writer.record(payload).await?
                    }
                    None => {
                        if let Some(d) = output.as_diagnostic() {
                            diagnostics.add(d);
                        }
                    }
                },
                Item::Fact(Fact::Time(t)) => {
                    seen.provider_time = true;
                    // Until the run is open it starts at the capture's first time.
                    match writer.open {
                        Some(_) => import_clock.pin(t),
                        None => latest = Some(t),
                    }
                }
                Item::Fact(Fact::Prompt { text, system }) => {
                    opened(&mut writer, &import_clock, &mut latest).await?;
                    writer.record(user_message(text, system)).await?;
                }
                Item::Fact(Fact::Duration(ms)) => {
                    if !seen.provider_time {
                        // Opened first, so the start it is measured from is the run's.
                        opened(&mut writer, &import_clock, &mut latest).await?;
                        import_clock.pin_after_start(ms);
                    }
                    seen.duration_ms = Some(ms);
                }
                Item::Fact(Fact::ResultText(text)) => seen.result_text = Some(text),
                Item::Fact(Fact::Unfinished(missing)) => seen.unfinished = Some(missing),
                Item::Fact(Fact::Torn(what)) => seen.torn = Some(what),
                Item::Fact(_) => {}
            }
        }
        if done {
            break;
        }
    }
    if writer.open.is_none() && diagnostics.recognized {
        // A capture with records of the provider but no reply (a lone `system` or `result`
        // record, a run that failed before the model answered) is still a run.
        opened(&mut writer, &import_clock, &mut latest).await?;
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
    let clock_source = seen.clock();
    let incomplete = seen.incomplete();
    let mut errors = diagnostics.provider_errors.clone();
    errors.extend(incomplete.clone());
    let mut result = serde_json::json!({
        "clock": clock_source.as_str(),
        "diagnostics": diagnostics.to_json(),
    });
    if let Some(ms) = seen.duration_ms {
        result["duration_ms"] = ms.into();
    }
    if let Some(text) = &seen.result_text {
        result["result"] = text.as_str().into();
    }
    let result = RawJson::from_value(&result)
        .map_err(|e| bad(input, format!("cannot encode the step result: {e}")))?;
    let completed = writer
        .step
        .clone()
        .with_error(errors.join("; "))
        .with_result(result);
    writer
        .write(EventDraft::new(
            "agent",
            0,
            Payload::StepCompleted(completed),
        ))
        .await?;
    // An incomplete capture leaves its run incomplete: no `run.completed`.
    if incomplete.is_none() {
        let run_result = RawJson::from_value(&serde_json::json!({"clock": clock_source.as_str()}))
            .map_err(|e| bad(input, format!("cannot encode the run result: {e}")))?;
        let mut run_completed = writer.workflow.clone().with_result(run_result);
        if !errors.is_empty() {
            run_completed =
                run_completed.with_error(format!("agent step failed: {}", errors.join("; ")));
        }
        writer
            .write(EventDraft::run_level(Payload::RunCompleted(run_completed)))
            .await?;
    }
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
    let status = match (&incomplete, errors.is_empty()) {
        (Some(why), _) => why.clone(),
        (None, true) => "succeeded".to_owned(),
        (None, false) => "failed".to_owned(),
    };
    Ok(Imported {
        input: input.to_path_buf(),
        run_id,
        path: ctx.storage.join(run_id.file_name()),
        provider,
        events: writer.events,
        diagnostics: diagnostics.total,
        clock: clock_source,
        status,
    })
}
