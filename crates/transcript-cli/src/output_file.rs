//! Output files of the commands that write recorded content (`export --output`, `export
//! --format otlp-json --output`): created private (0o600), never through a symlink, FIFO,
//! directory or hard link planted at the path. Shared by `cmd::export` and `cmd::otel`, so
//! neither depends on the other for it.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::CliError;

/// Opens `path` for an export: created with mode 0o600, or an existing regular file with a
/// single link, narrowed to 0o600 and emptied. Opened `O_NOFOLLOW` (a symlink at the path is
/// refused, never followed, also when dangling) and `O_NONBLOCK` (a FIFO without a reader fails
/// at once instead of hanging); anything that is not a regular file is refused before a byte is
/// written, and so is a file with other hard links (writing would change it under its other
/// names too).
pub fn create_private(path: &Path) -> Result<std::fs::File, CliError> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => write_error(path, "it is a symbolic link (refused, not followed)"),
            Some(libc::ENXIO) => write_error(path, "it is a FIFO with no reader (refused)"),
            _ => write_error(path, &e.to_string()),
        })?;
    let failed = |e: std::io::Error| write_error(path, &e.to_string());
    let meta = file.metadata().map_err(failed)?;
    if !meta.file_type().is_file() {
        return Err(write_error(path, "it is not a regular file (refused)"));
    }
    if meta.nlink() > 1 {
        return Err(write_error(
            path,
            &format!("it has {} hard links (refused)", meta.nlink()),
        ));
    }
    // An existing file keeps its old mode through open(2): narrow it, then empty it.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(failed)?;
    file.set_len(0).map_err(failed)?;
    Ok(file)
}

/// A failure to write the output file `path`.
pub fn write_error(path: &Path, message: &str) -> CliError {
    CliError::Read {
        path: path.to_path_buf(),
        message: format!("cannot write: {message}"),
    }
}
