//! The session and the project an imported session file belongs to, for `receipts --by
//! session|project`: one answer per session whichever CLI wrote it and whether it was
//! imported as a store or as a file.
//!
//! The **project** is the directory the session ran in, named as Claude Code names its
//! project directories (every character but ASCII letters and digits replaced by `-`:
//! `/work/alpha` → `-work-alpha`), so one directory is one project across the CLIs:
//!
//! 1. a Claude Code store's `projects/<project>/…` directory;
//! 2. else the working directory the session file records ([`recorded_project`]): Codex's
//!    `session_meta.payload.cwd` (or its first `turn_context`'s), Copilot CLI's `session.start.data.context.cwd`, Claude
//!    Code's records' `cwd`. Codex files its rollouts by day (`sessions/YYYY/MM/DD/`) and
//!    Copilot CLI by session (`session-state/<session>/events.jsonl`): their directories
//!    are no project;
//! 3. else Gemini CLI's `tmp/<project>/chats/…` directory (its saved sessions record a hash
//!    of the project only);
//! 4. else the file's directory.
//!
//! The **session** is the file's name without extension, except a sub-agent's log
//! (`<session>/subagents/agent-*.jsonl`, its spend is the spawning session's) and a Copilot
//! CLI session (`<session>/events.jsonl`): that directory.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};

use serde_json::Value;

/// Bytes of a session file's beginning read for its working directory.
const READ_LIMIT: u64 = 1 << 20;
/// Records of a session file's beginning read for its working directory.
const RECORD_LIMIT: usize = 64;

/// A directory as a project name: every character but ASCII letters and digits replaced by
/// `-` (Claude Code's project directory names).
pub fn project_name(dir: &str) -> String {
    dir.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The working directory `file` records near its beginning (the first of its first 64
/// records, 1 MiB at most), as a [`project_name`]; `None` when it records none or cannot be
/// read (a session file that is gone is not an error here: the caller falls back to its
/// path). Only a regular file is read, opened `O_NONBLOCK` (a FIFO never blocks it).
pub fn recorded_project(file: &Path) -> Option<String> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(file)
        .ok()?;
    if !opened.metadata().ok()?.is_file() {
        return None;
    }
    let reader = BufReader::new(opened.take(READ_LIMIT));
    reader
        .split(b'\n')
        .take(RECORD_LIMIT)
        .map_while(Result::ok)
        .find_map(|line| {
            let record: Value = serde_json::from_slice(&line).ok()?;
            let cwd = match record.get("type").and_then(Value::as_str) {
                Some("session_meta" | "turn_context") => record.pointer("/payload/cwd"),
                Some("session.start") => record.pointer("/data/context/cwd"),
                _ => record.get("cwd"),
            };
            cwd.and_then(Value::as_str)
                .filter(|d| !d.is_empty())
                .map(project_name)
        })
}

/// The session and project of the session file at `path` that `provider` wrote (see the
/// module docs), `recorded` being what [`recorded_project`] found when it was imported (read
/// now when `None`).
pub fn session_and_project(
    provider: &str,
    path: &str,
    recorded: Option<&str>,
) -> (Option<String>, Option<String>) {
    let p = Path::new(path);
    let parts: Vec<String> = p
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let before = |name: &str| {
        let i = parts.iter().rposition(|c| c == name)?;
        parts.get(i.checked_sub(1)?).cloned()
    };
    // Claude Code's `projects/<project>/<file>` (a project directory's name starts with `-`,
    // so the last `projects` is the store's).
    let claude_dir = || {
        let i = parts.iter().rposition(|c| c == "projects")?;
        (provider == "claude" && i + 2 < parts.len()).then(|| parts[i + 1].clone())
    };
    let parent = || {
        p.parent()
            .and_then(Path::file_name)
            .map(|d| d.to_string_lossy().into_owned())
    };
    let copilot = p.file_name().is_some_and(|n| n == "events.jsonl");
    let session = match before("subagents") {
        Some(s) => Some(s),
        None if copilot => parent(),
        None => p.file_stem().map(|s| s.to_string_lossy().into_owned()),
    };
    let project = claude_dir()
        .or_else(|| recorded.map(str::to_owned))
        .or_else(|| recorded_project(p))
        .or_else(|| before("chats"))
        .or_else(parent);
    (session, project)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stores_layout_names_its_session_and_project() {
        let cases = [
            (
                "claude",
                "/h/.claude/projects/-work-a/s1.jsonl",
                Some("-elsewhere"),
                ("s1", "-work-a"),
            ),
            (
                "claude",
                "/h/.claude/projects/-work-a/s1/subagents/agent-x.jsonl",
                None,
                ("s1", "-work-a"),
            ),
            (
                "codex",
                "/h/projects/x/.codex/sessions/2026/08/03/rollout-a.jsonl",
                Some("-work-b"),
                ("rollout-a", "-work-b"),
            ),
            (
                "copilot",
                "/h/.copilot/session-state/s9/events.jsonl",
                Some("-work-c"),
                ("s9", "-work-c"),
            ),
            (
                "gemini",
                "/h/.gemini/tmp/proj/chats/session-1.jsonl",
                None,
                ("session-1", "proj"),
            ),
            ("openai", "/captures/run.json", None, ("run", "captures")),
        ];
        for (provider, path, recorded, (session, project)) in cases {
            let got = session_and_project(provider, path, recorded);
            assert_eq!(
                got,
                (Some(session.to_owned()), Some(project.to_owned())),
                "{path}"
            );
        }
    }

    #[test]
    fn the_recorded_directory_is_read_from_the_first_records_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        let meta = r#"{"type":"session_meta","payload":{"cwd":"/w/a.b"}}"#;
        std::fs::write(&file, format!("not json\n{meta}\n")).unwrap();
        assert_eq!(recorded_project(&file).as_deref(), Some("-w-a-b"));
        // A rollout whose session_meta names none: its first turn's context does.
        let turn = r#"{"type":"turn_context","payload":{"cwd":"/w/t"}}"#;
        std::fs::write(
            &file,
            format!("{{\"type\":\"session_meta\",\"payload\":{{}}}}\n{turn}\n"),
        )
        .unwrap();
        assert_eq!(recorded_project(&file).as_deref(), Some("-w-t"));
        let late = "{}\n".repeat(RECORD_LIMIT) + meta;
        std::fs::write(&file, late).unwrap();
        assert_eq!(recorded_project(&file), None);
        assert_eq!(recorded_project(&dir.path().join("gone")), None);
        // A FIFO without a writer is not waited for.
        let fifo = dir.path().join("fifo.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        assert_eq!(recorded_project(&fifo), None);
    }
}
