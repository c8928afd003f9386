//! The composition root of the read port (#52): `--storage` names a directory or a NATS URL,
//! and every command that reads runs reads them through
//! [`transcript_domain::run_store::RunStore`], whichever it is.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use transcript_domain::run_store::{RunStore, StoreReadError};
use transcript_infra::DirRunStore;

use crate::CliError;

/// A store as the commands hold it.
pub type Store = Arc<dyn RunStore>;

/// The store `storage` names: the JetStream store at a `nats://` URL (connected as a reader,
/// nothing created, at its first use: a command whose runs are all files never connects),
/// else the directory, whose imported agent-CLI sessions are open runs. A malformed URL or
/// stream setting in the environment is a usage error (exit 2).
pub fn open(storage: &Path) -> Result<Store, CliError> {
    open_with(storage, None)
}

/// [`open`] for `tail`; following (`-f`), on NATS servers without a transcript store yet, it
/// says so once and waits for a runner to create it (readers never create it).
pub fn for_tail(storage: &Path, run: &str, follow: bool) -> Result<Store, CliError> {
    if !follow {
        return open(storage);
    }
    let what = match transcript_domain::RunId::parse(run) {
        Ok(id) => format!("run {id}"),
        Err(_) => "a transcript store".to_owned(),
    };
    open_with(storage, Some(what))
}

fn open_with(storage: &Path, wait: Option<String>) -> Result<Store, CliError> {
    Ok(match crate::nats_connect::url_of(storage)? {
        Some(url) => Arc::new(Lazy {
            url,
            options: crate::nats_connect::options_from_env()?,
            wait,
            store: OnceLock::new(),
        }),
        None => Arc::new(directory(storage)),
    })
}

/// A run argument that is a run's location as a command printed it (`nats://…/STREAM#<id>`,
/// or `nats://…/STREAM/<id>.jsonl`): the store at that URL (`store` itself when it is that
/// store; a follower waits for the store to be created) and the run to resolve in it. `None`
/// for any other argument; a location whose URL is not usable is a usage error.
pub fn located(
    arg: &str,
    store: &Store,
    follow: bool,
) -> Result<Option<(Store, String)>, CliError> {
    let location =
        transcript_nats::RunLocation::parse(arg).map_err(|e| CliError::Usage(e.to_string()))?;
    let Some(location) = location else {
        return Ok(None);
    };
    if store.location() == location.url.to_string() {
        return Ok(Some((store.clone(), location.run)));
    }
    let opened: Store = Arc::new(Lazy {
        options: crate::nats_connect::options_from_env()?,
        wait: follow.then(|| format!("run {}", location.run)),
        url: location.url,
        store: OnceLock::new(),
    });
    Ok(Some((opened, location.run)))
}

/// A NATS store connected at its first use.
struct Lazy {
    url: transcript_nats::StorageUrl,
    options: transcript_nats::StreamOptions,
    /// Wait for the store to be created (a follower), saying it waits for this.
    wait: Option<String>,
    store: OnceLock<Result<transcript_nats::NatsRunStore, String>>,
}

impl Lazy {
    fn get(&self) -> Result<&transcript_nats::NatsRunStore, StoreReadError> {
        let connected = self.store.get_or_init(|| {
            let options = self.options.clone();
            let connected = match &self.wait {
                Some(what) => {
                    let (url, what) = (self.url.clone(), what.clone());
                    let waiting = move || {
                        crate::diag!(
                            "transcript: waiting for {what} to appear in {url} (no transcript \
                             store there yet; Ctrl-C to stop)…"
                        );
                    };
                    transcript_nats::NatsRunStore::connect_waiting(&self.url, options, waiting)
                }
                None => transcript_nats::NatsRunStore::connect(&self.url, options),
            };
            connected.map_err(|e| e.to_string())
        });
        connected
            .as_ref()
            .map_err(|message| StoreReadError::Unavailable {
                location: self.url.to_string(),
                message: message.clone(),
            })
    }
}

impl RunStore for Lazy {
    fn location(&self) -> String {
        self.url.to_string()
    }

    fn runs(&self) -> Result<Vec<transcript_domain::run_store::StoredRun>, StoreReadError> {
        self.get()?.runs()
    }

    fn resolve(&self, arg: &str) -> Result<transcript_domain::RunId, StoreReadError> {
        // A run's location in this store, as a command printed it.
        match transcript_nats::RunLocation::parse(arg) {
            Ok(Some(location)) if location.url.same_store(&self.url) => {
                self.get()?.resolve(&location.run)
            }
            _ => self.get()?.resolve(arg),
        }
    }

    fn read(
        &self,
        run: transcript_domain::RunId,
    ) -> Result<Option<transcript_domain::run_store::StoredLines>, StoreReadError> {
        self.get()?.read(run)
    }

    fn contains(&self, run: transcript_domain::RunId) -> Result<bool, StoreReadError> {
        self.get()?.contains(run)
    }

    fn follow(
        &self,
        run: transcript_domain::RunId,
        watch_lease: bool,
        each: &mut dyn FnMut(
            transcript_domain::run_store::FollowItem<'_>,
        ) -> std::ops::ControlFlow<()>,
    ) -> Result<transcript_domain::run_store::FollowEnd, StoreReadError> {
        self.get()?.follow(run, watch_lease, each)
    }
}

/// A storage directory through the port.
pub fn directory(dir: &Path) -> DirRunStore {
    // An unreadable index only costs the distinction open/abandoned here; `import` reports it.
    let sessions = crate::import_index::Index::load(dir)
        .map(|index| index.session_runs())
        .unwrap_or_default();
    DirRunStore::new(dir).with_open_sessions(sessions)
}

/// A port error as the CLI reports it: not found and ambiguous are exit 3, an unreadable file
/// too, a store that does not answer exit 4.
pub fn error(e: StoreReadError) -> CliError {
    match e {
        StoreReadError::NotFound { what, location } => CliError::NotFound {
            what,
            path: location.into(),
        },
        StoreReadError::Unavailable { location, message } if !location.starts_with("nats://") => {
            CliError::Read {
                path: location.into(),
                message,
            }
        }
        // The NATS errors name the URL already.
        StoreReadError::Unavailable { location, message } if message.contains(&location) => {
            CliError::Storage(message)
        }
        e @ StoreReadError::Unavailable { .. } => CliError::Storage(e.to_string()),
        other => CliError::Invalid(other.to_string()),
    }
}
