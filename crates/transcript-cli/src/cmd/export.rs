//! `transcript export`'s output: stdout, or a file that gets the transcript's own mode (0o600
//! for our transcripts), so exporting never widens who may read recorded content.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::CliError;
use crate::exit::stdout_result;

/// Writes `text` to `path` (created or truncated, with the permission bits of `source`, 0o600
/// when they cannot be read), or to stdout for `-` / none.
pub fn write_output(
    path: Option<&Path>,
    source: &Path,
    text: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let Some(path) = path.filter(|p| p.as_os_str() != "-") else {
        return stdout_result(out.write_all(text.as_bytes()));
    };
    let mode = std::fs::metadata(source)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0o600);
    let failed = |e: std::io::Error| CliError::Read {
        path: path.to_path_buf(),
        message: format!("cannot write: {e}"),
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(failed)?;
    // An existing file keeps its old mode through open(2): narrow it explicitly.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)
}
