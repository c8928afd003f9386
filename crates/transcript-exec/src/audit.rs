//! The channels that predate the transcript and must not change because of
//! it (000 "Coexistence", FR-013, SC-004): the `audit.jsonl` trail of paired
//! start/end records (this file: the records and the file they go to) and
//! [`DisplayEvent`]s for human progress (`display.rs`), with the service's
//! `Observers` that hand both out; how a step ended is [`Status`]
//! (`status.rs`), re-exported here.
//!
//! Both read their own [`Clock`] (never the recorder's), and nothing in them
//! depends on whether a recorder is wired, so their bytes are identical with
//! and without a transcript.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use transcript_domain::{Clock, RunId, Timestamp};

pub use crate::display::{CollectDisplay, DisplayEvent, DisplaySink};
pub use crate::status::Status;

/// Which end of what an audit record marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditEvent {
    /// `run_start`.
    RunStart,
    /// `run_end` (with the run's status).
    RunEnd,
    /// `step_start`.
    StepStart,
    /// `step_end` (with the step's status).
    StepEnd,
}

/// One line of `audit.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// Audit clock reading.
    pub ts: Timestamp,
    /// The run.
    pub run_id: RunId,
    /// `run_start`, `run_end`, `step_start` or `step_end`.
    pub event: AuditEvent,
    /// Step path (`""` for run records).
    pub path: String,
    /// Innermost loop iteration.
    pub iteration: u64,
    /// Step name (workflow name for run records).
    pub name: String,
    /// Step kind (`workflow` for run records).
    pub kind: String,
    /// On `*_end`: how it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// On a failed `*_end`: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// On `call_workflow` steps: the child run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<RunId>,
}

/// Masks secrets in the text of audit records (the CLI passes its
/// redactor: `|t: &str| redactor.mask_text(t).into_owned()`).
pub trait TextMask: Send + Sync {
    /// The text with secrets masked.
    fn mask(&self, text: &str) -> String;
}

impl<F: Fn(&str) -> String + Send + Sync> TextMask for F {
    fn mask(&self, text: &str) -> String {
        self(text)
    }
}

/// Mode of the audit file, set with `fchmod` whatever the umask.
const FILE_MODE: u32 = 0o600;
/// Mode of the directories the trail creates.
const DIR_MODE: u32 = 0o700;

/// Appends [`AuditRecord`]s to a file, one JSON line each.
///
/// The file follows the transcript's rules: it is opened on the first
/// record (a run refused before it starts leaves no file), missing parent
/// directories are created 0o700, the file is opened
/// `O_APPEND | O_NOFOLLOW | O_CLOEXEC` (a symlink planted at the path is
/// refused, never followed), must be a regular file and gets mode 0o600.
/// An optional [`TextMask`] masks the path, name, kind and error of every
/// record before it is written.
pub struct AuditTrail {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
    mask: Option<Arc<dyn TextMask>>,
}

impl std::fmt::Debug for AuditTrail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditTrail")
            .field("path", &self.path)
            .field("masked", &self.mask.is_some())
            .finish()
    }
}

impl AuditTrail {
    /// A trail appending to `path`, opened on the first record.
    pub fn lazy(path: impl AsRef<Path>) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            file: Mutex::new(None),
            mask: None,
        }
    }

    /// Opens (creates or appends to) `path` now.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let mut trail = Self::lazy(path);
        let file = open_hardened(&trail.path)?;
        trail.file = Mutex::new(Some(file));
        Ok(trail)
    }

    /// Masks the text of every record with `mask`.
    pub fn with_mask(mut self, mask: Arc<dyn TextMask>) -> Self {
        self.mask = Some(mask);
        self
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record (opening the file first if needed). Errors are
    /// returned, never panicked on. This is blocking file I/O: the service
    /// calls it on tokio's blocking pool, never on a runtime worker.
    pub fn append(&self, record: &AuditRecord) -> std::io::Result<()> {
        let line = match &self.mask {
            None => serde_json::to_vec(record),
            Some(m) => serde_json::to_vec(&AuditRecord {
                path: m.mask(&record.path),
                name: m.mask(&record.name),
                kind: m.mask(&record.kind),
                error: record.error.as_deref().map(|e| m.mask(e)),
                ..record.clone()
            }),
        };
        let mut line = line.map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut file = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("audit trail lock poisoned"))?;
        if file.is_none() {
            *file = Some(open_hardened(&self.path)?);
        }
        hook::point(&self.path);
        match file.as_mut() {
            Some(f) => f.write_all(&line),
            None => Err(std::io::Error::other("audit trail not open")),
        }
    }
}

/// A test seam just before an audit line is written, so a test can hold
/// the write and show which thread it blocks. Nothing outside `cfg(test)`.
mod hook {
    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn point(_path: &std::path::Path) {}

    #[cfg(test)]
    pub(super) use imp::{install, point};

    #[cfg(test)]
    mod imp {
        use std::path::{Path, PathBuf};
        use std::sync::{Arc, Mutex};

        type Hook = Arc<dyn Fn() + Send + Sync>;

        static HOOKS: Mutex<Vec<(PathBuf, Hook)>> = Mutex::new(Vec::new());

        /// Calls `hook` before every write to a trail under `dir`.
        pub(in crate::audit) fn install(dir: &Path, hook: Hook) {
            HOOKS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((dir.to_owned(), hook));
        }

        pub(in crate::audit) fn point(path: &Path) {
            let hooks: Vec<Hook> = HOOKS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|(dir, _)| path.starts_with(dir))
                .map(|(_, hook)| Arc::clone(hook))
                .collect();
            for hook in hooks {
                hook();
            }
        }
    }
}

#[cfg(test)]
#[path = "audit_runtime_tests.rs"]
mod runtime_tests;

/// Creates the missing directories of `dir` with mode 0o700 (exactly:
/// the umask can only have removed bits, so each is chmodded after).
fn create_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.as_os_str().is_empty() || std::fs::symlink_metadata(d).is_ok() {
            break;
        }
        missing.push(d.to_path_buf());
        cur = d.parent();
    }
    for d in missing.iter().rev() {
        match std::fs::DirBuilder::new().mode(DIR_MODE).create(d) {
            Ok(()) => std::fs::set_permissions(d, std::fs::Permissions::from_mode(DIR_MODE))?,
            // Created concurrently by someone else: not ours to chmod.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn open_hardened(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(parent) = path.parent() {
        create_dirs(parent)?;
    }
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        // O_NONBLOCK: a FIFO planted at the path fails instead of blocking.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::new(
                    e.kind(),
                    format!("path is a symbolic link; refusing to follow it ({e})"),
                )
            } else {
                e
            }
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "not a regular file; refusing to write to it",
        ));
    }
    if meta.permissions().mode() & 0o7777 != FILE_MODE {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(file)
}

/// Audit trail + display + their clock, shared by the runs of a service.
#[derive(Clone)]
pub(crate) struct Observers {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) audit: Option<Arc<AuditTrail>>,
    pub(crate) display: Option<Arc<dyn DisplaySink>>,
    /// The text mask (the CLI's redactor under `--redact`), for text the
    /// service cuts before any later stage could see it whole.
    pub(crate) mask: Option<Arc<dyn TextMask>>,
}

impl Observers {
    /// Appends `record` on the blocking pool (async tasks never run file
    /// I/O): a slow disk holds this call, not a runtime worker. Returns
    /// the failure, if any, as text.
    pub(crate) async fn audit(&self, record: AuditRecord) -> Option<String> {
        let audit = Arc::clone(self.audit.as_ref()?);
        let path = audit.path().display().to_string();
        match tokio::task::spawn_blocking(move || audit.append(&record)).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("audit trail {path}: {e}")),
            Err(e) => Some(format!("audit trail {path}: the write did not finish: {e}")),
        }
    }

    pub(crate) fn display(&self, event: DisplayEvent) {
        if let Some(d) = &self.display {
            d.display(event);
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// `text` masked whole when a mask is configured: done before a part
    /// of it (a last line) is taken, since a fragment of a multi-line
    /// secret alone is not recognisable.
    pub(crate) fn mask_whole<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        match &self.mask {
            Some(m) => std::borrow::Cow::Owned(m.mask(text)),
            None => std::borrow::Cow::Borrowed(text),
        }
    }
}
