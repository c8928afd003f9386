//! Hardened filesystem primitives: storage directory creation, no-follow
//! opens, permissions and the exclusive writer lock.

use std::fs::{DirBuilder, File, OpenOptions, Permissions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use transcript_domain::RecordError;

/// Mode of transcript and `.torn` files, applied with `fchmod` whatever the umask.
pub(crate) const FILE_MODE: u32 = 0o600;
/// Mode of storage directories this crate creates.
pub(crate) const DIR_MODE: u32 = 0o700;

/// `O_NOFOLLOW` refuses a symlink as the last path component; `O_NONBLOCK`
/// makes a FIFO planted at the path fail instead of blocking the open (it has
/// no effect on regular files); `O_CLOEXEC` keeps the descriptor out of
/// child processes (std sets it too; stated for the reader).
fn hardening_flags() -> i32 {
    libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK
}

pub(crate) fn storage_error(
    path: &Path,
    message: impl Into<String>,
    source: Option<io::Error>,
) -> RecordError {
    RecordError::Storage {
        path: path.display().to_string(),
        message: message.into(),
        source,
    }
}

/// Makes sure `dir` is a real directory, creating it (and missing parents)
/// with mode 0o700. A symlink or a non-directory at `dir` is refused.
pub(crate) fn ensure_storage_dir(dir: &Path) -> Result<(), RecordError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => check_dir_meta(dir, &meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(dir)
                .map_err(|e| storage_error(dir, "cannot create storage directory", Some(e)))?;
            // The umask may have removed owner bits; the mode is exactly 0o700.
            std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))
                .map_err(|e| storage_error(dir, "cannot set storage directory mode", Some(e)))?;
            let meta = std::fs::symlink_metadata(dir)
                .map_err(|e| storage_error(dir, "cannot inspect storage directory", Some(e)))?;
            check_dir_meta(dir, &meta)
        }
        Err(e) => Err(storage_error(
            dir,
            "cannot inspect storage directory",
            Some(e),
        )),
    }
}

fn check_dir_meta(dir: &Path, meta: &std::fs::Metadata) -> Result<(), RecordError> {
    // No call failed here, but the errors name the cause the OS gives for
    // the same refusal (what `O_NOFOLLOW` and `mkdir` report).
    if meta.file_type().is_symlink() {
        Err(storage_error(
            dir,
            "storage path is a symbolic link; refusing to follow it",
            Some(io::Error::from_raw_os_error(libc::ELOOP)),
        ))
    } else if !meta.is_dir() {
        Err(storage_error(
            dir,
            "storage path exists and is not a directory",
            Some(io::Error::from_raw_os_error(libc::EEXIST)),
        ))
    } else {
        Ok(())
    }
}

fn open_error(path: &Path, what: &str, e: io::Error) -> RecordError {
    // ELOOP is what O_NOFOLLOW reports for a symlink.
    if e.raw_os_error() == Some(libc::ELOOP) {
        storage_error(
            path,
            format!("{what}: path is a symbolic link; refusing to follow it"),
            Some(e),
        )
    } else {
        storage_error(path, what.to_owned(), Some(e))
    }
}

/// Opens `path` append-only (created 0o600), refusing symlinks and anything
/// that is not a regular file, then forces the mode to 0o600.
///
/// Does not lock; see [`lock_exclusive`].
pub(crate) fn open_append(path: &Path) -> Result<File, RecordError> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .custom_flags(hardening_flags())
        .open(path)
        .map_err(|e| open_error(path, "cannot open for append", e))?;
    require_regular(path, &file)?;
    Ok(file)
}

/// Opens `path` for writing from its start (created 0o600, an existing file truncated),
/// refusing symlinks and anything that is not a regular file, then forces the mode to 0o600.
pub(crate) fn open_truncate(path: &Path) -> Result<File, RecordError> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .custom_flags(hardening_flags())
        .open(path)
        .map_err(|e| open_error(path, "cannot open for writing", e))?;
    require_regular(path, &file)?;
    force_file_mode(path, &file)?;
    Ok(file)
}

/// Sets mode 0o600 on an open file (fchmod: immune to path swaps).
pub(crate) fn force_file_mode(path: &Path, file: &File) -> Result<(), RecordError> {
    file.set_permissions(Permissions::from_mode(FILE_MODE))
        .map_err(|e| storage_error(path, "cannot set file mode 0o600", Some(e)))
}

/// Opens `path` read-only, refusing symlinks and non-regular files.
pub(crate) fn open_read(path: &Path) -> Result<File, RecordError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(hardening_flags())
        .open(path)
        .map_err(|e| open_error(path, "cannot open for reading", e))?;
    require_regular(path, &file)?;
    Ok(file)
}

fn require_regular(path: &Path, file: &File) -> Result<(), RecordError> {
    let meta = file
        .metadata()
        .map_err(|e| storage_error(path, "cannot inspect file", Some(e)))?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(storage_error(path, "not a regular file", None))
    }
}

/// Takes the exclusive writer lock (`flock`, held until the file is closed).
pub(crate) fn lock_exclusive(path: &Path, file: &File) -> Result<(), RecordError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(RecordError::Locked {
            path: path.display().to_string(),
        }),
        Err(TryLockError::Error(e)) => Err(storage_error(path, "cannot lock", Some(e))),
    }
}

/// Same inode? (Guards the read handle opened next to the locked write handle.)
pub(crate) fn same_file(a: &File, b: &File) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (ma, mb) = (a.metadata()?, b.metadata()?);
    Ok(ma.dev() == mb.dev() && ma.ino() == mb.ino())
}

/// Syncs a directory so a newly created entry survives power loss.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?
        .sync_all()
}
