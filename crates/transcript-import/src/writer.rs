//! The transcript of one import: opened when the first content arrives (bad input writes
//! nothing), fed as the input streams in, and handed over unsynced at the end so a
//! [`DurableBatch`](transcript_infra::DurableBatch) makes the whole import durable before
//! anything claims it imported (issue #29 item 4).
//!
//! Imports write through a [`BulkWriter`]: the file is byte-identical to what the live
//! recorder writes for the same events and clock, without a writer thread per file, a
//! `write(2)` per event and an `fdatasync` per file in sequence. Under `cfg(test)` the live
//! recorder ([`Via::Recorder`], what `import` used before) stays available as the reference
//! the tests compare the bulk path with, byte for byte, on real captures and our fixtures.

use std::path::Path;

use transcript_domain::{EventDraft, Payload, RunId, RunIdGenerator, StepPayload};
use transcript_infra::{BulkWriter, JsonlRecorderFactory, Unsynced};

use super::bad;
use super::bill::ImportBill;
use crate::ImportError;

/// How an import writes its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A [`BulkWriter`] per run, made durable by the caller's batch.
    Bulk,
    /// The live recorder, one record awaited after another (synced at close).
    #[cfg(test)]
    Recorder,
}

/// An open run of an import.
enum RunSink {
    Bulk(BulkWriter),
    #[cfg(test)]
    Recorder(tokio::runtime::Runtime, transcript_infra::JsonlRecorder),
}

impl RunSink {
    fn record(&mut self, draft: EventDraft) -> Result<(), transcript_domain::RecordError> {
        match self {
            RunSink::Bulk(w) => w.record(draft).map(drop),
            #[cfg(test)]
            RunSink::Recorder(rt, r) => rt.block_on(r.record(draft)).map(drop),
        }
    }

    /// Everything written: the bulk writer's file, not yet synced (the live recorder syncs
    /// at close and hands nothing over).
    fn finish(self) -> Result<Option<Unsynced>, transcript_domain::RecordError> {
        match self {
            RunSink::Bulk(w) => w.finish().map(Some),
            #[cfg(test)]
            RunSink::Recorder(rt, r) => {
                rt.block_on(transcript_domain::Recorder::close(&r))?;
                Ok(None)
            }
        }
    }
}

/// The transcript of one import (see the module docs).
pub(super) struct ImportWriter<'a> {
    factory: JsonlRecorderFactory,
    via: Via,
    ids: &'a dyn RunIdGenerator,
    pub(super) input: &'a Path,
    pub(super) workflow: StepPayload,
    pub(super) step: StepPayload,
    open: Option<(RunId, RunSink)>,
    /// Events written.
    pub(super) events: u64,
    /// The tokens and cost of the turns written.
    pub(super) bill: ImportBill,
}

impl<'a> ImportWriter<'a> {
    /// A writer whose run is not open yet: `import <name>` with the provider's agent step.
    pub(super) fn new(
        factory: JsonlRecorderFactory,
        via: Via,
        ids: &'a dyn RunIdGenerator,
        input: &'a Path,
        provider: transcript_providers::Provider,
    ) -> Self {
        let name = input
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "import".to_owned());
        Self {
            factory,
            via,
            ids,
            input,
            workflow: StepPayload::new(format!("import {name}"), "workflow"),
            step: StepPayload::new(provider.name(), "agent"),
            open: None,
            events: 0,
            bill: ImportBill::of_session(input),
        }
    }

    /// Whether the run is open.
    pub(super) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Continues the run `run` (a grown session file): appended after its highest seq.
    pub(super) fn resume(&mut self, run: RunId) -> Result<(), ImportError> {
        let sink = match self.via {
            Via::Bulk => self.factory.resume_bulk(run, None).map(RunSink::Bulk),
            #[cfg(test)]
            Via::Recorder => self
                .factory
                .resume(run, None)
                .map(|r| RunSink::Recorder(runtime(), r)),
        }
        .map_err(|err| bad(self.input, format!("cannot resume run {run}: {err}")))?;
        self.open = Some((run, sink));
        Ok(())
    }

    /// Records an agent-step event (opening the run first); an assistant turn is billed.
    pub(super) fn record(&mut self, payload: Payload) -> Result<(), ImportError> {
        self.ensure_open()?;
        if let Payload::MessageAssistant(m) = &payload {
            self.bill.add(m, transcript_providers::Pricing::embedded());
        }
        self.write(EventDraft::new("agent", 0, payload))
    }

    /// Opens a new run with `run.started` and the agent step's `step.started`, once.
    pub(super) fn ensure_open(&mut self) -> Result<(), ImportError> {
        if self.open.is_none() {
            let run_id = self.ids.next_run_id();
            let sink = match self.via {
                Via::Bulk => self.factory.open_bulk(run_id, None).map(RunSink::Bulk),
                #[cfg(test)]
                Via::Recorder => self
                    .factory
                    .open(run_id, None)
                    .map(|r| RunSink::Recorder(runtime(), r)),
            }
            .map_err(|e| bad(self.input, format!("cannot open transcript: {e}")))?;
            self.open = Some((run_id, sink));
            self.write(EventDraft::run_level(Payload::RunStarted(
                self.workflow.clone(),
            )))?;
            self.write(EventDraft::new(
                "agent",
                0,
                Payload::StepStarted(self.step.clone()),
            ))?;
        }
        Ok(())
    }

    /// Writes one event into the open run (nothing when none is open).
    pub(super) fn write(&mut self, draft: EventDraft) -> Result<(), ImportError> {
        let Some((_, sink)) = &mut self.open else {
            return Ok(());
        };
        sink.record(draft)
            .map_err(|e| bad(self.input, format!("writing the transcript failed: {e}")))?;
        self.events += 1;
        Ok(())
    }

    /// Ends the writing: the run's id and its file, written but not yet durable (`None`
    /// through the live recorder, which synced at close). `None` when no run was opened.
    pub(super) fn finish(&mut self) -> Result<Option<(RunId, Option<Unsynced>)>, ImportError> {
        let Some((run, sink)) = self.open.take() else {
            return Ok(None);
        };
        let file = sink
            .finish()
            .map_err(|e| bad(self.input, format!("closing the transcript failed: {e}")))?;
        Ok(Some((run, file)))
    }
}

#[cfg(test)]
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}
