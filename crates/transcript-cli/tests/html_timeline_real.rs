//! The HTML timeline of a real agent session (issue #42): a real Claude Code log
//! (`$TRANSCRIPT_REAL_FIXTURES`, never copied into the repository) imported by the binary,
//! exported as HTML and loaded in headless Chromium. Every agent turn and every tool call
//! of the transcript (counted here from the file with serde_json) is one bar on the axis.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::html_page::*;

use std::process::Command;

use serde_json::Value;

#[test]
fn a_real_claude_session_has_a_bar_per_turn_and_tool_call() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let Some(log) = common::real_fixture(
        "claude-code",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["import", "claude", "--deterministic"])
        .arg(&log)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let run = stdout.trim_end().split('\t').next().unwrap().to_owned();
    let events: Vec<Value> = std::fs::read_to_string(storage.join(format!("{run}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let turns = events
        .iter()
        .filter(|e| e["type"] == "message.assistant")
        .count();
    let mut calls: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e["type"] == "tool.call" || e["type"] == "tool.result")
        .map(|e| (&e["path"], &e["payload"]["call_id"]))
        .collect();
    calls.sort_by_key(|(p, c)| (p.to_string(), c.to_string()));
    calls.dedup();
    assert!(
        turns >= 4 && calls.len() >= 6,
        "{turns} turns, {} calls",
        calls.len()
    );
    let dom = export_and_dump(&browser, &storage, &run, dir.path());
    let bars = bars(timeline(&dom));
    let count = |k: &str| bars.iter().filter(|b| b.class.contains(k)).count();
    assert_eq!(count("k-turn"), turns);
    assert_eq!(count("k-tool"), calls.len());
    for b in &bars {
        assert!(
            b.left >= 0.0 && b.width >= 0.0 && b.left + b.width <= 100.0001,
            "{b:?}"
        );
    }
}
