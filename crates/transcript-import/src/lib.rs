//! Agent logs to canonical transcripts, as a library: raw provider captures (Claude Code,
//! Codex, Gemini CLI, Copilot, OpenAI, Anthropic) and the agent CLIs' own session stores
//! become runs in a storage directory, incrementally. The `transcript import` command is
//! argument parsing and printing over this crate.
//!
//! ```no_run
//! use transcript_import::{Importer, Store};
//! use transcript_providers::Provider;
//!
//! let importer = Importer::new("storage");
//! let run = importer.import_file("session.jsonl".as_ref(), None)?; // auto-detected
//! println!("{} {} events, {}", run.run_id, run.events, run.bill.describe());
//! let store = Store { provider: Provider::Claude, dirs: vec!["projects".into()] };
//! for done in importer.import_store(&store, None)? {
//!     println!("{}: {:?}", done.file.display(), done.result.map(|(o, _)| o));
//! }
//! # Ok::<(), transcript_import::ImportError>(())
//! ```
//!
//! # Model
//! One input (a capture file, or one session file of a store) is one run: `run.*`, a single
//! agent step, `message.user` for each prompt the capture shows, `message.assistant` turns and
//! agent-emitted `tool.*` events. [`Importer`] holds the storage and the options (an optional
//! mask, a progress callback, deterministic ids and clock); [`Importer::import_file`] and
//! [`Importer::import_files`] return [`Imported`] per run (run id, provider, events, usage and
//! cost in [`ImportBill`], diagnostics, status); [`Importer::import_store`] returns a
//! [`store::StoreDone`] per session file, and keeps the store's [`Index`] up to date.
//!
//! # Invariants
//! - **Provider time**: times come from the provider when the capture has them, else from the
//!   run's reported duration, else from the import's clock
//!   (see `transcript_providers::ClockSource`); each event gets the time of the record that
//!   produced it.
//! - **Incomplete captures** (no terminal record, torn last line): the step completes with an
//!   error saying what is missing, and no `run.completed` is written: the run reads as
//!   `incomplete`, never `succeeded`. Bad input (nothing but lines that are not the
//!   provider's records) writes nothing.
//! - **One request, one bill**: a turn's usage is counted once, however many records repeat
//!   it ([`ImportBill`] sums what was written, priced by the embedded LiteLLM table).
//! - **Idempotent**: a source already imported (its canonical path and the hash of its first
//!   4 KiB, or the same first 4 KiB at another path) is never imported as a second run: a
//!   store's open run is appended to or left as it is, a file import's completed run of the
//!   same size is left as it is ([`source`], [`ImportOutcome`]); every file import is recorded
//!   in the [`Index`], as store imports are.
//! - **Byte-identical appends**: the bulk writer's files are byte-identical to the live
//!   recorder's; a grown session file is appended to its run (same run id, seqs continue) with
//!   only what is new, byte-identical to importing the whole file through the recorder
//!   (see [`store`]). A run is reported imported only once its file is durable; a file that
//!   could not be written or synced (a full disk) is cut back, never half there.
//! - **Never printing**: faults are [`ImportError`]s naming the file and cause; progress goes to
//!   the [`Progress`] callback.
//!
//! # Threat model
//! Inputs are untrusted: any bytes, any size (`/dev/zero`), hostile text in every field.
//! Memory stays bounded (64 KiB reads, a bounded detection prefix, the normalizer's line cap);
//! bad input is a typed error, never a panic; text reaches the transcript as data, masked by
//! the optional [`EventMask`] (e.g. `transcript-redact`'s redactor) before it is written.
//! Printing untrusted text safely is the caller's job (the CLI escapes control characters).
//!
//! # Versioning
//! Part of the workspace (0.x, unpublished): the transcript files follow the wire contract
//! (seed 000) and its decisions; the Rust API may change between minor versions, and the
//! `import-index.json` format is read tolerantly (an unreadable index is an error, never
//! silently reset).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::{
    Clock, ContentBlock, EventDraft, EventMask, Fidelity, MessagePayload, Payload, RawJson, Role,
    RunIdGenerator, Timestamp,
};
use transcript_infra::{JsonlRecorderFactory, Unsynced};
use transcript_providers::{ClockSource, Fact, Item, Provider, detect};

pub mod bill;
mod clock;
mod error;
mod feed;
mod importer;
pub mod index;
pub mod project;
pub mod source;
pub mod store;
mod summary;
#[cfg(test)]
mod tests;
mod writer;
pub use bill::ImportBill;
use clock::ImportClock;
pub use clock::clock_and_ids;
pub use error::{ImportError, Notice, Progress};
pub use importer::{Importer, Store};
pub use index::Index;
pub use source::import_all;
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
    /// Whether the input was new, or a source already imported ([`source`]).
    pub outcome: ImportOutcome,
}

impl Imported {
    /// What the import did, as one sentence for the operator (input, provider, outcome,
    /// events, status and what the written turns cost).
    pub fn describe(&self) -> String {
        let (input, provider) = (self.input.display(), self.provider);
        match self.outcome {
            ImportOutcome::New => format!(
                "imported {input} ({provider}): {} events, {} diagnostics, times from the {} clock; run {}; {}",
                self.events,
                self.diagnostics,
                self.clock.as_str(),
                self.status,
                self.bill.describe()
            ),
            ImportOutcome::Unchanged => format!(
                "{input} ({provider}): already imported as run {}, unchanged: nothing written (run {})",
                self.run_id, self.status
            ),
            ImportOutcome::Appended => format!(
                "{input} ({provider}): already imported as run {}, grown: {} events appended (run {}); {}",
                self.run_id,
                self.events,
                self.status,
                self.bill.describe()
            ),
        }
    }
}

/// What a file import did with its input (#51: imports are idempotent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportOutcome {
    /// A new run.
    New,
    /// A source already imported as an open store run, grown: what is new appended to it.
    Appended,
    /// A source already imported, unchanged: nothing written.
    Unchanged,
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
    /// A session already imported by a store import: its run stays open (no completion), as
    /// the store's runs do.
    Open,
}

impl std::fmt::Display for ImportStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportStatus::Succeeded => f.write_str("succeeded"),
            ImportStatus::Failed => f.write_str("failed"),
            ImportStatus::Incomplete(why) => f.write_str(why),
            ImportStatus::Open => f.write_str("open (imported session)"),
        }
    }
}

/// Import settings (what an [`Importer`] holds; the lower-level functions take it).
#[derive(Clone)]
pub struct ImportContext {
    /// Storage directory.
    pub storage: PathBuf,
    /// `None` for auto-detection.
    pub provider: Option<Provider>,
    /// Masking stage.
    pub mask: Option<Arc<dyn EventMask>>,
    /// Sequential ids and a manual clock.
    pub deterministic: bool,
    /// Where progress notices go (`None`: nowhere).
    pub progress: Option<Progress>,
}

impl ImportContext {
    /// Sends a notice to the progress callback, if any.
    pub(crate) fn notify(&self, notice: Notice<'_>) {
        if let Some(progress) = &self.progress {
            progress(notice);
        }
    }

    /// The recorder factory of an import: the storage, the import's clock and the mask.
    fn recorder_factory(&self, clock: Arc<ImportClock>) -> JsonlRecorderFactory {
        let factory = JsonlRecorderFactory::new(&self.storage).with_clock(clock);
        match &self.mask {
            Some(mask) => factory.with_mask(mask.clone()),
            None => factory,
        }
    }
}

/// The error of an input whose transcript was written but could not be made durable (it was
/// cut back: not imported).
fn not_durable(input: &Path, e: &transcript_domain::RecordError) -> ImportError {
    bad(
        input,
        format!("making the transcript durable failed (not imported): {e}"),
    )
}

fn bad(input: &Path, message: impl Into<String>) -> ImportError {
    ImportError::Read {
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
) -> Result<(), ImportError> {
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
) -> Result<(Imported, Option<Unsynced>), ImportError> {
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
        ctx.notify(Notice::Diagnostics {
            input,
            kind,
            count: *n,
            first,
        });
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
        outcome: ImportOutcome::New,
    };
    Ok((imported, written))
}

/// The input's provider: the one named, else the one its prefix is detected as. An empty
/// input has none.
fn input_provider(
    ctx: &ImportContext,
    input: &Path,
    prefix: &[u8],
) -> Result<Provider, ImportError> {
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
fn no_output(input: &Path, provider: Provider, diagnostics: &DiagnosticSummary) -> ImportError {
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
    ) -> Result<(), ImportError> {
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
    fn open(&mut self) -> Result<(), ImportError> {
        opened(&mut self.writer, &self.clock, &mut self.latest)
    }

    /// One normalized item: an event to record, a diagnostic to count, or a fact.
    fn item(&mut self, item: Item) -> Result<(), ImportError> {
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
    fn complete(&mut self) -> Result<(ClockSource, ImportStatus), ImportError> {
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
        // The directory the session ran in, when it records one (`receipts --by project`).
        if let Some(project) = project::recorded_project(input) {
            result["project"] = project.into();
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
