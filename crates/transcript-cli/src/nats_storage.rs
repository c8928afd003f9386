//! `--storage nats://host:4222[,host:4222…][/STREAM]` (#44): the commands on the fleet's
//! JetStream store instead of a directory.
//!
//! - `run` records through `transcript_nats::NatsRecorderFactory` (see `cmd::run`); the
//!   connection is made before anything runs, and a NATS that does not answer is an error
//!   naming the URL (exit 4).
//! - `replay` reads through the read port and records to the URL.
//! - Every other command only reads: it opens the stream and runs index as they are and never
//!   creates them (no transcript store at the URL is exit 4; `tail -f` waits for it).
//! - `list`, `show`, `tree`, `stats`, `tail`, `export`, `receipts <run>`, `diff` and `check`
//!   read through the read port (`crate::store`, `transcript_nats::NatsRunStore`): nothing is
//!   done here but letting them through.
//! - `receipts --by` reads the runs index (the billed turns of every run).
//! - `validate`, and `receipts --by` of one run, read the runs they name (and their child
//!   runs) into a private local directory, removed when the command ends, and run as on a
//!   directory: the lines are byte-identical to the file recorder's.
//!
//! A run argument that is a path (an existing file or directory, or one with a `/` or ending in
//! `.jsonl`) is read as a file, as with a storage directory: a command whose run arguments are
//! all paths does not connect at all. Other run arguments resolve as on a directory: a full
//! run id, a unique prefix (against the runs
//! index), or `latest` (the newest root run of the index). Credentials come from the
//! environment (`NATS_CREDS`, `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_CA`,
//! `NATS_CERT`/`NATS_KEY`), never from argv.

use std::collections::BTreeSet;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use transcript_domain::{RunId, decode_line};
use transcript_nats::{NatsStore, StorageUrl};

mod receipts;

use crate::nats_connect::{connect, url_of};
use crate::{CliError, Command};

fn storage_error(e: transcript_nats::NatsError) -> CliError {
    CliError::Storage(e.to_string())
}

/// A private directory holding the runs a command reads, removed on drop.
#[derive(Debug)]
pub struct LocalCopy {
    dir: PathBuf,
}

impl LocalCopy {
    pub(crate) fn create() -> Result<Self, CliError> {
        use transcript_domain::RunIdGenerator;
        let unique = transcript_infra::RandomRunIds.next_run_id();
        let dir = std::env::temp_dir().join(format!("transcript-nats-{unique}"));
        // mkdir fails on anything already there (a planted symlink included).
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| CliError::Storage(format!("{}: {e}", dir.display())))?;
        Ok(Self { dir })
    }

    /// The directory (the storage the command runs on).
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for LocalCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What `main` does with a command on NATS storage.
pub enum Route {
    /// Storage is a directory: nothing changes.
    Directory,
    /// The command ran here (`list`, `tail -f`).
    Done,
    /// `run`: records to this URL.
    Record(StorageUrl),
    /// Run the command on this local copy (its run arguments were rewritten to full run ids).
    Local(LocalCopy),
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
    if matches!(command, Command::Run(_)) {
        return Ok(Route::Record(url));
    }
    if matches!(command, Command::Replay(_)) {
        return Ok(Route::Replay(url));
    }
    // The views on the read port: `crate::store` connects when a run of the store is read.
    if on_port(command) {
        return Ok(Route::Directory);
    }
    // A transcript file (or directory) named by its path is read as a file, whatever the
    // storage: nothing of NATS is needed, and nothing is connected to.
    if run_args(command).is_some_and(|args| !args.is_empty() && args.iter().all(|a| is_path(a))) {
        return Ok(Route::Directory);
    }
    if matches!(command, Command::Import(_)) {
        return Err(CliError::Usage(
            "import writes to a storage directory: import there, then record runs to NATS"
                .to_owned(),
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let store = connect(&url).await?;
        route_on(&store, &url, command, out).await
    })
}

async fn route_on(
    store: &NatsStore,
    url: &StorageUrl,
    command: &mut Command,
    out: &mut dyn std::io::Write,
) -> Result<Route, CliError> {
    let whole = |arg: &str| StorageUrl::parse(arg).is_ok_and(|u| u == *url);
    match command {
        Command::Validate { runs, .. } => validate_copy(store, runs, whole).await.map(Route::Local),
        Command::Receipts {
            run: None,
            by: Some(by),
            json,
            pricing,
        } => {
            receipts::run_grouped(store, (*by, *json), pricing.as_deref(), out).await?;
            Ok(Route::Done)
        }
        Command::Receipts { run: Some(arg), .. } => {
            let copy = LocalCopy::create()?;
            *arg = copy_named(store, arg, copy.path()).await?;
            Ok(Route::Local(copy))
        }
        _ => Err(CliError::Usage(
            "this command does not take NATS storage".to_owned(),
        )),
    }
}

/// `validate`'s arguments read through a local copy: a path in place, the whole store's URL
/// as the copy's directory, a run (and its children) as its id in the copy.
async fn validate_copy(
    store: &NatsStore,
    runs: &mut [String],
    whole: impl Fn(&str) -> bool,
) -> Result<LocalCopy, CliError> {
    let copy = LocalCopy::create()?;
    for arg in runs.iter_mut() {
        *arg = if is_path(arg) {
            // Read in place (the copy's directory does not hide it).
            continue;
        } else if whole(arg) {
            copy_all(store, copy.path()).await?;
            copy.path().display().to_string()
        } else {
            copy_named(store, arg, copy.path()).await?
        };
    }
    Ok(copy)
}

/// Whether the command reads its runs through the read port (`crate::store`), on any storage.
fn on_port(command: &Command) -> bool {
    matches!(
        command,
        Command::List(_)
            | Command::Export { .. }
            | Command::Tree { .. }
            | Command::Show { .. }
            | Command::Diff(_)
            | Command::Check(_)
            | Command::Stats { .. }
            | Command::Tail { .. }
            | Command::Receipts {
                run: Some(_),
                by: None,
                ..
            }
    )
}

/// The run arguments of a command that takes runs (`None` for the others).
fn run_args(command: &Command) -> Option<Vec<&str>> {
    match command {
        Command::Validate { runs, .. } => Some(runs.iter().map(String::as_str).collect()),
        Command::Export { run, .. }
        | Command::Tree { run, .. }
        | Command::Show { run }
        | Command::Tail { run, .. }
        | Command::Stats { target: run, .. }
        | Command::Receipts { run: Some(run), .. } => Some(vec![run.as_str()]),
        Command::Diff(args) => Some(vec![args.a.as_str(), args.b.as_str()]),
        Command::Check(args) => Some(vec![args.run.as_str()]),
        _ => None,
    }
}

/// Whether a run argument names a file or directory rather than a run of the store: an
/// existing path (as on a storage directory, a path wins), or what no run id, prefix or
/// `latest` can be (a `/`, or the `.jsonl` of a transcript that does not exist yet, which
/// `tail -f` waits for and the other commands report missing by its path).
fn is_path(arg: &str) -> bool {
    !StorageUrl::is_nats(arg)
        && (Path::new(arg).exists() || arg.contains('/') || arg.ends_with(".jsonl"))
}

/// A run argument against the runs index: a full run id, a unique prefix, or `latest`.
async fn resolve(store: &NatsStore, arg: &str) -> Result<RunId, CliError> {
    if let Ok(id) = RunId::parse(arg) {
        return Ok(id);
    }
    let not_found = |what: String| CliError::NotFound {
        what,
        path: PathBuf::from(store.url().to_string()),
    };
    let runs = store.runs().await.map_err(storage_error)?;
    if arg == "latest" {
        return runs
            .iter()
            .filter(|r| r.parent_run_id.is_none() && r.started_at.is_some())
            .max_by_key(|r| (r.started_at, r.run_id))
            .map(|r| r.run_id)
            .ok_or_else(|| not_found("any run (for `latest`)".to_owned()));
    }
    let prefix = arg.to_ascii_lowercase();
    let matches: BTreeSet<RunId> = runs
        .iter()
        .map(|r| r.run_id)
        .filter(|id| prefix.len() >= 4 && id.to_string().starts_with(&prefix))
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().unwrap_or_else(|| unreachable!())),
        0 => Err(not_found(format!("run {arg:?}"))),
        n => Err(CliError::Invalid(format!(
            "run id prefix {prefix:?} is ambiguous: {n} runs match"
        ))),
    }
}

/// Copies the run `arg` names and its child runs; returns its full id (the rewritten argument).
pub(crate) async fn copy_named(
    store: &NatsStore,
    arg: &str,
    dir: &Path,
) -> Result<String, CliError> {
    let id = resolve(store, arg).await?;
    let mut pending = vec![id];
    let mut seen = BTreeSet::new();
    while let Some(run) = pending.pop() {
        if !seen.insert(run) {
            continue;
        }
        match copy_run(store, run, dir).await {
            Ok(children) => pending.extend(children),
            // A child run that never recorded an event is shown as missing, as on files.
            Err(transcript_nats::NatsError::NotFound { .. }) if run != id => {}
            Err(transcript_nats::NatsError::NotFound { .. }) => {
                return Err(CliError::NotFound {
                    what: format!("run {run}"),
                    path: PathBuf::from(store.url().to_string()),
                });
            }
            Err(e) => return Err(storage_error(e)),
        }
    }
    Ok(id.to_string())
}

/// Copies every run of the stream.
async fn copy_all(store: &NatsStore, dir: &Path) -> Result<(), CliError> {
    for run in store.stream_run_ids().await.map_err(storage_error)? {
        copy_run(store, run, dir).await.map_err(storage_error)?;
    }
    Ok(())
}

/// Writes one run's lines to `<dir>/<run>.jsonl`; returns the child runs its events name.
async fn copy_run(
    store: &NatsStore,
    run: RunId,
    dir: &Path,
) -> Result<Vec<RunId>, transcript_nats::NatsError> {
    let lines = store.run_lines(run).await?;
    let children = lines
        .iter()
        .filter_map(|l| decode_line(l).ok()?.event.child_run_id)
        .collect();
    let path = dir.join(run.file_name());
    // A run without run.completed is running or abandoned by its lease on the servers (the
    // copy holds no lock): looked at after its lines, then the stream once more, as `list`.
    if !completes(&lines) {
        let held = store.lease_held(run).await?;
        let settled = held || completes(&[store.last_line(run).await?.unwrap_or_default()]);
        crate::runs::set_remote_liveness(&path, settled);
    }
    let io = |e: std::io::Error| transcript_nats::NatsError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(file) => file,
        // Copied already by an earlier argument of this command.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(children),
        Err(e) => return Err(io(e)),
    };
    std::io::Write::write_all(&mut file, &lines.concat()).map_err(io)?;
    Ok(children)
}

/// Whether the last of `lines` is a `run.completed`.
fn completes<B: AsRef<[u8]>>(lines: &[B]) -> bool {
    use transcript_domain::{EventKind, EventType};
    lines.last().is_some_and(|l| {
        decode_line(l.as_ref())
            .is_ok_and(|d| d.event.kind == EventKind::Known(EventType::RunCompleted))
    })
}
