//! The byte sink under the writer: a trait so tests can inject faults
//! (short writes, disk full, failing syncs and truncates).

use std::fs::File;
use std::io::{self, Write};

/// Syncs the transcript from another thread (the interval flusher).
pub(crate) type SyncFn = Box<dyn FnMut() -> io::Result<()> + Send>;

/// An append-only byte sink.
pub(crate) trait Sink: Send {
    /// One `write(2)`: may write fewer bytes than given.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// `fdatasync(2)`.
    fn sync_data(&mut self) -> io::Result<()>;
    /// Cuts the file back to `len` bytes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// A handle that syncs the same file without the writer's lock.
    fn syncer(&self) -> io::Result<SyncFn>;
}

/// The production sink: the locked, append-only transcript file.
pub(crate) struct FileSink {
    pub(crate) file: File,
}

impl Sink for FileSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn syncer(&self) -> io::Result<SyncFn> {
        let file = self.file.try_clone()?;
        Ok(Box::new(move || file.sync_data()))
    }
}
