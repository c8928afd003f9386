//! `import` on NATS storage (#52 item 3): the file import on a private staging directory
//! that `transcript_nats::BlockingStaging` fills from the store and publishes back before
//! the import says what it imported.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::CliError;

fn storage_error(e: transcript_nats::NatsError) -> CliError {
    CliError::Storage(e.to_string())
}

/// A private staging directory (0700, made fresh: `mkdir` fails on anything already there, a
/// planted symlink included), removed on drop.
struct StagingDir {
    dir: PathBuf,
}

impl StagingDir {
    fn create() -> Result<Self, CliError> {
        use transcript_domain::RunIdGenerator;
        let unique = transcript_infra::RandomRunIds.next_run_id();
        let dir = std::env::temp_dir().join(format!("transcript-nats-{unique}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| CliError::Storage(format!("{}: {e}", dir.display())))?;
        Ok(Self { dir })
    }

    fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `printed` with each staged file (`<dir>/<run id>.jsonl`) named by its run's location in the
/// store, the form every command prints and `show` accepts (`nats://…/STREAM#<run id>`).
fn locations(printed: &str, dir: &Path, url: &transcript_nats::StorageUrl) -> String {
    let staged = format!("{}/", dir.display());
    let mut out = String::with_capacity(printed.len());
    let mut rest = printed;
    while let Some(at) = rest.find(&staged) {
        out.push_str(&rest[..at]);
        let after = &rest[at + staged.len()..];
        let file = after.split(['\t', '\n']).next().unwrap_or_default();
        match file
            .strip_suffix(".jsonl")
            .and_then(|id| id.parse::<transcript_domain::RunId>().ok())
        {
            Some(run) => out.push_str(&url.run_location(run)),
            None => out.push_str(&format!("{url}/{file}")),
        }
        rest = &after[file.len()..];
    }
    out.push_str(rest);
    out
}

/// Imports into the store at `url` (created as `run` creates it); runs are named by the URL.
pub fn run(
    url: &transcript_nats::StorageUrl,
    cmd: crate::ImportCmd,
    out: &mut dyn std::io::Write,
) -> Result<(), crate::CliError> {
    let dir = StagingDir::create()?;
    let options = crate::nats_connect::options_from_env()?;
    let mut staging =
        transcript_nats::BlockingStaging::open(url, options, dir.path()).map_err(storage_error)?;
    let mut printed = Vec::new();
    let imported = crate::cmd::import::command(cmd, dir.path().into(), &mut printed, &mut || {
        staging.publish().map(drop).map_err(storage_error)
    });
    let printed = locations(&String::from_utf8_lossy(&printed), dir.path(), url);
    crate::exit::stdout_result(out.write_all(printed.as_bytes()))?;
    imported
}
