//! `receipts --by project` groups sessions by the directory they ran in, for every CLI's
//! store, and whether the sessions were imported as a store or as files.
//!
//! Before, the project was the session file's parent directory: right for Claude Code
//! (`projects/<project>/<session>.jsonl`), wrong for the others. Codex files its rollouts by
//! day (`sessions/YYYY/MM/DD/`): its "projects" were days of the month, one project's
//! sessions split across them and different projects of one day merged. Gemini CLI keeps
//! `tmp/<project>/chats/`: every session was project `chats`. Copilot keeps
//! `session-state/<session>/events.jsonl`: every session was a project of its own.
//!
//! Truth: jq over the raw session files (the working directory each CLI recorded: Codex's
//! `session_meta.payload.cwd`, Copilot's `session.start.data.context.cwd`, Claude Code's
//! records' `cwd`, encoded the way Claude Code names its project directories, every
//! character but ASCII letters and digits replaced by `-`), and Gemini CLI's documented
//! layout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, real_fixture, text};
use serde_json::Value;

/// Copies `from` to `to`, every `old` replaced by `new` (a session in another directory).
fn copy_moved(from: &Path, to: &Path, old: &str, new: &str) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let raw = std::fs::read_to_string(from).unwrap();
    assert!(raw.contains(old), "{} has no {old}", from.display());
    std::fs::write(to, raw.replace(old, new)).unwrap();
}

/// Gives the log at `path` the session id `new` instead of `old`.
fn rename_session(path: &Path, old: &str, new: &str) {
    let raw = std::fs::read_to_string(path).unwrap();
    assert!(raw.contains(old), "{} has no {old}", path.display());
    std::fs::write(path, raw.replace(old, new)).unwrap();
}

/// jq: the project of one raw session file, as Claude Code would name its directory.
fn jq_project(file: &Path) -> String {
    let filter = r#"[ (.[] | select(.type == "session_meta") | .payload.cwd),
        (.[] | select(.type == "session.start") | .data.context.cwd),
        (.[] | .cwd? // empty) ] | first | gsub("[^A-Za-z0-9]"; "-")"#;
    let out = Command::new("jq")
        .args(["-s", "-r", filter])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "jq: {}", text(&out.stderr));
    text(&out.stdout).trim().to_owned()
}

/// `receipts --by project --json`: runs per project.
fn runs_by_project(storage: &Path) -> BTreeMap<String, u64> {
    let out = bin()
        .args(["receipts", "--by", "project", "--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["key"].as_str().unwrap().to_owned(),
                g["runs"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn import(args: &[&str], files: &[PathBuf], env: &[(&str, &Path)], storage: &Path) {
    let mut cmd = bin();
    cmd.args(["import"]).args(args).args(files);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.arg("--storage").arg(storage).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
}

/// A Gemini CLI saved session (0.61's `chats/session-*.jsonl`: its metadata record, a prompt
/// and one answer with its tokens).
fn gemini_chat(path: &Path, id: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let lines = [
        format!(
            r#"{{"sessionId":"{id}","projectHash":"h","startTime":"2026-08-03T10:00:00.000Z","lastUpdated":"2026-08-03T10:00:02.000Z","kind":"main"}}"#
        ),
        r#"{"id":"u1","timestamp":"2026-08-03T10:00:00.000Z","type":"user","content":[{"text":"hi"}]}"#.to_owned(),
        r#"{"id":"g1","timestamp":"2026-08-03T10:00:02.000Z","type":"gemini","content":"hello","model":"gemini-2.5-pro","tokens":{"input":100,"output":5,"cached":0,"thoughts":0,"tool":0,"total":105}}"#.to_owned(),
    ];
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_project_is_the_directory_a_session_ran_in_for_every_store_and_file_import() {
    let (Some(codex), Some(copilot), Some(claude)) = (
        real_fixture(
            "codex",
            "agent-sessions-codex-rollout-session-schema-fixture.jsonl",
        ),
        real_fixture(
            "copilot",
            "agent-sessions-copilot-events-jsonl-schema-fixture.jsonl",
        ),
        real_fixture("claude-code", "spotter-session-log-v2.1.38-short.jsonl"),
    ) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // Codex: two sessions in /work/alpha on two days, one in /work/beta on the first day.
    let rollouts = [
        (
            "2026/08/03/rollout-2026-08-03T10-00-00-a.jsonl",
            "/work/alpha",
        ),
        (
            "2026/08/03/rollout-2026-08-03T11-00-00-b.jsonl",
            "/work/beta",
        ),
        (
            "2026/08/04/rollout-2026-08-04T10-00-00-c.jsonl",
            "/work/alpha",
        ),
    ];
    // Each copy is a session of its own (its own id): a byte-identical copy of a log is the
    // same session, imported once (#51 item 3).
    let mut codex_files = Vec::new();
    for (i, (name, cwd)) in rollouts.into_iter().enumerate() {
        let to = h.join("codex/sessions").join(name);
        copy_moved(&codex, &to, "/tmp/repo", cwd);
        rename_session(
            &to,
            "019fc8be-3658-7ca3-9e29-000000000000",
            &format!("019fc8be-3658-7ca3-9e29-00000000000{i}"),
        );
        codex_files.push(to);
    }
    // Copilot: two sessions in /work/alpha.
    let mut copilot_files = Vec::new();
    for id in ["s-one", "s-two"] {
        let to = h.join(format!("copilot/session-state/{id}/events.jsonl"));
        copy_moved(&copilot, &to, "/tmp/repo", "/work/alpha");
        rename_session(&to, "copilot_stage0_small", id);
        copilot_files.push(to);
    }
    // Claude Code: one session in /work/alpha, under the directory it names it by.
    let claude_log = h.join("claude/projects/-work-alpha/s.jsonl");
    copy_moved(
        &claude,
        &claude_log,
        "/home/marco/projects/spotter",
        "/work/alpha",
    );
    // Gemini CLI: two projects, one session each.
    let gemini_files = [
        h.join("gemini/.gemini/tmp/proj-one/chats/session-2026-08-03T10-00-aaaa.jsonl"),
        h.join("gemini/.gemini/tmp/proj-two/chats/session-2026-08-03T10-00-bbbb.jsonl"),
    ];
    for (i, f) in gemini_files.iter().enumerate() {
        gemini_chat(f, &format!("gemini-session-{i}"));
    }

    // jq's answer for the sessions that record their directory.
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for f in codex_files
        .iter()
        .chain(&copilot_files)
        .chain(std::iter::once(&claude_log))
    {
        *want.entry(jq_project(f)).or_default() += 1;
    }
    assert_eq!(
        want,
        BTreeMap::from([("-work-alpha".to_owned(), 5), ("-work-beta".to_owned(), 1)])
    );
    want.insert("proj-one".to_owned(), 1);
    want.insert("proj-two".to_owned(), 1);

    // As stores.
    let stores = tempfile::tempdir().unwrap();
    let s = stores.path();
    import(
        &["codex", "--store"],
        &[],
        &[("CODEX_HOME", &h.join("codex"))],
        s,
    );
    import(
        &["copilot", "--store"],
        &[],
        &[("COPILOT_HOME", &h.join("copilot"))],
        s,
    );
    import(
        &["claude", "--store"],
        &[],
        &[("CLAUDE_CONFIG_DIR", &h.join("claude"))],
        s,
    );
    import(
        &["gemini", "--store"],
        &[],
        &[("GEMINI_CLI_HOME", &h.join("gemini"))],
        s,
    );
    assert_eq!(runs_by_project(s), want, "store imports");
    // Imported again, nothing changed: the same answer.
    import(
        &["codex", "--store"],
        &[],
        &[("CODEX_HOME", &h.join("codex"))],
        s,
    );
    assert_eq!(runs_by_project(s), want, "store imports, again");

    // As files.
    let files = tempfile::tempdir().unwrap();
    let f = files.path();
    import(&["codex"], &codex_files, &[], f);
    import(&["copilot"], &copilot_files, &[], f);
    import(&["claude"], std::slice::from_ref(&claude_log), &[], f);
    import(&["gemini"], &gemini_files, &[], f);
    assert_eq!(runs_by_project(f), want, "file imports");
}
