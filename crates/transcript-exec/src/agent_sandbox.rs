//! What a confined agent CLI may write beyond a command step's bounds: its own state
//! directory (the one its preset sets up) and the directories the runner made for this
//! execution. Nothing else of the home directory.
//!
//! | provider | state |
//! |---|---|
//! | `claude` | `$CLAUDE_CONFIG_DIR`, else `~/.claude` and the file `~/.claude.json` |
//! | `codex` | `$CODEX_HOME`, else `~/.codex` |
//! | `gemini` | `$GEMINI_CLI_HOME` (its `.gemini`), else `~/.gemini` |
//!
//! Each variable is read from the step's environment first (as the CLI sees it), then the
//! runner's. What the symbolic links in the runner's private directories for the execution
//! lead to (the MCP wiring's private home links the user's own sessions and credentials) is
//! granted too. A `HOME` the step's environment sets to another directory than the runner's
//! (a private home made by the MCP wiring) is granted too. A directory that is `/`, the home
//! directory or an ancestor of either or of a hidden path is never granted
//! ([`crate::sandbox::Confinement::state_dir`]).

use std::path::{Path, PathBuf};

use crate::agent::AgentRequest;
use crate::sandbox::Confinement;

/// `base` plus what `request`'s CLI needs to write (see the module docs).
pub fn grant(base: Confinement, request: &AgentRequest) -> Confinement {
    let trusted = base.trusts_step_env();
    let var = |name: &str| -> Option<PathBuf> {
        request
            .env
            .get(name)
            .filter(|_| trusted)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = var("HOME");
    let mut c = base.keep_home();
    for dir in &request.private_dirs {
        c = c.state_dir(dir);
        // The wiring's private home links the user's own state into it (sessions, credentials):
        // what those links lead to is the CLI's state too.
        for target in link_targets(dir, 3) {
            c = c.state_dir(target);
        }
    }
    let runner_home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(h) = &home
        && Some(h) != runner_home.as_ref()
    {
        c = c.state_dir(h);
    }
    let under_home = |rel: &str| home.as_ref().map(|h| h.join(rel));
    let dirs: Vec<PathBuf> = match request.provider.name() {
        "claude" => match var("CLAUDE_CONFIG_DIR") {
            Some(d) => vec![d],
            None => [under_home(".claude"), under_home(".claude.json")]
                .into_iter()
                .flatten()
                .collect(),
        },
        "codex" => var("CODEX_HOME")
            .or_else(|| under_home(".codex"))
            .into_iter()
            .collect(),
        "gemini" => var("GEMINI_CLI_HOME")
            .map(|h| h.join(".gemini"))
            .or_else(|| under_home(".gemini"))
            .into_iter()
            .collect(),
        _ => Vec::new(),
    };
    for d in dirs {
        c = c.state_dir(ensure(&d));
    }
    c
}

/// The targets of the symbolic links the runner made in `dir` (its wiring), `depth` levels
/// down.
fn link_targets(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            if let Ok(target) = std::fs::canonicalize(entry.path()) {
                out.push(target);
            }
        } else if kind.is_dir() && depth > 1 {
            out.extend(link_targets(&entry.path(), depth - 1));
        }
    }
    out
}

/// Makes a missing state directory (mode `0o700`) so that it can be granted: a CLI's first
/// run creates it, which it could not do inside a home it may not write. A file path (the
/// `.claude.json` beside `~/.claude`) is left as it is.
fn ensure(dir: &Path) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    if !dir.exists() && dir.extension().is_none() {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    dir.to_path_buf()
}
