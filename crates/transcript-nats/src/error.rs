//! The crate's error type: connecting, creating the stream or bucket, reading runs back.

/// Why a NATS storage operation failed. Every message names the storage URL or the run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// The `--storage` URL is not a usable NATS URL.
    #[error("invalid NATS storage URL {url:?}: {reason}")]
    Url {
        /// The URL as given (credentials never reach here: such URLs are refused).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The servers could not be reached, or refused the credentials.
    #[error("cannot connect to NATS at {url}: {message}")]
    Connect {
        /// The servers, as `nats://h1:4222,h2:4222/STREAM`.
        url: String,
        /// The client's error.
        message: String,
    },
    /// A setting from the environment is not usable.
    #[error("{name}={value:?} is not a number")]
    Setting {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
    },
    /// The credentials named in the environment could not be used (never the secret itself).
    #[error("NATS credentials for {url}: {message}")]
    Credentials {
        /// The storage URL the credentials were for.
        url: String,
        /// Which variable is wrong and why.
        message: String,
    },
    /// Readers never create a store: the servers have no stream of the URL's name.
    #[error("no transcript store at {url}: {reason}")]
    NoStore {
        /// The storage URL.
        url: String,
        /// What the servers hold instead (the stream holding the runs, if any).
        reason: String,
    },
    /// Readers never create a store, and the URL names a stream other than the one holding
    /// the runs on these servers (a mistyped stream name): nothing will create it.
    #[error("no transcript store at {url}: {reason}")]
    WrongStream {
        /// The storage URL.
        url: String,
        /// The stream that holds the runs' subjects.
        holder: String,
        /// What the servers hold, and the URL that reads it.
        reason: String,
    },
    /// A run's lease lapsed before its runner renewed it (the runner was stopped, or cut off
    /// from the servers for longer than the lease): readers may have reported the run
    /// abandoned, so the runner records nothing more and the run stays abandoned.
    #[error(
        "NATS at {url}: run {run_id} was abandoned: its lease lapsed ({why}); readers may \
         already have reported it abandoned, so it records nothing more and stays abandoned"
    )]
    Abandoned {
        /// The storage URL.
        url: String,
        /// The run.
        run_id: String,
        /// How the runner learnt it (its renewal refused by the lease's revision).
        why: String,
    },
    /// A JetStream request (stream, consumer, key-value) failed.
    #[error("NATS JetStream at {url}: {message}")]
    JetStream {
        /// The storage URL.
        url: String,
        /// What was being done, and the server's or client's error.
        message: String,
    },
    /// A run has no events in the stream.
    #[error("run {run_id} has no events in stream {stream}")]
    NotFound {
        /// The run.
        run_id: String,
        /// The stream.
        stream: String,
    },
    /// Writing a mirrored file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// What was being done and the OS cause.
        message: String,
    },
    /// The servers' `max_payload` is too small for a useful per-value cap
    /// ([`crate::payload::MIN_MAX_PAYLOAD`]): a run is refused before any step runs.
    #[error(
        "NATS at {url}: the servers' max_payload is {max_payload} bytes, below the {minimum} a \
         run needs (every event's line must fit one message): set `max_payload` in the \
         servers' configuration to at least {minimum} ({keeps} keeps recorded values up to \
         {wanted} bytes)"
    )]
    MaxPayloadTooSmall {
        /// The storage URL.
        url: String,
        /// The connected server's `max_payload`.
        max_payload: usize,
        /// [`crate::payload::MIN_MAX_PAYLOAD`].
        minimum: usize,
        /// The per-value cap the runner wanted.
        wanted: usize,
        /// The `max_payload` that would keep `wanted` ([`crate::payload::max_payload_for`]).
        keeps: usize,
    },
}
