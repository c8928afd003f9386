//! One answer per session whichever way it is imported (#41 item 7): a Claude Code session
//! log and its sub-agent's log (`<session>/subagents/agent-*.jsonl`), imported as files
//! (`import auto FILE…`, `import claude FILE…`) or as a store (`import claude --store`), give
//! the same `receipts --by session`: the sub-agent's spend counts for the session that
//! spawned it. Truth: jq over the raw logs (each request once: its `message.id`'s last record).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::real_fixture;
use serde_json::Value;

fn run(args: &[&str], env: &[(&str, &Path)]) -> Vec<u8> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_transcript"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `receipts --by session --json`: (session, input tokens, output tokens) per group.
fn by_session(storage: &Path) -> Vec<(String, u64, u64)> {
    let out = run(
        &[
            "receipts",
            "--by",
            "session",
            "--json",
            "--storage",
            storage.to_str().unwrap(),
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out).unwrap();
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["key"].as_str().unwrap().to_owned(),
                g["usage"]["input_tokens"].as_u64().unwrap(),
                g["usage"]["output_tokens"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// jq: the input and output tokens of a log, each request once.
fn jq_tokens(log: &Path) -> (u64, u64) {
    let out = Command::new("jq")
        .args([
            "-s",
            "-c",
            "[.[] | select(.type == \"assistant\" and .message.id != null)] | group_by(.message.id) | map(last.message.usage) | [(map(.input_tokens) | add), (map(.output_tokens) | add)]",
        ])
        .arg(log)
        .output()
        .unwrap();
    let v: Vec<u64> = serde_json::from_slice(&out.stdout).unwrap();
    (v[0], v[1])
}

#[test]
fn file_and_store_imports_fold_a_sub_agent_into_its_session_alike() {
    let (Some(short), Some(sub), Some(heavy)) = (
        real_fixture("claude-code", "spotter-session-log-v2.1.38-short.jsonl"),
        real_fixture("claude-code", "spotter-session-log-v2.1.38-subagent.jsonl"),
        real_fixture(
            "claude-code",
            "spotter-session-log-v2.1.38-tool_heavy.jsonl",
        ),
    ) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("cfg");
    let project = config.join("projects/-work-alpha");
    std::fs::create_dir_all(project.join("s-short/subagents")).unwrap();
    std::fs::copy(&short, project.join("s-short.jsonl")).unwrap();
    std::fs::copy(&sub, project.join("s-short/subagents/agent-a1.jsonl")).unwrap();
    std::fs::copy(&heavy, project.join("s-heavy.jsonl")).unwrap();
    let files = [
        project.join("s-short.jsonl"),
        project.join("s-short/subagents/agent-a1.jsonl"),
        project.join("s-heavy.jsonl"),
    ];

    let (si, so) = jq_tokens(&short);
    let (ai, ao) = jq_tokens(&sub);
    let (hi, ho) = jq_tokens(&heavy);
    let truth = vec![
        ("s-heavy".to_owned(), hi, ho),
        ("s-short".to_owned(), si + ai, so + ao),
    ];

    // As a store.
    let store = home.path().join("store");
    run(
        &[
            "import",
            "claude",
            "--store",
            "--storage",
            store.to_str().unwrap(),
        ],
        &[("CLAUDE_CONFIG_DIR", config.as_path())],
    );
    assert_eq!(by_session(&store), truth, "import claude --store");

    // As files, with detection and with the provider named; from another directory and
    // through a relative path too (the session is the file's, wherever it is named from).
    for provider in ["auto", "claude"] {
        let storage = home.path().join(format!("files-{provider}"));
        let mut args = vec!["import", provider];
        let names: Vec<String> = files
            .iter()
            .map(|f| f.to_str().unwrap().to_owned())
            .collect();
        args.extend(names.iter().map(String::as_str));
        args.extend(["--storage", storage.to_str().unwrap()]);
        run(&args, &[]);
        assert_eq!(by_session(&storage), truth, "import {provider} FILE…");
    }
    let storage = home.path().join("relative");
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .current_dir(project.join("s-short/subagents"))
        .args([
            "import",
            "claude",
            "agent-a1.jsonl",
            "../../s-short.jsonl",
            "../../s-heavy.jsonl",
        ])
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(by_session(&storage), truth, "relative paths");
}
