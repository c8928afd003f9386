//! [`ViewerError`]: why the viewer could not start, or could not answer a request (each
//! variant maps onto one HTTP status in `http.rs`).

use std::net::SocketAddr;

use transcript_domain::run_store::StoreReadError;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewerError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The cause.
        message: String,
    },
    /// A non-loopback address without a token.
    #[error(
        "{addr} is not a loopback address: serving it needs a token (--token), every request \
         must then carry it"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A token that cannot travel in a header or a cookie.
    #[error("the token must be 16 to 256 characters of A-Z, a-z, 0-9, '-', '_' or '.'")]
    BadToken,
    /// Serving failed.
    #[error("serving failed: {0}")]
    Serve(String),
    /// The store could not answer.
    #[error(transparent)]
    Store(#[from] StoreReadError),
    /// A run's bytes could not be read.
    #[error("{location}: {message}")]
    Read {
        /// The run's location.
        location: String,
        /// The cause.
        message: String,
    },
    /// Nothing answers to the request.
    #[error("not found: {0}")]
    NotFound(String),
    /// A query the viewer does not understand.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// A blocking task of the viewer panicked or was cancelled.
    #[error("internal error: {0}")]
    Internal(String),
}
