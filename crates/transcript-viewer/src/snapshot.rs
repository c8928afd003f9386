//! The live list's last look at the store ([`Snapshot`]): versioned, so a page rendered at
//! version `V` can be sent every run changed after it (see `live`).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::broadcast;
use transcript_domain::RunId;
use transcript_domain::Seq;
use transcript_domain::run_store::RunState;

/// The live list's view of the store.
pub struct Snapshot {
    inner: Mutex<Seen>,
    /// Rows of changed runs, with the version they changed at.
    pub sender: broadcast::Sender<(u64, String)>,
}

/// The last look: its version, and each run's state, event count and the version it last
/// changed at.
#[derive(Default)]
pub struct Seen {
    /// The version of the last look.
    pub version: u64,
    /// Each run's state, event count and change version.
    pub runs: HashMap<RunId, (RunState, Seq, u64)>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            inner: Mutex::default(),
            sender: broadcast::channel(1024).0,
        }
    }
}

impl Snapshot {
    /// The last look.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
