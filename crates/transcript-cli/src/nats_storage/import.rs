//! `import` on NATS storage (#52 item 3): the file import on a private staging directory
//! that `transcript_nats::BlockingStaging` fills from the store and publishes back before
//! the import says what it imported.

use crate::nats_storage::{LocalCopy, storage_error};

/// Imports into the store at `url` (created as `run` creates it); runs are named by the URL.
pub fn run(
    url: &transcript_nats::StorageUrl,
    cmd: crate::ImportCmd,
    out: &mut dyn std::io::Write,
) -> Result<(), crate::CliError> {
    let dir = LocalCopy::create()?;
    let options = crate::nats_connect::options_from_env()?;
    let mut staging =
        transcript_nats::BlockingStaging::open(url, options, dir.path()).map_err(storage_error)?;
    let mut printed = Vec::new();
    let imported = crate::cmd::import::command(cmd, dir.path().into(), &mut printed, &mut || {
        staging.publish().map(drop).map_err(storage_error)
    });
    let printed = String::from_utf8_lossy(&printed)
        .replace(&format!("{}/", dir.path().display()), &format!("{url}/"));
    crate::exit::stdout_result(out.write_all(printed.as_bytes()))?;
    imported
}
