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
/// else the directory, whose imported agent-CLI sessions are open runs.
pub fn open(storage: &Path) -> Store {
    match crate::nats_connect::url_of(storage) {
        Ok(Some(url)) => Arc::new(Lazy {
            url,
            store: OnceLock::new(),
        }),
        _ => Arc::new(directory(storage)),
    }
}

/// A NATS store connected at its first use.
struct Lazy {
    url: transcript_nats::StorageUrl,
    store: OnceLock<Result<transcript_nats::NatsRunStore, String>>,
}

impl Lazy {
    fn get(&self) -> Result<&transcript_nats::NatsRunStore, StoreReadError> {
        let connected = self.store.get_or_init(|| {
            let options = transcript_nats::StreamOptions::from_env().map_err(|e| e.to_string())?;
            transcript_nats::NatsRunStore::connect(&self.url, options).map_err(|e| e.to_string())
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
        self.get()?.resolve(arg)
    }

    fn read(
        &self,
        run: transcript_domain::RunId,
    ) -> Result<Option<transcript_domain::run_store::StoredLines>, StoreReadError> {
        self.get()?.read(run)
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
