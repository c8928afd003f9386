//! `examples/import_store.rs` (issue #43 item 4) on the real Claude Code session logs under
//! `$TRANSCRIPT_REAL_FIXTURES`: its day-by-day bill equals jq's sums over the raw logs (each
//! request counted once, by message id and request id), and a second run, which finds every
//! session unchanged, prints the same bill.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// Real captures (skipped with a message when unset; under `CI=true` a skip fails).
fn real_claude_logs() -> Option<Vec<PathBuf>> {
    let Some(dir) = std::env::var_os("TRANSCRIPT_REAL_FIXTURES") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is unset"
        );
        eprintln!("skipped: TRANSCRIPT_REAL_FIXTURES is unset");
        return None;
    };
    let dir = Path::new(&dir).join("claude-code");
    let logs: Vec<PathBuf> = [
        "spotter-session-log-v2.1.38-short.jsonl",
        "spotter-session-log-v2.1.38-subagent.jsonl",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ]
    .iter()
    .map(|n| dir.join(n))
    .collect();
    assert!(logs.iter().all(|l| l.is_file()), "{logs:?}");
    Some(logs)
}

/// The example's `--json` bill.
fn example(projects: &Path, storage: &Path) -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "run",
            "-q",
            "-p",
            "transcript-import",
            "--example",
            "import_store",
            "--",
        ])
        .arg(projects)
        .arg(storage)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// jq's truth over the raw logs: per day, the last usage of each (message id, request id).
fn jq_by_day(logs: &[PathBuf]) -> Value {
    let filter = r#"[.[] | select(.type=="assistant" and .message.usage != null)
        | {k: [.message.id, .requestId], d: .timestamp[:10], u: .message.usage}]
        | group_by(.k) | map(last) | group_by(.d)
        | map({day: .[0].d, input: (map(.u.input_tokens) | add),
               output: (map(.u.output_tokens) | add),
               read: (map(.u.cache_read_input_tokens // 0) | add),
               write: (map(.u.cache_creation_input_tokens // 0) | add)})"#;
    let out = Command::new("jq")
        .args(["-s", "-c", filter])
        .args(logs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_example_bills_a_real_projects_folder_by_day_as_jq_does() {
    let Some(logs) = real_claude_logs() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("projects/-work-app");
    std::fs::create_dir_all(&project).unwrap();
    for log in &logs {
        std::fs::copy(log, project.join(log.file_name().unwrap())).unwrap();
    }
    let storage = dir.path().join("storage");
    let bill = example(&dir.path().join("projects"), &storage);
    let ours: Vec<Value> = bill
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let u = &g["usage"];
            json!({"day": g["key"], "input": u["input_tokens"], "output": u["output_tokens"],
                   "read": u["cache_read_tokens"], "write": u["cache_write_tokens"]})
        })
        .collect();
    let truth = jq_by_day(&logs);
    assert!(!ours.is_empty());
    assert_eq!(Value::Array(ours), truth);
    assert!(bill[0]["cost_usd"].as_f64().unwrap() > 0.0, "{bill}");
    // Imported again: every session is unchanged, nothing is appended, the bill is the same.
    assert_eq!(example(&dir.path().join("projects"), &storage), bill);
}
