//! What every handler shares ([`AppState`]): the store, the caller's price and definition
//! functions, the bill cache, the live list's snapshot and the shutdown signal; and
//! [`blocking`], how a handler calls the synchronous read port.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use transcript_domain::run_store::RunStore;

use crate::ViewerError;
use crate::config::{Definitions, Origins, Price};
use crate::snapshot::Snapshot;
use crate::summary::Summaries;

/// The handlers' shared state (cheap to clone).
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

/// What [`AppState`] holds.
pub struct Inner {
    /// The store, read-only.
    pub store: Arc<dyn RunStore>,
    /// The token every request must carry, if any.
    pub token: Option<String>,
    /// Prices a billed turn (`None`: costs show `—`).
    pub price: Option<Price>,
    /// The price table's name, for the run page's money section.
    pub price_table: String,
    /// Each side's step definitions for the diff.
    pub definitions: Option<Definitions>,
    /// Where imported runs came from, for `/receipts`.
    pub origins: Option<Origins>,
    /// Bills of runs, by run and event count.
    pub summaries: Summaries,
    /// The live list's view of the store.
    pub snapshot: Snapshot,
    /// Set when the server is shutting down: live streams end.
    pub cancel: CancellationToken,
    /// The wall clock (a running run's duration counts to now).
    pub clock: Arc<dyn transcript_domain::Clock>,
    /// How often the live list looks at the store while someone watches.
    pub poll: std::time::Duration,
}

impl AppState {
    /// The state around `inner`.
    pub fn new(inner: Inner) -> Self {
        AppState(Arc::new(inner))
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// Runs `f` on tokio's blocking pool (the read port is synchronous and may read files or wait
/// for servers); a panic there is an internal error, never the server's.
pub async fn blocking<T, F>(f: F) -> Result<T, ViewerError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ViewerError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ViewerError::Internal(e.to_string()))?
}
