//! Where a provider's session store is and which of its files are sessions.

use std::path::{Path, PathBuf};

use transcript_providers::Provider;

use crate::ImportError;

/// The provider's own session store, honouring `CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
/// `GEMINI_CLI_HOME` and `COPILOT_HOME`.
pub fn default_store(provider: Provider) -> Result<PathBuf, ImportError> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let home = || {
        var("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| ImportError::Usage("--store: HOME is not set".to_owned()))
    };
    Ok(match provider {
        Provider::Claude => match var("CLAUDE_CONFIG_DIR") {
            Some(dir) => PathBuf::from(dir).join("projects"),
            None => home()?.join(".claude/projects"),
        },
        Provider::Codex => match var("CODEX_HOME") {
            Some(dir) => PathBuf::from(dir).join("sessions"),
            None => home()?.join(".codex/sessions"),
        },
        // Gemini CLI 0.61 `homedir()`: `GEMINI_CLI_HOME`, else the user's home; its chats
        // live in `<home>/.gemini/tmp/<project>/chats/`.
        Provider::Gemini => match var("GEMINI_CLI_HOME") {
            Some(dir) => PathBuf::from(dir).join(".gemini/tmp"),
            None => home()?.join(".gemini/tmp"),
        },
        // Copilot CLI 1.0.102's npm loader looks for `$COPILOT_HOME/pkg` beside
        // `~/.copilot/pkg`: `COPILOT_HOME` stands for `~/.copilot`.
        Provider::Copilot => match var("COPILOT_HOME") {
            Some(dir) => PathBuf::from(dir).join("session-state"),
            None => home()?.join(".copilot/session-state"),
        },
        other => {
            return Err(ImportError::Usage(format!(
                "--store: {other} has no session store (name files or directories instead)"
            )));
        }
    })
}

/// `YYYY-MM-DD` (UTC midnight) as seconds since the epoch.
pub fn parse_day(text: &str) -> Result<i64, ImportError> {
    let bad_day = || ImportError::Usage(format!("--since {text:?}: expected YYYY-MM-DD"));
    let t =
        transcript_domain::Timestamp::parse(&format!("{text}T00:00:00Z")).map_err(|_| bad_day())?;
    Ok(t.to_offset_date_time().unix_timestamp())
}

/// Session files under `dir` (recursively: `*.jsonl`, `*.json`), sorted, skipping those
/// last modified before `since` (seconds since the epoch).
pub fn session_files(dir: &Path, since: Option<i64>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && path
                    .extension()
                    .is_some_and(|x| x == "jsonl" || x == "json")
            {
                let recent = match since {
                    None => true,
                    Some(since) => e
                        .metadata()
                        .ok()
                        .and_then(|m| m.modified().ok())
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .is_some_and(|d| d.as_secs() as i64 >= since),
                };
                if recent {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    files
}

/// Whether `file` (found under a store) is one of the provider's session files: Gemini CLI
/// keeps other JSON beside its chats (`logs.json`, checkpoints), so only files under a
/// `chats` directory or named `session-*` are its sessions. Copilot CLI keeps each session in
/// `session-state/<id>/events.jsonl` beside the agent's scratch files (`files/`,
/// `checkpoints/`), and older versions wrote a bare `session-state/<id>.jsonl`: only those
/// two are its sessions.
pub(super) fn is_session_file(provider: Provider, file: &Path) -> bool {
    match provider {
        Provider::Copilot => {
            file.file_name().is_some_and(|n| n == "events.jsonl")
                || file
                    .parent()
                    .and_then(Path::file_name)
                    .is_some_and(|p| p == "session-state")
        }
        Provider::Gemini => {
            file.components().any(|c| c.as_os_str() == "chats")
                || file
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copilot_sessions_are_events_files_or_bare_session_files_never_the_agents_scratch() {
        let is = |p: &str| is_session_file(Provider::Copilot, Path::new(p));
        assert!(is("/h/.copilot/session-state/0b1c/events.jsonl"));
        assert!(is("/h/.copilot/session-state/0b1c.jsonl"));
        assert!(!is("/h/.copilot/session-state/0b1c/files/notes.json"));
        assert!(!is("/h/.copilot/session-state/0b1c/checkpoints/1.jsonl"));
        assert!(!is("/h/.copilot/session-state/0b1c/workspace.jsonl"));
    }
}
