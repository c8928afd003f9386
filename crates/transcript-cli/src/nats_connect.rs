//! Connecting to NATS storage (#44): the `--storage` URL, the stream options and credentials
//! from the environment, and the connection error naming the URL (exit 4). Shared by
//! `nats_storage` (the commands on NATS storage) and `cmd::mirror`.

use std::path::Path;
use transcript_infra::Durability;
use transcript_nats::{NatsStore, StorageUrl, StreamOptions};

use crate::CliError;

/// The NATS URL `storage` names, if it names one.
pub fn url_of(storage: &Path) -> Result<Option<StorageUrl>, CliError> {
    let text = storage.to_string_lossy();
    if !StorageUrl::is_nats(&text) {
        return Ok(None);
    }
    StorageUrl::parse(&text)
        .map(Some)
        .map_err(|e| CliError::Usage(e.to_string()))
}

/// Stream options from the environment (`StreamOptions::from_env`): a bad value is a usage
/// error.
pub fn options_from_env() -> Result<StreamOptions, CliError> {
    StreamOptions::from_env().map_err(|e| CliError::Usage(e.to_string()))
}

/// `run`'s connection: `--durability always|interval` is refused first (exit 2), since the
/// runner can neither make JetStream sync before its ack nor see whether the server does.
pub async fn connect_for_run(
    url: &StorageUrl,
    durability: Durability,
) -> Result<NatsStore, CliError> {
    if durability != Durability::None {
        return Err(CliError::Usage(format!(
            "--durability {} cannot be honoured on NATS storage ({url}): an event is acknowledged once \
             the stream's replicas hold it (TRANSCRIPT_NATS_REPLICAS), and when it reaches their disks \
             is the servers' `jetstream {{ sync_interval }}` (default 2m; `always` syncs before each \
             ack). Set it on the servers and run without --durability",
            if durability == Durability::Always {
                "always"
            } else {
                "interval"
            }
        )));
    }
    // `run` is a writer: it creates the stream and the runs index when they do not exist.
    let store = NatsStore::connect(url, options_from_env()?)
        .await
        .map_err(|e| CliError::Storage(e.to_string()))?;
    keep_credentials_to_ourselves()?;
    // A stream this runner made: with how many copies, and why (the cluster it reached).
    if let Some(created) = store.created() {
        crate::diag!("transcript: note: {created}");
    }
    // Every event's line must fit the servers' max_payload: refused or told here, once.
    let (_, note) = store
        .value_cap(transcript_exec::bounded::DEFAULT_MAX_VALUE_BYTES)
        .map_err(|e| CliError::Storage(e.to_string()))?;
    if let Some(note) = note {
        crate::diag!("transcript: note: {note}");
    }
    Ok(store)
}

/// Connects a reader, or fails with the URL and the cause (exit 4: the storage is
/// unreachable, or holds no transcript store: readers never create one).
pub async fn connect(url: &StorageUrl) -> Result<NatsStore, CliError> {
    NatsStore::connect_existing(url, options_from_env()?)
        .await
        .map_err(|e| CliError::Storage(e.to_string()))
}

/// A follower's connection (`tail -f <run-id>`, `mirror --follow`) on servers without a
/// transcript store yet: says once that it waits for `what`, then waits for a runner to
/// create the store (`NatsStore::connect_existing_waiting`). Readers never create it.
pub async fn connect_waiting(url: &StorageUrl, what: &str) -> Result<NatsStore, CliError> {
    let waiting = || {
        crate::diag!(
            "transcript: waiting for {what} to appear in {url} (no transcript store there yet; \
             Ctrl-C to stop)…"
        );
    };
    NatsStore::connect_existing_waiting(url, options_from_env()?, waiting)
        .await
        .map_err(|e| CliError::Storage(e.to_string()))
}

/// The runner has read its credentials (`NATS_*`, withheld from every process of the run): it
/// makes itself non-dumpable (`PR_SET_DUMPABLE` 0, as ssh-agent does), so its `/proc/<pid>`
/// entries, `environ` with the variables it was started with among them, belong to root and
/// a step of the same user can neither read them nor ptrace the runner. A program a step
/// executes is dumpable again (execve resets the flag), so the runner's own use of its
/// children's `/proc` entries and pidfds is unchanged, and it still reads its own. Root, or a
/// process with `CAP_SYS_PTRACE`, still can: see README, "A fleet".
fn keep_credentials_to_ourselves() -> Result<(), CliError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).map_err(
        |e| {
            CliError::Failed(format!(
                "cannot keep the NATS credentials from the run's processes \
                 (prctl PR_SET_DUMPABLE): {e}"
            ))
        },
    )
}
