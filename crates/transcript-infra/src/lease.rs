//! A run's writer lease on files: while a recorder holds its run, the transcript's open file
//! description carries, beside the `flock` that refuses a second writer, an open file
//! description lock (`F_OFD_SETLK`, write, whole file) that a reader tests with `F_OFD_GETLK`
//! ([`writer_holds`]): the test takes nothing, so a reader probing a run never blocks, never
//! delays a writer and never makes an opening writer see its run as locked (an `flock` probe
//! would hold the lock for an instant). Both locks belong to the open file description, so a
//! runner SIGKILLed loses them with its last descriptor, and the run reads as abandoned.
//!
//! Released explicitly before the file is closed ([`WriterLease`]'s drop): unlocking acts on
//! the open file description, so the run is free when `close` returns even if a child process
//! forked at that moment still holds a copy of the descriptor until it execs (which would
//! otherwise keep the `flock` a while past the close).

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::{FcntlArg, fcntl};
use transcript_domain::RecordError;

use crate::fs::storage_error;

/// A whole-file lock request of `kind` (`F_WRLCK`, `F_UNLCK`).
fn whole_file(kind: libc::c_int) -> libc::flock {
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// A writer's hold on its run: the lease lock on its append handle's open file description.
/// Dropping it releases the lease and any `flock` of that description, before the file is
/// closed. The recorder holds one for each run it writes; another writer of transcripts (a
/// tool appending a run's lines as they come) holds one with [`WriterLease::hold`] so readers
/// see its run as running.
#[derive(Debug)]
pub struct WriterLease {
    /// A duplicate of the append handle (the same open file description).
    file: File,
}

impl WriterLease {
    /// Holds the lease on `file` (open for writing) until dropped. Fails when another writer
    /// holds it (`WouldBlock`-like OS errors) or `file` is not open for writing.
    pub fn hold(file: &File) -> io::Result<Self> {
        let file = file.try_clone()?;
        fcntl(&file, FcntlArg::F_OFD_SETLK(&whole_file(libc::F_WRLCK)))?;
        Ok(Self { file })
    }

    /// [`WriterLease::hold`] for the recorder (its `flock` already held), the error naming
    /// `path`.
    pub(crate) fn take(path: &Path, file: &File) -> Result<Self, RecordError> {
        Self::hold(file).map_err(|e| storage_error(path, "cannot hold the run's lease", Some(e)))
    }
}

impl Drop for WriterLease {
    fn drop(&mut self) {
        // Both act on the open file description, whoever else holds a copy of it.
        let _ = fcntl(
            &self.file,
            FcntlArg::F_OFD_SETLK(&whole_file(libc::F_UNLCK)),
        );
        let _ = self.file.unlock();
    }
}

/// Whether a recorder holds the run whose transcript is `path` (its writer is alive and has
/// not closed it), tested without taking anything. A run without `run.completed` whose lease
/// is not held was abandoned: its runner died, or was killed, before completing it.
///
/// The lease is seen by any process on this machine (locks are the kernel's) and on local
/// file systems; an error is the open's (no such file, not a regular file, no permission).
pub fn writer_holds(path: &Path) -> io::Result<bool> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    let mut probe = whole_file(libc::F_WRLCK);
    fcntl(&file, FcntlArg::F_OFD_GETLK(&mut probe)).map_err(io::Error::from)?;
    Ok(probe.l_type != libc::F_UNLCK as libc::c_short)
}
