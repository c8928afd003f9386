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
//!   `{"clock": "provider"|"duration"|"import", "provider": <registry name>,
//!   "diagnostics": {kind: {"count", "first"}},
//!   "duration_ms"?, "result"?}` (`result`: the final answer a terminal record repeats;
//!   `provider`: read by OTLP and receipts when no reply named it, a failed session's;
//!   `source`: the imported file's absolute path, from which `receipts --by session|project`
//!   derives the session and project as for a store import);
//!   `run.completed`'s result is `{"clock": …}`. Provider errors are the step's error, quoted.
//!   Refusals keep their text block and are counted under `diagnostics.refusal`.
//! - **Incomplete captures** (no terminal record, torn last line): the step completes with an
//!   error saying what is missing, and no `run.completed` is written, so the run reads as
//!   `incomplete`, never `succeeded`.
//! - **Memory** stays bounded: the input is read in 64 KiB chunks, detection looks at a
//!   bounded prefix, and the transcript is written as the input arrives.
//! - **Writing** (issue #29 item 4): each run goes through a `transcript_infra::BulkWriter`
//!   (byte-identical to the live recorder's file, without its writer thread), and the files
//!   of one invocation are made durable together by a `transcript_infra::DurableBatch`
//!   before they are reported imported. An input whose transcript could not be written or
//!   synced (a full disk) leaves no half run: its file is cut back (removed when new).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::{
    Clock, ContentBlock, EventDraft, EventMask, Fidelity, MessagePayload, Payload, RawJson, Role,
    RunIdGenerator, Timestamp,
};
use transcript_infra::{DurableBatch, JsonlRecorderFactory, Unsynced};
use transcript_providers::{ClockSource, Fact, Item, Provider, detect};

use crate::CliError;

pub mod bill;
mod clock;
mod feed;
pub mod store;
mod summary;
#[cfg(test)]
mod tests;
mod writer;
use bill::ImportBill;
use clock::ImportClock;
use summary::{DiagnosticSummary, Seen};
use writer::ImportWriter;
pub use writer::Via;

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
    /// How the imported run ended.
    pub status: ImportStatus,
    /// The tokens and priced cost of the turns written.
    pub bill: ImportBill,
}

/// How an imported run ended (shown as `succeeded`, `failed`, or `incomplete: <why>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportStatus {
    /// The capture is whole and reports no provider error.
    Succeeded,
    /// The capture is whole and reports a provider error (the agent step's error).
    Failed,
    /// The capture is not whole (no terminal record, torn last line): `incomplete: <why>`,
    /// also the agent step's error; the run has no `run.completed`.
    Incomplete(String),
}

impl std::fmt::Display for ImportStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportStatus::Succeeded => f.write_str("succeeded"),
            ImportStatus::Failed => f.write_str("failed"),
            ImportStatus::Incomplete(why) => f.write_str(why),
        }
    }
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

impl ImportContext {
    /// The recorder factory of an import: the storage, the import's clock and the mask.
    fn recorder_factory(&self, clock: Arc<ImportClock>) -> JsonlRecorderFactory {
        let factory = JsonlRecorderFactory::new(&self.storage).with_clock(clock);
        match &self.mask {
            Some(mask) => factory.with_mask(mask.clone()),
            None => factory,
        }
    }
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
    let (done, failed) = import_all(ctx, logs, Via::Bulk);
    let mut total = ImportBill::default();
    for i in &done {
        total.merge(&i.bill);
        crate::exit::stdout_result(writeln!(
            out,
            "{}\t{}\t{}",
            i.run_id,
            i.provider,
            i.path.display()
        ))?;
        crate::diag!(
            "transcript: imported {} ({}): {} events, {} diagnostics, times from the {} clock; run {}; {}",
            i.input.display(),
            i.provider,
            i.events,
            i.diagnostics,
            i.clock.as_str(),
            i.status,
            i.bill.describe()
        );
    }
    if done.len() > 1 {
        crate::diag!(
            "transcript: {} runs imported; {}",
            done.len(),
            total.describe()
        );
    }
    // The unpriced models' warning names models the agent reported: masked like the
    // transcript (settled first, so that no model is added back unmasked).
    let mut shown = total.settled(transcript_providers::Pricing::embedded());
    if let Some(r) = redactor {
        shown.unpriced = shown
            .unpriced
            .iter()
            .map(|m| r.mask_text(m).into_owned())
            .collect();
    }
    shown.warn();
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

/// Imports every input; returns what was written, durably, and the per-file failures.
pub fn import_all(
    ctx: &ImportContext,
    inputs: &[PathBuf],
    via: Via,
) -> (Vec<Imported>, Vec<CliError>) {
    let (clock, ids) = crate::source::clock_and_ids(ctx.deterministic);
    let mut written: Vec<Option<Imported>> = Vec::new();
    let mut failed = Vec::new();
    let mut batch = DurableBatch::new();
    for input in inputs {
        match import_one(ctx, &clock, ids.as_ref(), input, via) {
            Ok((imported, file)) => {
                if let Some(file) = file {
                    batch.submit(written.len() as u64, file);
                }
                written.push(Some(imported));
            }
            Err(e) => failed.push(e),
        }
    }
    for (token, result) in batch.finish() {
        if let Err(e) = result
            && let Some(i) = written.get_mut(token as usize).and_then(Option::take)
        {
            failed.push(not_durable(&i.input, &e));
        }
    }
    (written.into_iter().flatten().collect(), failed)
}

/// The error of an input whose transcript was written but could not be made durable (it was
/// cut back: not imported).
fn not_durable(input: &Path, e: &transcript_domain::RecordError) -> CliError {
    bad(
        input,
        format!("making the transcript durable failed (not imported): {e}"),
    )
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

/// Opens the run (at the capture's first time), then moves the clock to the latest time seen.
fn opened(
    writer: &mut ImportWriter<'_>,
    clock: &ImportClock,
    latest: &mut Option<Timestamp>,
) -> Result<(), CliError> {
    writer.ensure_open()?;
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

/// Imports one input into a new run: what it wrote, and its file, written but not yet
/// durable (`None` through the live recorder, which synced at close).
fn import_one(
    ctx: &ImportContext,
    clock: &Arc<dyn Clock>,
    ids: &dyn RunIdGenerator,
    input: &Path,
    via: Via,
) -> Result<(Imported, Option<Unsynced>), CliError> {
    let mut file =
        std::fs::File::open(input).map_err(|e| bad(input, format!("cannot read: {e}")))?;
    let prefix = read_prefix(&mut file, DETECT_PREFIX)
        .map_err(|e| bad(input, format!("cannot read: {e}")))?;
    let provider = input_provider(ctx, input, &prefix)?;
    let import_clock = Arc::new(ImportClock::new(clock.clone()));
    if let Some(t) = first_time(provider, &prefix) {
        import_clock.pin(t);
    }
    let factory = ctx.recorder_factory(import_clock.clone());
    let mut run = Importing {
        writer: ImportWriter::new(factory, via, ids, input, provider),
        clock: import_clock,
        diagnostics: DiagnosticSummary::default(),
        seen: Seen::default(),
        latest: None,
    };
    run.stream(provider, prefix, file)?;
    if !run.writer.is_open() && run.diagnostics.recognized {
        // A capture with records of the provider but no reply (a lone `system` or `result`
        // record, a run that failed before the model answered) is still a run.
        run.open()?;
    }
    if !run.writer.is_open() {
        return Err(no_output(input, provider, &run.diagnostics));
    }
    let (clock_source, status) = run.complete()?;
    let Some((run_id, written)) = run.writer.finish()? else {
        return Err(no_output(input, provider, &run.diagnostics));
    };
    for (kind, (n, first)) in &run.diagnostics.kinds {
        crate::diag!(
            "transcript: {}: {n} {kind} diagnostic(s), first: {}",
            input.display(),
            crate::style::one_line(first)
        );
    }
    let imported = Imported {
        input: input.to_path_buf(),
        run_id,
        path: ctx.storage.join(run_id.file_name()),
        provider,
        events: run.writer.events,
        diagnostics: run.diagnostics.total,
        clock: clock_source,
        status,
        bill: run.writer.bill.clone(),
    };
    Ok((imported, written))
}

/// The input's provider: the one named, else the one its prefix is detected as. An empty
/// input has none.
fn input_provider(ctx: &ImportContext, input: &Path, prefix: &[u8]) -> Result<Provider, CliError> {
    let short = prefix.len() < DETECT_PREFIX;
    if short && prefix.iter().all(u8::is_ascii_whitespace) {
        return Err(bad(input, "empty file: nothing to import"));
    }
    match ctx.provider {
        Some(p) => Ok(p),
        None => detect(prefix).ok_or_else(|| {
            bad(
                input,
                format!(
                    "unknown format: the first {} bytes are not the output of a supported agent CLI or API (name the provider instead of auto)",
                    prefix.len()
                ),
            )
        }),
    }
}

/// The error of an input with no agent output: its diagnostics by kind.
fn no_output(input: &Path, provider: Provider, diagnostics: &DiagnosticSummary) -> CliError {
    let kinds: Vec<String> = diagnostics
        .kinds
        .iter()
        .map(|(kind, (n, first))| format!("{n} {kind} (first: {first})"))
        .collect();
    bad(
        input,
        format!(
            "no {provider} agent output found ({} diagnostics, {} malformed records{}{})",
            diagnostics.total,
            diagnostics.malformed(),
            if kinds.is_empty() { "" } else { ": " },
            kinds.join("; ")
        ),
    )
}

/// One import in progress: the transcript, its clock, and what the capture said so far.
struct Importing<'a> {
    writer: ImportWriter<'a>,
    clock: Arc<ImportClock>,
    diagnostics: DiagnosticSummary,
    seen: Seen,
    /// The latest provider time seen before the run was opened.
    latest: Option<Timestamp>,
}

impl Importing<'_> {
    /// Normalizes the input (its prefix, then the rest of the file in chunks) into the
    /// transcript.
    fn stream(
        &mut self,
        provider: Provider,
        prefix: Vec<u8>,
        file: std::fs::File,
    ) -> Result<(), CliError> {
        let input = self.writer.input;
        let mut feed = feed::ChunkFeed::new(provider, prefix, file);
        let mut items = Vec::new();
        loop {
            let fed = feed
                .next(&mut items)
                .map_err(|e| bad(input, format!("cannot read: {e}")))?;
            for item in items.drain(..) {
                self.item(item)?;
            }
            if fed != feed::Fed::More {
                return Ok(());
            }
        }
    }

    /// Opens the run (at the capture's first time), then moves the clock to the latest time
    /// seen.
    fn open(&mut self) -> Result<(), CliError> {
        opened(&mut self.writer, &self.clock, &mut self.latest)
    }

    /// One normalized item: an event to record, a diagnostic to count, or a fact.
    fn item(&mut self, item: Item) -> Result<(), CliError> {
        match item {
            Item::Output(output) => match output.to_payload() {
                Some(payload) => {
                    self.open()?;
                    self.writer.record(payload)?
                }
                None => {
                    if let Some(d) = output.as_diagnostic() {
                        self.diagnostics.add(d);
                    }
                }
            },
            Item::Fact(Fact::Time(t)) => {
                self.seen.provider_time = true;
                // Until the run is open it starts at the capture's first time.
                if self.writer.is_open() {
                    self.clock.pin(t);
                } else {
                    self.latest = Some(t);
                }
            }
            Item::Fact(Fact::Prompt { text, system }) => {
                self.open()?;
                self.writer.record(user_message(text, system))?;
            }
            Item::Fact(Fact::Duration(ms)) => {
                if !self.seen.provider_time {
                    // Opened first, so the start it is measured from is the run's.
                    self.open()?;
                    self.clock.pin_after_start(ms);
                }
                self.seen.duration_ms = Some(ms);
            }
            Item::Fact(Fact::ResultText(text)) => self.seen.result_text = Some(text),
            Item::Fact(Fact::Unfinished(missing)) => self.seen.unfinished = Some(missing),
            Item::Fact(Fact::Torn(what)) => self.seen.torn = Some(what),
            Item::Fact(_) => {}
        }
        Ok(())
    }

    /// Ends the open run: `step.completed` with the step's result and errors, then
    /// `run.completed` unless the capture is incomplete. Returns the clock the times came from
    /// and the run's status.
    fn complete(&mut self) -> Result<(ClockSource, ImportStatus), CliError> {
        let input = self.writer.input;
        let clock_source = self.seen.clock();
        let incomplete = self.seen.incomplete();
        let mut errors = self.diagnostics.provider_errors.clone();
        errors.extend(incomplete.clone());
        let mut result = serde_json::json!({
            "clock": clock_source.as_str(),
            "provider": self.writer.step.name.as_str(),
            "diagnostics": self.diagnostics.to_json(),
        });
        if let Some(ms) = self.seen.duration_ms {
            result["duration_ms"] = ms.into();
        }
        // Where the session came from (absolute), so `receipts --by session|project` reads a
        // file import as it reads a store import (a sub-agent's log folds into its session).
        if let Ok(source) = std::fs::canonicalize(input) {
            result["source"] = source.to_string_lossy().as_ref().into();
        }
        if let Some(text) = &self.seen.result_text {
            result["result"] = text.as_str().into();
        }
        let result = RawJson::from_value(&result)
            .map_err(|e| bad(input, format!("cannot encode the step result: {e}")))?;
        let completed = self
            .writer
            .step
            .clone()
            .with_error(errors.join("; "))
            .with_result(result);
        self.writer.write(EventDraft::new(
            "agent",
            0,
            Payload::StepCompleted(completed),
        ))?;
        // An incomplete capture leaves its run incomplete: no `run.completed`.
        if incomplete.is_none() {
            let run_result =
                RawJson::from_value(&serde_json::json!({"clock": clock_source.as_str()}))
                    .map_err(|e| bad(input, format!("cannot encode the run result: {e}")))?;
            let mut run_completed = self.writer.workflow.clone().with_result(run_result);
            if !errors.is_empty() {
                run_completed =
                    run_completed.with_error(format!("agent step failed: {}", errors.join("; ")));
            }
            self.writer
                .write(EventDraft::run_level(Payload::RunCompleted(run_completed)))?;
        }
        let status = match (incomplete, errors.is_empty()) {
            (Some(why), _) => ImportStatus::Incomplete(why),
            (None, true) => ImportStatus::Succeeded,
            (None, false) => ImportStatus::Failed,
        };
        Ok((clock_source, status))
    }
}
