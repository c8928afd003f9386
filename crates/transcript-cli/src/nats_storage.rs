//! `--storage nats://host:4222[,host:4222…][/STREAM]` (#44): the commands on the fleet's
//! JetStream store instead of a directory.
//!
//! - `run` records through `transcript_nats::NatsRecorderFactory` (see `cmd::run`); the
//!   connection is made before anything runs, and a NATS that does not answer is an error
//!   naming the URL (exit 4).
//! - Every other command only reads: it opens the stream and runs index as they are and never
//!   creates them (no transcript store at the URL is exit 4; `tail -f <run-id>` waits for it).
//! - `list` reads the runs index, and the stream for runs it has not seen complete.
//! - `tail -f` follows the run's subject: the stored events, then the live ones.
//! - Every other command reads the runs it names (and their child runs) from the stream into
//!   a private local directory, removed when the command ends, and runs as on a directory:
//!   the lines are byte-identical to the file recorder's, so every view is the same.
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

use transcript_domain::tree::Status;
use transcript_domain::{RunId, decode_line};
use transcript_nats::{IndexStatus, NatsStore, RunEntry, StorageUrl};

mod import;
mod receipts;

use crate::nats_connect::{connect, url_of};
use crate::style::Style;
use crate::{CliError, Command, cmd};

fn storage_error(e: transcript_nats::NatsError) -> CliError {
    CliError::Storage(e.to_string())
}

/// A private directory holding the runs a command reads, removed on drop.
#[derive(Debug)]
pub struct LocalCopy {
    dir: PathBuf,
}

impl LocalCopy {
    fn create() -> Result<Self, CliError> {
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
}

/// Decides (and for `list` and `tail -f`, does) what a command does on `storage`.
pub fn route(
    storage: &Path,
    command: &mut Command,
    style: &Style,
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
    // A transcript file (or directory) named by its path is read as a file, whatever the
    // storage: nothing of NATS is needed, and nothing is connected to.
    if run_args(command).is_some_and(|args| !args.is_empty() && args.iter().all(|a| is_path(a))) {
        return Ok(Route::Directory);
    }
    if matches!(command, Command::Replay(_)) {
        return Err(CliError::Usage(
            "replay reads and records in a storage directory: mirror the run there first"
                .to_owned(),
        ));
    }
    if let Command::Import(cmd) = command {
        return import::run(&url, cmd.clone(), out).map(|()| Route::Done);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let store = match command {
            // A follower of a run named in full waits for the store as it waits for the run.
            Command::Tail {
                run, follow: true, ..
            } if RunId::parse(run).is_ok() => {
                crate::nats_connect::connect_waiting(&url, &format!("run {run}")).await?
            }
            _ => connect(&url).await?,
        };
        route_on(&store, &url, command, style, out).await
    })
}

async fn route_on(
    store: &NatsStore,
    url: &StorageUrl,
    command: &mut Command,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<Route, CliError> {
    let whole = |arg: &str| StorageUrl::parse(arg).is_ok_and(|u| u == *url);
    match command {
        Command::List(options) => {
            let runs = store.runs().await.map_err(storage_error)?;
            let runs = runs.into_iter().map(|e| summary(url, e)).collect();
            crate::cmd::list::print(runs, *options, style, out)?;
            Ok(Route::Done)
        }
        Command::Tail {
            run,
            follow: true,
            until_complete,
        } => {
            let id = resolve(store, run).await?;
            follow(store, id, *until_complete, style, out).await?;
            Ok(Route::Done)
        }
        Command::Validate { runs, .. } => {
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
            Ok(Route::Local(copy))
        }
        Command::Stats { target: arg, .. } if whole(arg) => {
            let copy = LocalCopy::create()?;
            copy_all(store, copy.path()).await?;
            *arg = copy.path().display().to_string();
            Ok(Route::Local(copy))
        }
        Command::Receipts {
            run: None,
            by: Some(by),
            json,
            pricing,
        } => {
            receipts::run_grouped(store, (*by, *json), pricing.as_deref(), out).await?;
            Ok(Route::Done)
        }
        Command::Diff(args) => {
            let copy = LocalCopy::create()?;
            args.a = copy_named(store, &args.a, copy.path()).await?;
            args.b = copy_named(store, &args.b, copy.path()).await?;
            Ok(Route::Local(copy))
        }
        Command::Check(cmd::check::CheckArgs { run: arg, .. }) => {
            let copy = LocalCopy::create()?;
            *arg = copy_named(store, arg, copy.path()).await?;
            Ok(Route::Local(copy))
        }
        Command::Export { run: arg, .. }
        | Command::Tree { run: arg, .. }
        | Command::Show { run: arg }
        | Command::Tail { run: arg, .. }
        | Command::Stats { target: arg, .. }
        | Command::Receipts { run: Some(arg), .. } => {
            let copy = LocalCopy::create()?;
            *arg = copy_named(store, arg, copy.path()).await?;
            Ok(Route::Local(copy))
        }
        _ => Err(CliError::Usage(
            "this command does not take NATS storage".to_owned(),
        )),
    }
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

/// A list row from an index entry.
fn summary(url: &StorageUrl, e: RunEntry) -> crate::runs::RunSummary {
    use crate::runs::RunStatus;
    crate::runs::RunSummary {
        run_id: e.run_id,
        parent_run_id: e.parent_run_id,
        workflow: e.workflow,
        status: match e.status {
            IndexStatus::Succeeded => RunStatus::Succeeded,
            IndexStatus::Failed => RunStatus::Failed,
            IndexStatus::Running => RunStatus::Running,
            IndexStatus::Abandoned => RunStatus::Abandoned,
        },
        started_at: e.started_at,
        duration_ms: e
            .started_at
            .zip(e.ended_at)
            .map(|(s, end)| end.millis_since(s)),
        events: e.events,
        path: PathBuf::from(format!("{url}#{}", e.run_id)),
        // `replay` records in a storage directory only (see `route`).
        replay_of: None,
    }
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
async fn copy_named(store: &NatsStore, arg: &str, dir: &Path) -> Result<String, CliError> {
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

/// `tail -f` on NATS: replays the run, then follows it live. Unless `--forever`, it ends
/// with the run as the file follower does: after the root's `run.completed` and the
/// `run.completed` of every child run it saw with events (waited for, not printed), with the
/// root's status (failed `Reported(1)`, cancelled `Reported(EXIT_CANCELLED)`).
async fn follow(
    store: &NatsStore,
    run: RunId,
    until_complete: bool,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    use crate::cmd::tail::EXIT_CANCELLED;
    let mut pending = vec![run];
    let mut root_status = None;
    let mut sink = std::io::sink();
    while let Some(next) = pending.pop() {
        // A child with no event after its parent completed never started: not waited for.
        match store.last_stream_seq(next).await.map_err(storage_error)? {
            None if next != run => continue,
            None => crate::diag!(
                "transcript: waiting for run {run} to appear in {} (Ctrl-C to stop)…",
                store.url()
            ),
            Some(_) => {}
        }
        // The root's events are shown; its child runs are only waited for.
        let shown: &mut dyn std::io::Write = if next == run { &mut *out } else { &mut sink };
        let (status, children) = follow_one(store, next, until_complete, style, shown).await?;
        // A run that never completes (--forever, or a stream that ended) ends the command.
        let Some(status) = status else {
            return Ok(());
        };
        root_status.get_or_insert(status);
        pending.extend(children);
    }
    match root_status {
        Some(Status::Failed) => Err(CliError::Reported(1)),
        Some(Status::Cancelled) => Err(CliError::Reported(EXIT_CANCELLED)),
        _ => Ok(()),
    }
}

/// Writes one run's events to `out` until its `run.completed` (with `until_complete`);
/// returns its status then, and the child runs it named.
async fn follow_one(
    store: &NatsStore,
    run: RunId,
    until_complete: bool,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(Option<Status>, Vec<RunId>), CliError> {
    use transcript_domain::{DecodedPayload, EventKind, EventType};
    let mut follower = store.follow(run).await.map_err(storage_error)?;
    let mut children = Vec::new();
    let mut shown = 0u64;
    // While no line comes, the run's lease is looked at this often.
    let every = (store.options().lease / 3).clamp(
        std::time::Duration::from_millis(200),
        std::time::Duration::from_secs(2),
    );
    let grace = store.options().lease / 3 + std::time::Duration::from_secs(1);
    let mut unheld_since = None;
    loop {
        let line = tokio::select! {
            line = follower.next_line() => line,
            () = tokio::time::sleep(every), if until_complete && shown > 0 => {
                if !store.abandoned_after(run, follower.position()).await {
                    unheld_since = None;
                    continue;
                }
                // Seen lapsed for a whole renewal period: a live runner that was cut off
                // from the servers (a restart) has renewed by then.
                let since = *unheld_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= grace {
                    return Err(CliError::Storage(format!(
                        "run {run} in {} was abandoned: it has no run.completed and its \
                         runner's lease lapsed (the runner died or was killed); what it \
                         recorded is shown above",
                        store.url()
                    )));
                }
                continue;
            }
        };
        let Some(line) = line else { break };
        let line = line.map_err(storage_error)?;
        shown += 1;
        match decode_line(&line) {
            Ok(decoded) => {
                let event = &decoded.event;
                crate::exit::stdout_result(writeln!(
                    out,
                    "{}",
                    crate::cmd::tail::summary(event, style)
                ))?;
                crate::exit::stdout_result(out.flush())?;
                if let Some(child) = event.child_run_id
                    && !children.contains(&child)
                {
                    children.push(child);
                }
                if until_complete && event.kind == EventKind::Known(EventType::RunCompleted) {
                    let error = match &event.payload {
                        DecodedPayload::Step(s) => s.error.as_deref(),
                        _ => None,
                    };
                    return Ok((Some(Status::of_completion(error)), children));
                }
            }
            Err(e) => crate::diag!("{} run {run}: malformed: {e}", store.url()),
        }
    }
    Ok((None, children))
}
