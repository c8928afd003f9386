//! One recorder per run in a shared storage directory (decision 7).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use transcript_domain::{Clock, EventMask, RecordError, Recorder, RecorderFactory, RunId};

use crate::bulk::{BulkSettings, BulkWriter};
use crate::clock::SystemClock;
use crate::fanout::DEFAULT_SUBSCRIBER_BUFFER;
use crate::recorder::{Durability, JsonlRecorder, JsonlRecorderBuilder, OpenMode};

/// Creates a [`JsonlRecorder`] per run, all in one storage directory: the
/// root run and each `call_workflow` child run get their own
/// `<run_id>.jsonl` with their own seq series.
#[derive(Clone)]
pub struct JsonlRecorderFactory {
    storage_dir: PathBuf,
    clock: Arc<dyn Clock>,
    durability: Durability,
    subscriber_buffer: usize,
    mask: Option<Arc<dyn EventMask>>,
}

impl std::fmt::Debug for JsonlRecorderFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlRecorderFactory")
            .field("storage_dir", &self.storage_dir)
            .field("durability", &self.durability)
            .field("subscriber_buffer", &self.subscriber_buffer)
            .finish_non_exhaustive()
    }
}

impl JsonlRecorderFactory {
    /// Recorders in `storage_dir` with the system clock, [`Durability::None`]
    /// and the default subscriber buffer.
    pub fn new(storage_dir: impl Into<PathBuf>) -> Self {
        Self {
            storage_dir: storage_dir.into(),
            clock: Arc::new(SystemClock),
            durability: Durability::None,
            subscriber_buffer: DEFAULT_SUBSCRIBER_BUFFER,
            mask: None,
        }
    }

    /// Sets the clock of every recorder.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the durability policy of every recorder.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets the per-subscriber buffer of every recorder.
    pub fn with_subscriber_buffer(mut self, events: usize) -> Self {
        self.subscriber_buffer = events.max(1);
        self
    }

    /// Sets the masking stage of every recorder.
    pub fn with_mask(mut self, mask: Arc<dyn EventMask>) -> Self {
        self.mask = Some(mask);
        self
    }

    /// The storage directory.
    pub fn storage_dir(&self) -> &Path {
        &self.storage_dir
    }

    /// Starts the concrete recorder of a new run `run_id`; a run whose
    /// file already holds events is refused (see
    /// [`JsonlRecorderBuilder::open`](crate::JsonlRecorderBuilder::open)).
    /// Blocking; async code uses [`RecorderFactory::create`].
    pub fn open(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<JsonlRecorder, RecordError> {
        self.builder(run_id, parent_run_id).open()
    }

    /// Continues the run `run_id` (after a crash, or deliberately), with
    /// this factory's settings (see
    /// [`JsonlRecorderBuilder::resume`](crate::JsonlRecorderBuilder::resume)).
    /// Blocking; async code uses
    /// [`JsonlRecorderBuilder::resume_async`](crate::JsonlRecorderBuilder::resume_async).
    pub fn resume(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<JsonlRecorder, RecordError> {
        self.builder(run_id, parent_run_id).resume()
    }

    /// A [`BulkWriter`] for a new run `run_id` with this factory's clock and mask (its
    /// durability is the caller's: see [`DurableBatch`](crate::DurableBatch)): refused like
    /// [`JsonlRecorderFactory::open`] when the file holds anything. Blocking.
    pub fn open_bulk(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<BulkWriter, RecordError> {
        BulkWriter::open(self.bulk_settings(run_id, parent_run_id), OpenMode::New)
    }

    /// A [`BulkWriter`] continuing the run `run_id` after its highest seq (like
    /// [`JsonlRecorderFactory::resume`]). Blocking.
    pub fn resume_bulk(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<BulkWriter, RecordError> {
        BulkWriter::open(self.bulk_settings(run_id, parent_run_id), OpenMode::Resume)
    }

    fn bulk_settings(&self, run_id: RunId, parent_run_id: Option<RunId>) -> BulkSettings {
        BulkSettings {
            storage_dir: self.storage_dir.clone(),
            run_id,
            parent_run_id,
            clock: Arc::clone(&self.clock),
            mask: self.mask.clone(),
        }
    }

    fn builder(&self, run_id: RunId, parent_run_id: Option<RunId>) -> JsonlRecorderBuilder {
        let mut builder = JsonlRecorder::builder(self.storage_dir.clone(), run_id)
            .parent_run_id(parent_run_id)
            .clock(Arc::clone(&self.clock))
            .durability(self.durability)
            .subscriber_buffer(self.subscriber_buffer);
        if let Some(mask) = &self.mask {
            builder = builder.mask(Arc::clone(mask));
        }
        builder
    }
}

#[async_trait]
impl RecorderFactory for JsonlRecorderFactory {
    /// A new run ([`JsonlRecorderFactory::open`]): never appends to an
    /// existing run's file. Opens on the recorder's writer thread
    /// ([`JsonlRecorderBuilder::open_async`](crate::JsonlRecorderBuilder::open_async)):
    /// the calling task is suspended, its worker never does the file I/O.
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        Ok(Arc::new(
            self.builder(run_id, parent_run_id).open_async().await?,
        ))
    }
}
