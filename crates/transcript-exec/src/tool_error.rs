//! How a tool call fails: [`ToolError`], recorded in `tool.result.error`
//! by the router and returned by the builtin tools, the subprocess runner
//! and the confined file operations alike.

use serde_json::Value;

/// Why a tool call failed. Recorded in `tool.result.error`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool is registered under this name.
    #[error("unknown tool '{0}'")]
    UnknownTool(String),
    /// The input does not fit the tool.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A file tool's path does not resolve to an entry inside the
    /// workspace: it points outside (symlinks included) or does not exist.
    /// Both get the same answer, so a model cannot probe what exists
    /// outside the workspace.
    #[error("path '{0}' is outside the workspace or does not exist")]
    PathEscapes(String),
    /// A file tool's path names something other than a regular file (a
    /// FIFO, a device, a socket; a directory for read/write): refused
    /// without opening it for I/O.
    #[error("'{path}' is {kind}, not a regular file")]
    NotRegular {
        /// The path as given.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// A file tool's path names a file with more than one hard link, which
    /// may be a name for a file outside the workspace: refused.
    #[error(
        "'{path}' has {links} hard links: refused (a hard link may name a file outside the workspace)"
    )]
    HardLinked {
        /// The path as given.
        path: String,
        /// Its link count.
        links: u64,
    },
    /// A file system operation failed.
    #[error("{op} '{path}': {message}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The path as given.
        path: String,
        /// The OS error.
        message: String,
    },
    /// A command exited unsuccessfully; its output is still recorded.
    #[error("command exited with code {exit_code}")]
    CommandFailed {
        /// Exit code (-1 when killed by a signal).
        exit_code: i64,
        /// What the command printed (`stdout`, `stderr`, `exit_code`).
        output: Value,
    },
    /// The tool reported a failure.
    #[error("{0}")]
    Failed(String),
    /// A plugin broke its protocol or died.
    #[error("plugin '{plugin}': {message}")]
    Plugin {
        /// The plugin name.
        plugin: String,
        /// What went wrong.
        message: String,
    },
    /// An agent asked for a tool its step does not offer (unknown tools
    /// included); nothing ran.
    #[error("tool '{tool}' is not offered to this step (offered: {})", if offered.is_empty() { "none".to_owned() } else { offered.join(", ") })]
    NotOffered {
        /// The tool the agent named.
        tool: String,
        /// The step's `tools:` list.
        offered: Vec<String>,
    },
    /// The call was cancelled (run cancelled or step timed out).
    #[error("cancelled")]
    Cancelled,
    /// The tool panicked (caught at the router).
    #[error("tool panicked: {0}")]
    Panicked(String),
}

impl ToolError {
    /// Output recorded alongside the error in `tool.result` (`null` if none).
    pub fn output(&self) -> Value {
        match self {
            ToolError::CommandFailed { output, .. } => output.clone(),
            _ => Value::Null,
        }
    }
}
