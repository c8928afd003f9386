//! A test seam at the places where the recorder does blocking file I/O, so
//! unit tests can hold such a call (a gate the test releases through a
//! channel) and show which thread it blocks. Compiled to nothing outside
//! `cfg(test)`.

/// Where the recorder is about to do blocking file I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site {
    /// Opening a run (after the file is opened and locked, before the
    /// resume scan).
    Open,
    /// A replaying subscription opening or reading the transcript.
    Replay,
}

/// Production: nothing.
#[cfg(not(test))]
#[inline(always)]
pub(crate) fn point(_path: &std::path::Path, _site: Site) {}

#[cfg(test)]
pub(crate) use imp::{install, point};

#[cfg(test)]
mod imp {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use super::Site;

    type Hook = Arc<dyn Fn(Site) + Send + Sync>;

    static HOOKS: Mutex<Vec<(PathBuf, Hook)>> = Mutex::new(Vec::new());

    /// Calls `hook` at every site whose path lies under `dir` (tests use
    /// their own temporary directories, so they do not see each other's).
    pub(crate) fn install(dir: &Path, hook: Hook) {
        HOOKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((dir.to_owned(), hook));
    }

    pub(crate) fn point(path: &Path, site: Site) {
        let hooks: Vec<Hook> = HOOKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(dir, _)| path.starts_with(dir))
            .map(|(_, hook)| Arc::clone(hook))
            .collect();
        for hook in hooks {
            hook(site);
        }
    }
}
