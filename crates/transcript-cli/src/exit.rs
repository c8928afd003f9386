//! How the `transcript` command fails: one error type whose variant decides the exit code, so
//! scripts can tell a failed run from a missing transcript, a usage error or an interrupt.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the run failed, or a check found errors (`validate`), differences (`diff`) or a failed expectation (`check`) |
//! | 2 | usage error (bad arguments; `check`: a bad expectations file) |
//! | 3 | not found or invalid input: missing transcript or run id, invalid workflow or `--input`, unreadable file |
//! | 4 | storage failure: the transcript could not be written completely (disk full, I/O error); `check`: a judge could not grade (its endpoint failed, its answer was no verdict, the transcript too large) |
//! | 5 | `tail -f`: the run it followed was cancelled |
//! | 128+N | interrupted by signal N: 130 SIGINT, 143 SIGTERM, 129 SIGHUP |
//! | 141 | stdout closed early (EPIPE), quietly, as a process killed by SIGPIPE would |

use std::path::PathBuf;

/// The exit codes, for `--help` and tests.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    success
  1    the run failed, validate found errors, diff found differences, or check found
       a failed expectation
  2    usage error (check: an unreadable or invalid expectations file)
  3    not found or invalid input (missing transcript, unknown or ambiguous run id,
       invalid workflow or --input, unreadable file)
  4    storage failure: the transcript could not be written completely (e.g. disk full); check: a judge could not grade
  5    tail -f: the run it followed was cancelled
  130  interrupted (SIGINT); 143 SIGTERM, 129 SIGHUP (128 + signal)
  141  stdout was closed early (e.g. piped into head)";

/// A failure the CLI reports on one line (or has already reported).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A path or run that does not exist.
    #[error("{}: {what} not found", path.display())]
    NotFound {
        /// What was looked for.
        what: String,
        /// Where.
        path: PathBuf,
    },
    /// A file that could not be read, or input that is not what it should be.
    #[error("{}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Invalid input that is not a file: a workflow that does not validate, a bad `--input`,
    /// an ambiguous run id prefix.
    #[error("{0}")]
    Invalid(String),
    /// A check or run that failed.
    #[error("{0}")]
    Failed(String),
    /// The outcome was already reported on stderr; exit with this code and print nothing more.
    #[error("")]
    Reported(u8),
    /// The transcript could not be written completely.
    #[error("{0}")]
    Storage(String),
    /// Interrupted by a signal (its number); the run was cancelled cleanly.
    #[error("interrupted by signal {0}")]
    Interrupted(i32),
    /// stdout was closed by its reader.
    #[error("")]
    BrokenPipe,
    /// Bad arguments beyond what clap checks.
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Failed(_) => 1,
            CliError::Usage(_) => 2,
            CliError::NotFound { .. } | CliError::Read { .. } | CliError::Invalid(_) => 3,
            CliError::Storage(_) => 4,
            CliError::Reported(code) => *code,
            CliError::Interrupted(signal) => u8::try_from(128 + signal).unwrap_or(130),
            CliError::BrokenPipe => 141,
        }
    }

    /// Whether main should print the message (some outcomes were reported already).
    pub fn is_silent(&self) -> bool {
        matches!(self, CliError::Reported(_) | CliError::BrokenPipe)
    }
}

/// Maps a write to stdout: a closed pipe ends the command quietly, any other error is reported.
pub fn stdout_result(result: std::io::Result<()>) -> Result<(), CliError> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError::BrokenPipe),
        Err(e) => Err(CliError::Failed(format!("cannot write to stdout: {e}"))),
    }
}

/// `eprintln!` that never panics: a closed stderr loses the diagnostic, not the command.
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_its_documented_code() {
        assert_eq!(CliError::Failed(String::new()).exit_code(), 1);
        assert_eq!(CliError::Usage(String::new()).exit_code(), 2);
        assert_eq!(CliError::Invalid(String::new()).exit_code(), 3);
        assert_eq!(CliError::Storage(String::new()).exit_code(), 4);
        assert_eq!(CliError::Interrupted(2).exit_code(), 130);
        assert_eq!(CliError::Interrupted(15).exit_code(), 143);
        assert_eq!(CliError::Interrupted(1).exit_code(), 129);
        assert_eq!(CliError::BrokenPipe.exit_code(), 141);
        assert!(CliError::BrokenPipe.is_silent());
        let broken = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(matches!(
            stdout_result(Err(broken)),
            Err(CliError::BrokenPipe)
        ));
    }
}
