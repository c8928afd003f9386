//! `{{ x | file }}` (#48): free text handed to a program as a file instead of an argument.
//! The value is written to a `0600` file in the run's private directory (`0700`, created
//! fresh under the system's temporary directory, never reused: a directory already there
//! is an error, not a place to write), and the reference renders as that file's path, so
//! `["gh", "issue", "comment", "7", "--body-file", "{{ steps.summary.output | file }}"]`
//! posts an agent's answer without it ever being an argument.
//!
//! Files get random names (128 bits from `/dev/urandom`, #56): the path is recorded in the
//! transcript, so nothing in it may be derived from the content (a name after the content's
//! sha256 gave a 6-digit PIN away). Rendering the same value twice in a run (the step's
//! `step.started` record, then its run) gives the same file: the channel remembers, in
//! memory only, which file holds which content. The directory and its files are removed when
//! the run's last scope drops it, at the end of the run (a run killed with SIGKILL leaves it
//! behind, `0700`, in the temporary directory).

use std::collections::HashMap;
use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use transcript_domain::RunId;

/// The next directory number of this process (see [`FileChannel::make_dir`]).
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A run's private directory for `| file` values.
pub struct FileChannel {
    base: PathBuf,
    run: RunId,
    /// The directory, once the first file made it, and the files written in it by content
    /// (in memory only).
    dir: Mutex<Option<Written>>,
}

/// The run's directory and its files.
struct Written {
    dir: PathBuf,
    /// The path of the file holding each content written so far.
    files: HashMap<String, PathBuf>,
}

impl fmt::Debug for FileChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileChannel")
            .field("dir", &self.dir())
            .finish()
    }
}

impl FileChannel {
    /// The channel of run `run`, whose directory is made (on first use) under `base`.
    pub fn new(base: impl Into<PathBuf>, run: RunId) -> Self {
        Self {
            base: base.into(),
            run,
            dir: Mutex::new(None),
        }
    }

    /// The channel of run `run` under the system's temporary directory (`$TMPDIR`).
    pub fn in_temp_dir(run: RunId) -> Self {
        Self::new(std::env::temp_dir(), run)
    }

    /// The directory, if a file was written.
    pub fn dir(&self) -> Option<PathBuf> {
        self.dir
            .lock()
            .ok()
            .and_then(|d| d.as_ref().map(|w| w.dir.clone()))
    }

    /// Makes the run's directory, `transcript-run-<run id>-<pid>-<n>`: a name already taken
    /// (another process, a run killed earlier, or anybody else's directory) is never used,
    /// the next `n` is tried (at most 64), so no randomness is needed to be private.
    fn make_dir(&self) -> Result<PathBuf, String> {
        let pid = std::process::id();
        let mut last = None;
        for _ in 0..64 {
            let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
            let dir = self
                .base
                .join(format!("transcript-run-{}-{pid}-{n}", self.run));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(dir),
                Err(e) => {
                    return Err(format!(
                        "cannot make the run's private directory {}: {e}",
                        dir.display()
                    ));
                }
            }
        }
        Err(format!(
            "cannot make the run's private directory: 64 names taken, the last {}",
            last.map(|d| d.display().to_string()).unwrap_or_default()
        ))
    }

    /// Writes `text` to a private file and gives its path.
    pub fn write(&self, text: &str) -> Result<String, String> {
        let mut guard = self
            .dir
            .lock()
            .map_err(|_| "the run's file channel is unusable".to_owned())?;
        if guard.is_none() {
            *guard = Some(Written {
                dir: self.make_dir()?,
                files: HashMap::new(),
            });
        }
        let Some(written) = guard.as_mut() else {
            return Err("the run's file channel is unusable".to_owned());
        };
        if let Some(path) = written.files.get(text) {
            return Ok(path.display().to_string());
        }
        let path = written.dir.join(random_name()?);
        write_new(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.files.insert(text.to_owned(), path.clone());
        Ok(path.display().to_string())
    }
}

/// 32 hex digits from `/dev/urandom`: a name that says nothing of the content.
fn random_name() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot name a private file: /dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A new `0600` file holding `text` (never an existing one: `create_new`).
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

impl Drop for FileChannel {
    fn drop(&mut self) {
        if let Some(written) = self.dir.get_mut().ok().and_then(Option::take) {
            // Best effort: nothing to report to at the end of a run.
            let _ = std::fs::remove_dir_all(written.dir);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_value_becomes_a_private_file_removed_with_the_channel() {
        let base = tempfile::tempdir().unwrap();
        let run = RunId::parse("00000000-0000-4000-8000-000000000001").unwrap();
        let channel = FileChannel::new(base.path(), run);
        let path = channel.write("; rm -rf / #\n-- not an option").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "; rm -rf / #\n-- not an option"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(Path::new(&path)), 0o600);
        let dir = channel.dir().unwrap();
        assert_eq!(mode(&dir), 0o700);
        // The same value is the same file.
        assert_eq!(
            channel.write("; rm -rf / #\n-- not an option").unwrap(),
            path
        );
        // A name says nothing of the content: not its sha256, and another value, another name.
        let name = Path::new(&path).file_name().unwrap().to_str().unwrap();
        assert_ne!(
            name,
            crate::bounded::sha256_hex(b"; rm -rf / #\n-- not an option")
        );
        assert_eq!(name.len(), 32);
        let other = channel.write("482913").unwrap();
        assert_ne!(other, path);
        assert!(!other.contains(&crate::bounded::sha256_hex(b"482913")[..16]));
        // A second channel names the same content differently.
        let again = FileChannel::new(base.path(), run);
        assert_ne!(
            Path::new(&again.write("482913").unwrap()).file_name(),
            Path::new(&other).file_name()
        );
        drop(channel);
        assert!(!dir.exists());
    }

    #[test]
    fn a_directory_already_there_is_never_written_into() {
        let base = tempfile::tempdir().unwrap();
        let run = RunId::parse("00000000-0000-4000-8000-000000000002").unwrap();
        // Somebody made every name this process could try next: each is skipped.
        let pid = std::process::id();
        let next = NEXT_DIR.load(Ordering::Relaxed);
        for n in next..next + 200 {
            let taken = base.path().join(format!("transcript-run-{run}-{pid}-{n}"));
            std::fs::create_dir(&taken).unwrap();
            std::fs::write(taken.join("planted"), "x").unwrap();
        }
        let channel = FileChannel::new(base.path(), run);
        let e = channel.write("x").unwrap_err();
        assert!(e.contains("64 names taken"), "{e}");
        assert!(channel.dir().is_none());
    }
}
