//! Runs being released in the background.
//!
//! Dropping a recorder's last handle does not wait for its writer thread
//! (that would block whichever thread drops it, often an async worker, on a
//! write, a sync or a `close(2)` in progress): the thread finishes what was
//! queued and closes the file, releasing the lock, on its own. Until it has,
//! the run is listed here, and opening the same run in this process waits
//! for that release instead of failing with `RecordError::Locked`, so
//! "drop, then open again" keeps working.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Release {
    done: Mutex<bool>,
    cv: Condvar,
}

static RELEASING: Mutex<Vec<(PathBuf, Arc<Release>)>> = Mutex::new(Vec::new());

fn list() -> MutexGuard<'static, Vec<(PathBuf, Arc<Release>)>> {
    RELEASING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The last handle of the run at `path` is gone; its writer thread will
/// call [`end`] once the file is closed.
pub(crate) fn begin(path: &Path) {
    list().push((path.to_owned(), Arc::default()));
}

/// The writer thread of the run at `path` has closed its file.
pub(crate) fn end(path: &Path) {
    let done: Vec<Arc<Release>> = {
        let mut list = list();
        let (done, keep) = list.drain(..).partition(|(p, _)| p == path);
        *list = keep;
        done.into_iter().map(|(_, r)| r).collect()
    };
    for release in done {
        *release.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        release.cv.notify_all();
    }
}

/// Waits (at most `limit`) until a run at `path` that is being released
/// is; `false` if none was being released (or it took too long).
pub(crate) fn wait(path: &Path, limit: Duration) -> bool {
    let Some(release) = list()
        .iter()
        .find(|(p, _)| p == path)
        .map(|(_, r)| Arc::clone(r))
    else {
        return false;
    };
    let deadline = Instant::now() + limit;
    let mut done = release.done.lock().unwrap_or_else(|e| e.into_inner());
    while !*done {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        done = release
            .cv
            .wait_timeout(done, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    true
}
