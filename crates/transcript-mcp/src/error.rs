//! The proxy's typed errors.

use crate::config::ConfigError;

/// Why the proxy could not start, or what it lost while it ran.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The server list was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An upstream server could not be started or initialized.
    #[error("MCP server {server:?} did not start: {cause}")]
    Start {
        /// The server's name.
        server: String,
        /// What went wrong.
        cause: String,
    },
    /// The downstream endpoint could not be bound.
    #[error("the MCP proxy could not listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    /// The OS gave no randomness for the endpoint's secret.
    #[error("the MCP proxy got no randomness for its secret: {0}")]
    Randomness(String),
    /// An observation could not be written: the run lost data and must not report success.
    #[error("the MCP proxy could not record a tool event: {0}")]
    Record(String),
}
