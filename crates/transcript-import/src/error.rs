//! What an import reports: its faults ([`ImportError`]) and its progress ([`Notice`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why an input, a store or the index could not be imported. Each names what it is about
/// (the file and the cause); nothing already made durable is lost by one.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A store root that does not exist.
    #[error("{}: {what} not found", path.display())]
    NotFound {
        /// What was looked for.
        what: String,
        /// Where.
        path: PathBuf,
    },
    /// A file that could not be read, written or made durable, or input that is not what it
    /// should be (empty, an unknown format, no agent output, a torn index).
    #[error("{}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// An import that failed as a whole.
    #[error("{0}")]
    Invalid(String),
    /// The storage could not be written (the index, a transcript).
    #[error("{0}")]
    Storage(String),
    /// A request the importer cannot act on (a store without its provider, a bad day).
    #[error("{0}")]
    Usage(String),
}

impl ImportError {
    /// A fault of one file.
    pub(crate) fn file(path: &Path, message: impl Into<String>) -> Self {
        ImportError::Read {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// Something an import tells while it goes (sent to the [`Progress`] callback; text in it is
/// untrusted: escape it before printing it to a terminal).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Notice<'a> {
    /// An input's diagnostics of one kind (records that are not transcript events).
    Diagnostics {
        /// The input file.
        input: &'a Path,
        /// The kind (`malformed`, `refusal`, …).
        kind: &'a str,
        /// How many.
        count: usize,
        /// The first one's text.
        first: &'a str,
    },
}

/// The progress callback of an [`crate::Importer`].
pub type Progress = Arc<dyn Fn(Notice<'_>) + Send + Sync>;
