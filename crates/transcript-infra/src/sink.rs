//! The byte sink under the writer thread: a trait so tests can inject
//! faults (short writes, disk full, failing or slow syncs and truncates).

use std::fs::File;
use std::io::{self, Write};

/// An append-only byte sink.
pub(crate) trait Sink: Send {
    /// One `write(2)`: may write fewer bytes than given.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// `fdatasync(2)`.
    fn sync_data(&mut self) -> io::Result<()>;
    /// Cuts the file back to `len` bytes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
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
}
