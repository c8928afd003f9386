//! 1-hour cache writes priced at their own LiteLLM rate (#41 item 6), from the 5-minute /
//! 1-hour split Claude Code's session logs report (`usage.cache_creation.ephemeral_5m_input_tokens`,
//! `ephemeral_1h_input_tokens`), both shown in `receipts --json`; the total alone (no split)
//! keeps the 5-minute rate. Truth: the hand computation below and jq over the raw logs with
//! the pinned table (`crates/transcript-providers/src/pricing/litellm-prices.json`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{real_fixture, repo};
use serde_json::Value;

/// Imports `log` (a Claude Code session log) into a fresh store; its `receipts --json`.
fn receipts(log: &Path) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_transcript");
    let out = Command::new(bin)
        .args(["import", "claude"])
        .arg(log)
        .arg("--storage")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(bin)
        .args(["receipts", "latest", "--json", "--storage"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The pinned LiteLLM table.
fn table() -> PathBuf {
    repo().join("crates/transcript-providers/src/pricing/litellm-prices.json")
}

/// Each API request once (the records of one `message.id` repeat its usage; the last is
/// final), priced from the pinned table: 5-minute cache writes at
/// `cache_creation_input_token_cost`, 1-hour ones at `cache_creation_input_token_cost_above_1hr`.
const TRUTH: &str = r#"
[ .[] | select(.type == "assistant" and .message.usage != null and .message.id != null) ]
| group_by(.message.id) | map(last)
| map(.message.model as $m | .message.usage as $u | $table[0][$m] as $p
    | ($u.cache_creation.ephemeral_1h_input_tokens // 0) as $h
    | (($u.cache_creation_input_tokens // 0) - $h) as $f
    | ($u.input_tokens // 0) * $p.input_cost_per_token
      + ($u.output_tokens // 0) * $p.output_cost_per_token
      + ($u.cache_read_input_tokens // 0) * $p.cache_read_input_token_cost
      + $f * $p.cache_creation_input_token_cost
      + $h * ($p.cache_creation_input_token_cost_above_1hr // $p.cache_creation_input_token_cost))
| add
"#;

fn jq(args: &[&str], file: &Path) -> Value {
    let out = Command::new("jq").args(args).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn a_one_hour_cache_write_is_priced_at_its_own_rate() {
    let Some(log) = real_fixture("claude-code", "spotter-session-log-v2.1.38-short.jsonl") else {
        return;
    };
    // By hand, from the log's one request (claude-opus-4-6: input 3, output 13, cache read
    // 11,515, cache write 13,835, all of it `ephemeral_1h`) and the pinned LiteLLM 1.110.2
    // entry of claude-opus-4-6 (input 5e-6, output 2.5e-5, cache read 5e-7, cache write
    // 6.25e-6, cache write above 1 hr 1e-5 per token):
    //   3 × 5e-6 + 13 × 2.5e-5 + 11,515 × 5e-7 + 13,835 × 1e-5
    //   = 0.000015 + 0.000325 + 0.0057575 + 0.13835 = $0.1444475
    // (at the 5-minute rate the write would be 13,835 × 6.25e-6 = 0.08646875: $0.09256625,
    // what receipts said on ffbbac3).
    let r = receipts(&log);
    assert!(close(r["cost_usd"].as_f64().unwrap(), 0.1444475), "{r:#}");
    let usage = &r["total"];
    assert_eq!(usage["cache_write_tokens"], 13_835);
    assert_eq!(usage["cache_write_1h_tokens"], 13_835);
    assert_eq!(usage["cache_write_5m_tokens"], 0);
    // The pinned table has the 1-hour rate the computation used.
    let rate = jq(
        &[
            "-c",
            ".\"claude-opus-4-6\".cache_creation_input_token_cost_above_1hr",
        ],
        &table(),
    );
    assert_eq!(rate.as_f64(), Some(1e-5));
}

#[test]
fn receipts_equal_jq_over_the_real_session_logs() {
    for name in [
        "spotter-session-log-v2.1.38-short.jsonl",
        "spotter-session-log-v2.1.38-subagent.jsonl",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ] {
        let Some(log) = real_fixture("claude-code", name) else {
            return;
        };
        let table = table();
        let truth = jq(
            &["-s", "--slurpfile", "table", table.to_str().unwrap(), TRUTH],
            &log,
        )
        .as_f64()
        .unwrap();
        let r = receipts(&log);
        let ours = r["cost_usd"].as_f64().unwrap();
        assert!(close(ours, truth), "{name}: receipts ${ours}, jq ${truth}");
        // The split is shown and adds up to the total.
        let t = &r["total"];
        let (all, five, hour) = (
            t["cache_write_tokens"].as_u64().unwrap(),
            t["cache_write_5m_tokens"].as_u64().unwrap(),
            t["cache_write_1h_tokens"].as_u64().unwrap(),
        );
        assert_eq!(five + hour, all, "{name}");
        let jq_hour = jq(
            &[
                "-s",
                "[.[] | select(.type == \"assistant\" and .message.id != null)] | group_by(.message.id) | map(last.message.usage.cache_creation.ephemeral_1h_input_tokens // 0) | add",
            ],
            &log,
        );
        assert_eq!(jq_hour.as_u64(), Some(hour), "{name}");
    }
}

#[test]
fn without_the_split_every_cache_write_keeps_the_five_minute_rate() {
    // Our own small session log: one request whose usage has no `cache_creation` object.
    // By hand (claude-opus-4-6): 10 × 5e-6 + 2 × 2.5e-5 + 1,000 × 6.25e-6 = 0.00005 + 0.00005
    // + 0.00625 = $0.00635.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.jsonl");
    let record = serde_json::json!({
        "type": "assistant", "sessionId": "s-1", "uuid": "u-1",
        "timestamp": "2026-02-10T21:11:52.438Z",
        "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_creation_input_tokens": 1000}}
    });
    std::fs::write(&log, format!("{record}\n")).unwrap();
    let r = receipts(&log);
    assert!(close(r["cost_usd"].as_f64().unwrap(), 0.00635), "{r:#}");
    assert!(r["total"].get("cache_write_1h_tokens").is_none(), "{r:#}");
}
