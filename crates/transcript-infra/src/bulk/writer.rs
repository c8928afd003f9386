//! [`BulkWriter`]: one run's transcript written from the calling thread through one buffer,
//! and [`Unsynced`], what it leaves once every line is in the kernel's hands.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::Timestamp;
use transcript_domain::{Clock, EncodedParts, EventDraft, EventMask, RecordError, RunId, Seq};

use crate::fs::storage_error;
use crate::recorder::{OpenMode, RunFile, encode_draft, open_run_file, refuse_existing_path};
use crate::resume::ResumeInfo;
use crate::sink::{FileSink, Sink};

/// Buffered bytes that make a `write(2)`: a few hundred events of a session log per call.
const FLUSH_AT: usize = 256 * 1024;

/// Writes one run's `<storage>/<run_id>.jsonl` from the calling thread, for imports that
/// produce a whole run at once (`transcript import`): no writer thread, no acknowledgement
/// per event, one `write(2)` per [`FLUSH_AT`] bytes, and no sync until [`Unsynced::sync`]
/// (or a [`DurableBatch`](crate::DurableBatch)) makes the file durable.
///
/// The file is byte-identical to what a [`JsonlRecorder`](crate::JsonlRecorder) with the
/// same clock writes for the same drafts recorded one after another: the same opening
/// (directory, hardened open, lock, mode 0o600, a new run's file refused when it holds
/// anything, the resume scan), the same masking, validation and encoding, one clock read per
/// record with timestamps that never go backwards, seqs from the file's next one.
///
/// **All or nothing.** Nothing it writes counts until the file is synced: a failed write
/// fails this record and every later one with [`RecordError::Storage`] naming the file and
/// the OS cause; a writer (or an [`Unsynced`]) dropped before its sync succeeded cuts the
/// file back to the length it had when it was opened (a file it created is removed), so a
/// failed import leaves no half run behind and what the file held before is untouched.
pub struct BulkWriter {
    file: Option<Opened>,
    run: (RunId, Option<RunId>),
    clock: Arc<dyn Clock>,
    mask: Option<Arc<dyn EventMask>>,
    next_seq: Seq,
    /// Timestamps never go backwards in file order.
    last_ms: i64,
    /// Lines not yet handed to the kernel.
    buf: Vec<u8>,
    /// One record's encoded parts (reused).
    scratch: Vec<u8>,
    events: u64,
    /// A write failed: nothing more is written.
    failed: bool,
    resume: ResumeInfo,
}

/// The open file and where a failure cuts it back to.
struct Opened {
    path: PathBuf,
    /// The locked append handle (tests inject faults here).
    sink: Box<dyn Sink>,
    /// Length when opened (after the resume scan's repair).
    start_len: u64,
    /// Created by this writer: removed instead of cut back.
    created: bool,
}

impl Opened {
    /// Cuts the file back to where it was opened; a file this writer created is removed.
    fn cut_back(self) {
        let Opened {
            path,
            mut sink,
            start_len,
            created,
        } = self;
        let result = if created {
            std::fs::remove_file(&path)
        } else {
            sink.truncate(start_len).and_then(|()| sink.sync_data())
        };
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), "cannot undo a failed import of this transcript: {e}");
        }
    }
}

impl std::fmt::Debug for BulkWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkWriter")
            .field("path", &self.file.as_ref().map(|o| &o.path))
            .field("run_id", &self.run.0)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

/// What a [`BulkWriter`] needs besides its run: set by
/// [`JsonlRecorderFactory`](crate::JsonlRecorderFactory)'s `open_bulk` / `resume_bulk`.
pub(crate) struct BulkSettings {
    pub(crate) storage_dir: PathBuf,
    pub(crate) run_id: RunId,
    pub(crate) parent_run_id: Option<RunId>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) mask: Option<Arc<dyn EventMask>>,
}

impl BulkWriter {
    /// Opens the run's file like the recorder does (`New`: refused when it holds anything;
    /// `Resume`: continued after its highest seq). Blocking.
    pub(crate) fn open(settings: BulkSettings, mode: OpenMode) -> Result<Self, RecordError> {
        Self::open_with(settings, mode, |file| Box::new(file))
    }

    /// [`BulkWriter::open`] writing through `wrap(file)` (tests inject faults).
    pub(crate) fn open_with(
        settings: BulkSettings,
        mode: OpenMode,
        wrap: impl FnOnce(FileSink) -> Box<dyn Sink>,
    ) -> Result<Self, RecordError> {
        if mode == OpenMode::New {
            // A finished file stays locked until its batch syncs it: a new run of the same
            // id is refused as existing, not as locked.
            refuse_existing_path(&settings.storage_dir.join(settings.run_id.file_name()))?;
        }
        let RunFile {
            path,
            file,
            scan,
            existed,
        } = open_run_file(&settings.storage_dir, settings.run_id, mode)?;
        Ok(Self {
            file: Some(Opened {
                path,
                sink: wrap(FileSink { file }),
                start_len: scan.length,
                created: !existed,
            }),
            run: (settings.run_id, settings.parent_run_id),
            clock: settings.clock,
            mask: settings.mask,
            next_seq: scan.next_seq,
            last_ms: scan.last_timestamp.map_or(i64::MIN, Timestamp::unix_millis),
            buf: Vec::with_capacity(FLUSH_AT + 64 * 1024),
            scratch: Vec::with_capacity(4096),
            events: 0,
            failed: false,
            resume: scan.info,
        })
    }

    /// The transcript's path.
    pub fn path(&self) -> &Path {
        self.file.as_ref().map_or(Path::new(""), |o| &o.path)
    }

    /// What opening found in an existing file (empty for a new one).
    pub fn resume_info(&self) -> &ResumeInfo {
        &self.resume
    }

    /// The seq the next successful record gets.
    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// Records written by this writer.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Masks, validates and encodes `draft`, gives it the next seq and one clock read (never
    /// before the previous timestamp), and buffers its line, writing the buffer once it is
    /// [`FLUSH_AT`] bytes. An invalid, oversized or unencodable draft fails like
    /// [`JsonlRecorder::record`](crate::JsonlRecorder::record) and uses no seq; a failed
    /// write fails with [`RecordError::Storage`] (the OS cause as its source), and so does
    /// every record after it.
    pub fn record(&mut self, mut draft: EventDraft) -> Result<Seq, RecordError> {
        if self.failed {
            return Err(storage_error(
                self.path(),
                "an earlier write failed: nothing more is written to this transcript",
                None,
            ));
        }
        let split = encode_draft(
            self.run,
            self.mask.as_deref(),
            &mut draft,
            &mut self.scratch,
        )?;
        let ms = self.clock.now().unix_millis().max(self.last_ms);
        self.last_ms = ms;
        let seq = self.next_seq;
        if seq == u64::MAX {
            let e = io::Error::other(format!("seq {seq} is the largest possible"));
            return Err(storage_error(self.path(), "seq space exhausted", Some(e)));
        }
        EncodedParts {
            middle: &self.scratch[..split],
            payload: &self.scratch[split..],
        }
        .write_line_with(
            seq,
            &Timestamp::saturating_from_unix_millis(ms).canonical_bytes(),
            &mut self.buf,
        );
        self.next_seq += 1;
        self.events += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(seq)
    }

    /// Hands the buffer to the kernel.
    fn flush(&mut self) -> Result<(), RecordError> {
        let Some(opened) = &mut self.file else {
            return Ok(());
        };
        if let Err(e) = write_all(opened.sink.as_mut(), &self.buf) {
            self.failed = true;
            return Err(storage_error(&opened.path, "write failed", Some(e)));
        }
        self.buf.clear();
        Ok(())
    }

    /// Writes what is buffered; the file, not yet durable, is then the [`Unsynced`]'s. On a
    /// failed write the file is cut back (see the type's docs) and the error returned.
    pub fn finish(mut self) -> Result<Unsynced, RecordError> {
        self.flush()?;
        let opened = self.file.take().ok_or_else(|| {
            storage_error(Path::new(""), "the transcript was already finished", None)
        })?;
        Ok(Unsynced {
            opened: Some(opened),
            events: self.events,
        })
    }
}

impl Drop for BulkWriter {
    fn drop(&mut self) {
        // Not finished: the import failed (or gave up); nothing of it stays.
        if let Some(opened) = self.file.take() {
            opened.cut_back();
        }
    }
}

/// A transcript whose lines are all written but not yet synced (see [`BulkWriter::finish`]).
/// Dropped without a successful [`Unsynced::sync`], it is cut back like a failed
/// [`BulkWriter`].
pub struct Unsynced {
    opened: Option<Opened>,
    events: u64,
}

impl std::fmt::Debug for Unsynced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unsynced")
            .field("path", &self.path())
            .field("events", &self.events)
            .finish()
    }
}

/// A synced transcript: its path, and whether its name is new in its directory (then the
/// directory needs a sync too, see [`DurableBatch`](crate::DurableBatch)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// The transcript.
    pub path: PathBuf,
    /// Created by this import: its directory entry is new.
    pub created: bool,
}

impl Unsynced {
    /// The transcript's path.
    pub fn path(&self) -> &Path {
        self.opened.as_ref().map_or(Path::new(""), |o| &o.path)
    }

    /// Events the writer wrote.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// `fdatasync`: the file's content is durable (a new file's name needs its directory
    /// synced as well). A failed sync cuts the file back and fails with
    /// [`RecordError::Storage`] "fdatasync failed" naming it.
    pub fn sync(mut self) -> Result<Synced, RecordError> {
        let Some(opened) = self.opened.take() else {
            return Err(storage_error(Path::new(""), "already synced", None));
        };
        let mut opened = opened;
        match opened.sink.sync_data() {
            Ok(()) => Ok(Synced {
                path: opened.path.clone(),
                created: opened.created,
            }),
            Err(e) => {
                let error = storage_error(&opened.path, "fdatasync failed", Some(e));
                opened.cut_back();
                Err(error)
            }
        }
    }

    /// Gives the import up: the file is cut back to where it was opened (removed when it was
    /// created).
    pub fn abandon(mut self) {
        if let Some(opened) = self.opened.take() {
            opened.cut_back();
        }
    }
}

impl Drop for Unsynced {
    fn drop(&mut self) {
        if let Some(opened) = self.opened.take() {
            opened.cut_back();
        }
    }
}

/// Writes all of `buf` (retrying interrupted and short writes).
fn write_all(sink: &mut dyn Sink, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match sink.write(buf) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write returned 0 bytes",
                ));
            }
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
