//! `--storage nats://host:4222[,host:4222…][/STREAM]` (#44): what a command does on the fleet's
//! JetStream store instead of a directory.
//!
//! - `run` records through `transcript_nats::NatsRecorderFactory` (see `cmd::run`); the
//!   connection is made before anything runs, and a NATS that does not answer is an error
//!   naming the URL (exit 4). `replay` reads through the read port and records to the URL.
//!   `import` imports on a private staging directory that `transcript_nats::BlockingStaging`
//!   fills from the store and publishes back, pipelined (`nats_storage/import.rs`).
//! - Every other command only reads, through the read port (`crate::store`,
//!   `transcript_nats::NatsRunStore`): it opens the stream and runs index as they are and never
//!   creates them (no transcript store at the URL is exit 4; `tail -f` waits for it). Nothing
//!   is done here but letting them through, and nothing is copied to disk.
//! - `receipts --by` over the whole store reads the runs index (the billed turns of every run)
//!   and runs here.
//!
//! A run argument that is a path (an existing file or directory, or one with a `/` or ending in
//! `.jsonl`) is read as a file, as with a storage directory, and connects to nothing. Other run
//! arguments resolve as on a directory: a full run id, a unique prefix (against the runs index),
//! or `latest` (the newest root run of the index). Credentials come from the environment
//! (`NATS_CREDS`, `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_CA`, `NATS_CERT`/`NATS_KEY`),
//! never from argv.

use std::path::Path;

use transcript_nats::StorageUrl;

mod import;
mod receipts;

use crate::nats_connect::{connect, url_of};
use crate::{CliError, Command};

/// What `main` does with a command on `--storage`.
pub enum Route {
    /// Storage is a directory, or the command reads through the read port: nothing changes.
    Directory,
    /// The command ran here (`receipts --by` over the runs index).
    Done,
    /// `run`: records to this URL.
    Record(StorageUrl),
    /// `replay`: reads the recording through the read port and records the new run to this
    /// URL.
    Replay(StorageUrl),
}

/// Decides (and for `receipts --by`, does) what a command does on `storage`.
pub fn route(
    storage: &Path,
    command: &mut Command,
    out: &mut dyn std::io::Write,
) -> Result<Route, CliError> {
    // `mirror` names its source itself.
    if matches!(command, Command::Mirror(_)) {
        return Ok(Route::Directory);
    }
    let Some(url) = url_of(storage)? else {
        return Ok(Route::Directory);
    };
    match command {
        Command::Run(_) => Ok(Route::Record(url)),
        Command::Replay(_) => Ok(Route::Replay(url)),
        Command::Import(cmd) => import::run(&url, cmd.clone(), out).map(|()| Route::Done),
        Command::Receipts {
            run: None,
            by: Some(by),
            json,
            pricing,
        } => {
            let (by, json, pricing) = (*by, *json, pricing.clone());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
            runtime.block_on(async {
                let store = connect(&url).await?;
                receipts::run_grouped(&store, (by, json), pricing.as_deref(), out).await
            })?;
            Ok(Route::Done)
        }
        // The views: `crate::store` connects when a run of the store is read.
        _ => Ok(Route::Directory),
    }
}
