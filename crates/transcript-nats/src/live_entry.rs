//! A recording run's runs-index entry: folded from each recorded event, written when the run
//! starts and ends, and, while it runs, with each renewal of its lease when it has new events
//! (`crate::lease`), so the index tells `list` a running run's events, last event time and
//! usage so far without reading the stream. Writes are serialized and each writes the entry as
//! it is then, so a renewal never overwrites a newer entry (the run's end included).

use std::sync::Mutex;

use transcript_domain::Seq;

use crate::index::{IndexStatus, RunEntry};
use crate::{NatsError, NatsStore};

/// The entry and what was last written of it.
#[derive(Debug)]
pub(crate) struct LiveEntry {
    entry: Mutex<RunEntry>,
    /// The events of the entry last written (held while a write is in flight).
    written: tokio::sync::Mutex<Seq>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl LiveEntry {
    pub(crate) fn new(entry: RunEntry) -> Self {
        Self {
            entry: Mutex::new(entry),
            written: tokio::sync::Mutex::new(0),
        }
    }

    /// Changes the entry; `f`'s answer says whether to write it now.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut RunEntry) -> R) -> R {
        f(&mut lock(&self.entry))
    }

    /// Writes the entry as it is now.
    pub(crate) async fn write(&self, store: &NatsStore) -> Result<(), NatsError> {
        let mut written = self.written.lock().await;
        let entry = lock(&self.entry).clone();
        store.put_run(&entry).await?;
        *written = entry.events;
        Ok(())
    }

    /// Writes the entry when the run is still running and recorded events since the last
    /// write (a lease renewal).
    pub(crate) async fn write_if_grown(&self, store: &NatsStore) -> Result<(), NatsError> {
        let mut written = self.written.lock().await;
        let entry = lock(&self.entry).clone();
        if entry.status != IndexStatus::Running || entry.events <= *written {
            return Ok(());
        }
        store.put_run(&entry).await?;
        *written = entry.events;
        Ok(())
    }
}
