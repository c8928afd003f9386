//! Opening a run: the blocking work (directory, file, lock, mode, resume
//! scan, directory sync) runs on the run's own writer thread, which then
//! goes on as its writer. `open` waits for it on the calling thread (it is
//! documented as blocking), `open_async` suspends the calling task.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, oneshot, watch};
use transcript_domain::RecordError;

use super::queue::{Msg, Published};
use super::shared::Shared;
use super::writer_thread::{Resumed, Writer, WriterSetup};
use super::{Durability, JsonlRecorder, JsonlRecorderBuilder, OpenMode, WriteStats};
use crate::fs::{self, storage_error};
use crate::resume::scan_and_repair;
use crate::sink::{FileSink, Sink};

/// How long opening a run waits for this process's own earlier recorder of
/// it, dropped but not yet released by its writer thread (see
/// `crate::release`), before it reports the run as locked.
const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// Wraps the opened file in the writer's sink (tests inject faults here).
pub(crate) type Wrap = Box<dyn FnOnce(FileSink) -> Box<dyn Sink> + Send>;

/// What the writer thread runs with once the run is open.
struct Opened {
    recorder: JsonlRecorder,
    writer: Writer,
    rx: std_mpsc::Receiver<Msg>,
    ended: watch::Sender<bool>,
}

impl JsonlRecorderBuilder {
    /// Opens on the writer thread and waits for it on this thread.
    pub(crate) fn open_with(
        self,
        mode: OpenMode,
        wrap: impl FnOnce(FileSink) -> Box<dyn Sink> + Send + 'static,
    ) -> Result<JsonlRecorder, RecordError> {
        let path = self.storage_dir.join(self.run_id.file_name());
        let (tx, rx) = std_mpsc::channel();
        self.spawn(mode, Box::new(wrap), move |opened| {
            let _ = tx.send(opened);
        })?;
        rx.recv()
            .unwrap_or_else(|_| Err(stopped_while_opening(&path)))
    }

    /// Opens on the writer thread while the calling task is suspended.
    pub(crate) async fn open_async_with(
        self,
        mode: OpenMode,
        wrap: impl FnOnce(FileSink) -> Box<dyn Sink> + Send + 'static,
    ) -> Result<JsonlRecorder, RecordError> {
        let path = self.storage_dir.join(self.run_id.file_name());
        let (tx, rx) = oneshot::channel();
        // A caller that gives up drops `rx`: the recorder sent to it is
        // dropped with the failed send, and its thread releases the file.
        self.spawn(mode, Box::new(wrap), move |opened| {
            let _ = tx.send(opened);
        })?;
        rx.await
            .unwrap_or_else(|_| Err(stopped_while_opening(&path)))
    }

    /// Starts the writer thread: it opens the run, hands the recorder (or
    /// the error) to `reply`, then writes until the run is closed.
    fn spawn(
        self,
        mode: OpenMode,
        wrap: Wrap,
        reply: impl FnOnce(Result<JsonlRecorder, RecordError>) + Send + 'static,
    ) -> Result<(), RecordError> {
        let path = self.storage_dir.join(self.run_id.file_name());
        std::thread::Builder::new()
            .name("transcript-writer".to_owned())
            .spawn(move || match self.open_files(mode, wrap) {
                Err(e) => reply(Err(e)),
                Ok(Opened {
                    recorder,
                    writer,
                    rx,
                    ended,
                }) => {
                    reply(Ok(recorder));
                    writer.run_to_end(rx, ended);
                }
            })
            .map(drop)
            .map_err(|e| storage_error(&path, "cannot start the writer thread", Some(e)))
    }

    /// The blocking part of opening, on the writer thread.
    fn open_files(self, mode: OpenMode, wrap: Wrap) -> Result<Opened, RecordError> {
        let RunFile {
            path,
            file,
            scan,
            existed,
        } = open_run_file(&self.storage_dir, self.run_id, mode)?;
        let lease = crate::lease::WriterLease::take(&path, &file)?;
        if !existed && self.durability != Durability::None {
            // The new name must survive a power loss too.
            fs::sync_dir(&self.storage_dir)
                .map_err(|e| storage_error(&self.storage_dir, "cannot sync directory", Some(e)))?;
        }
        let committed = Arc::new(AtomicU64::new(scan.length));
        let published = Arc::new(Mutex::new(Published {
            next_seq: scan.next_seq,
            fanout: Default::default(),
            stats: WriteStats::default(),
            closed: false,
            panicked: None,
        }));
        let room = Arc::new(Semaphore::new(self.max_queued_bytes as usize));
        let writer = Writer::new(
            WriterSetup {
                lease,
                sink: wrap(FileSink { file }),
                path: path.clone(),
                run_id: self.run_id,
                parent_run_id: self.parent_run_id,
                clock: self.clock,
                durability: self.durability,
                published: Arc::clone(&published),
                committed: Arc::clone(&committed),
                room: Arc::clone(&room),
            },
            Resumed {
                next_seq: scan.next_seq,
                last_timestamp: scan.last_timestamp,
                length: scan.length,
            },
        );
        let (tx, rx) = std_mpsc::channel();
        let (ended, ended_rx) = watch::channel(false);
        let recorder = JsonlRecorder {
            shared: Arc::new(Shared {
                run_id: self.run_id,
                parent_run_id: self.parent_run_id,
                path,
                mask: self.mask,
                durability: self.durability,
                subscriber_buffer: self.subscriber_buffer,
                tx: Some(tx),
                published,
                committed,
                resume: scan.info,
                room,
                max_queued_bytes: self.max_queued_bytes,
                ended: ended_rx,
            }),
        };
        Ok(Opened {
            recorder,
            writer,
            rx,
            ended,
        })
    }
}

/// A run's transcript opened for appending: locked, mode 0o600, scanned (and its torn tail
/// moved out) by [`open_run_file`].
pub(crate) struct RunFile {
    /// `<storage>/<run_id>.jsonl`.
    pub(crate) path: std::path::PathBuf,
    /// The locked append handle.
    pub(crate) file: std::fs::File,
    /// What the file holds: next seq, last timestamp, acknowledged length.
    pub(crate) scan: crate::resume::Scan,
    /// Whether the file existed before (a new name needs a directory sync to be durable).
    pub(crate) existed: bool,
}

/// Opens `<storage_dir>/<run_id>.jsonl` the way every writer of a run does: the storage
/// directory (created 0o700, never a symlink), the file (`O_APPEND | O_NOFOLLOW`, a regular
/// file, locked, forced to 0o600), a new run's file refused when it holds anything, then the
/// resume scan (a torn tail moved to `.torn`). Blocking.
pub(crate) fn open_run_file(
    storage_dir: &Path,
    run_id: transcript_domain::RunId,
    mode: OpenMode,
) -> Result<RunFile, RecordError> {
    fs::ensure_storage_dir(storage_dir)?;
    let path = storage_dir.join(run_id.file_name());
    let torn_path = storage_dir.join(format!("{}.torn", run_id.file_name()));
    let existed = path.exists();
    let file = open_locked(&path)?;
    if mode == OpenMode::New {
        refuse_existing_run(&path, &file)?;
    }
    fs::force_file_mode(&path, &file)?;
    crate::iohook::point(&path, crate::iohook::Site::Open);
    let read = reopen_for_reading(&path, &file)?;
    let scan = scan_and_repair(&path, &torn_path, read, &file)?;
    for warning in &scan.info.warnings {
        tracing::warn!(path = %path.display(), "resuming transcript: {warning}");
    }
    Ok(RunFile {
        path,
        file,
        scan,
        existed,
    })
}

/// Opens the transcript for appending and takes its lock, waiting for our own recorder of
/// this run that is being released.
fn open_locked(path: &Path) -> Result<std::fs::File, RecordError> {
    let file = fs::open_append(path)?;
    match fs::lock_exclusive(path, &file) {
        // Our own recorder of this run, dropped and being released: waited for. Tried again
        // whatever the wait says, since the release may have ended between the refusal and
        // the wait (then nothing is listed as releasing, and the run is free).
        Err(RecordError::Locked { .. }) => {
            crate::release::wait(path, RELEASE_WAIT);
            fs::lock_exclusive(path, &file)?;
        }
        result => result?,
    }
    Ok(file)
}

/// A new run's file must be empty: a run is resumed only explicitly.
fn refuse_existing_run(path: &Path, file: &std::fs::File) -> Result<(), RecordError> {
    let len = file
        .metadata()
        .map_err(|e| storage_error(path, "cannot inspect file", Some(e)))?
        .len();
    refuse_len(path, len)
}

/// [`refuse_existing_run`] before the file is opened and locked, by its path: a regular file
/// that holds anything is refused the same way whoever holds its lock. For writers that keep a
/// finished file locked until it is synced (the bulk writer), so a new run colliding with one
/// of them is told it exists, as it is after the recorder closed it. The check after the
/// lock still runs.
pub(crate) fn refuse_existing_path(path: &Path) -> Result<(), RecordError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => refuse_len(path, meta.len()),
        _ => Ok(()),
    }
}

fn refuse_len(path: &Path, len: u64) -> Result<(), RecordError> {
    if len > 0 {
        // Typed: the kind `AlreadyExists` is what callers match on (the CLI's exit 3), never
        // the message's words.
        return Err(storage_error(
            path,
            "run already exists (resume it explicitly)",
            Some(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("the file holds {len} bytes"),
            )),
        ));
    }
    Ok(())
}

/// A reading handle on the same file the append handle holds (not one put in its place).
fn reopen_for_reading(path: &Path, file: &std::fs::File) -> Result<std::fs::File, RecordError> {
    let read = fs::open_read(path)?;
    if !fs::same_file(file, &read)
        .map_err(|e| storage_error(path, "cannot inspect file", Some(e)))?
    {
        return Err(storage_error(path, "file was replaced while opening", None));
    }
    Ok(read)
}

fn stopped_while_opening(path: &Path) -> RecordError {
    storage_error(path, "the writer thread stopped while opening", None)
}
