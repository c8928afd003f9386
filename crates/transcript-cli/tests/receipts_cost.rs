//! Receipts you can bill from (issue #29): a real Claude Code session log imported and
//! priced. Tokens equal the jq truth over the raw log (one API request = one `message.id` +
//! `requestId`, its last record), the cost equals a hand computation from the pinned LiteLLM
//! table, an unknown model is `—` plus one warning naming it (never $0), and a bad
//! `--pricing` file is refused naming the file and the cause.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{bin, text};
use serde_json::Value;

fn real(name: &str) -> Option<PathBuf> {
    common::real_fixture("claude-code", name)
}

/// Imports `file` as Claude into `storage`; the run id.
fn import(storage: &Path, file: &Path) -> String {
    let out = bin()
        .args(["import", "claude", "--deterministic"])
        .arg(file)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .trim_end()
        .split('\t')
        .next()
        .unwrap()
        .to_owned()
}

fn receipts(storage: &Path, run: &str, extra: &[&str]) -> (Value, String) {
    let out = bin()
        .args(["receipts", run, "--json"])
        .args(extra)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (
        serde_json::from_str(&text(&out.stdout)).unwrap(),
        text(&out.stderr),
    )
}

#[test]
fn an_imported_session_log_bills_each_request_once_at_the_pinned_price() {
    let Some(log) = real("spotter-session-log-v2.1.38-tool_heavy.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = import(dir.path(), &log);
    let (r, stderr) = receipts(dir.path(), &run, &[]);
    // jq -s '[.[] | select(.type=="assistant" and .message.usage != null)
    //   | {k: [.message.id, .requestId], u: .message.usage}] | group_by(.k) | map(last.u)
    //   | {input: map(.input_tokens) | add, output: map(.output_tokens) | add,
    //      read: map(.cache_read_input_tokens) | add,
    //      write: map(.cache_creation_input_tokens) | add}' <log>
    //   → {"input":54,"output":212,"read":88231,"write":17696}
    let t = &r["total"];
    assert_eq!(t["input_tokens"], 54, "{r:#}");
    assert_eq!(t["output_tokens"], 212);
    assert_eq!(t["cache_read_tokens"], 88231);
    assert_eq!(t["cache_write_tokens"], 17696);
    // claude-opus-4-6 in LiteLLM 1.110.2: 5e-06 in, 2.5e-05 out, 5e-07 cache read,
    // 1e-05 per 1-hour cache write (cache_creation_input_token_cost_above_1hr; all 17696
    // writes of this log are `ephemeral_1h`, #41): 54×5e-06 + 212×2.5e-05 + 88231×5e-07 + 17696×1e-05
    // = 0.00027 + 0.0053 + 0.0441155 + 0.17696 = 0.2266455
    let cost = r["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.2266455).abs() < 1e-9, "{cost}");
    assert_eq!(r["by_model"][0]["model"], "claude-opus-4-6");
    assert_eq!(r["by_model"][0]["turns"], 4);
    assert!(r["unpriced_models"].as_array().unwrap().is_empty());
    assert!(!stderr.contains("warning"), "{stderr}");
    // Per turn: four priced turns summing to the step's cost.
    let turns = r["receipts"][0]["turn_costs"].as_array().unwrap();
    assert_eq!(turns.len(), 4);
    let sum: f64 = turns.iter().map(|t| t["cost_usd"].as_f64().unwrap()).sum();
    assert!((sum - cost).abs() < 1e-9);
}

#[test]
fn a_model_the_table_lacks_is_unknown_with_one_warning_never_zero() {
    let Some(log) = real("spotter-session-log-v2.1.38-short.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = import(dir.path(), &log);
    let table = dir.path().join("prices.json");
    std::fs::write(
        &table,
        r#"{"house-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}"#,
    )
    .unwrap();
    let (r, stderr) = receipts(dir.path(), &run, &["--pricing", table.to_str().unwrap()]);
    assert_eq!(r["cost_usd"], Value::Null, "{r:#}");
    assert_eq!(r["receipts"][0]["cost_usd"], Value::Null);
    assert_eq!(r["unpriced_models"], serde_json::json!(["claude-opus-4-6"]));
    assert_eq!(
        stderr.matches("no price for model claude-opus-4-6").count(),
        1,
        "{stderr}"
    );
    // The text table shows — for the cost, never $0.
    let out = bin()
        .args(["receipts", &run, "--pricing", table.to_str().unwrap()])
        .arg("--storage")
        .arg(dir.path())
        .output()
        .unwrap();
    let table_text = text(&out.stdout);
    assert!(!table_text.contains("$0.0000"), "{table_text}");
    assert!(
        table_text.contains("model claude-opus-4-6:"),
        "{table_text}"
    );
}

#[test]
fn a_bad_pricing_file_is_refused_naming_the_file_and_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("prices.json");
    std::fs::write(&table, "{\"m\": {\"input_cost_per_token\": \"cheap\"}}").unwrap();
    let out = bin()
        .args(["receipts", "latest", "--pricing", table.to_str().unwrap()])
        .arg("--storage")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("prices.json") && stderr.contains("input_cost_per_token"),
        "{stderr}"
    );
}

#[test]
fn stats_show_the_priced_cost_beside_the_reported_one() {
    let Some(log) = real("spotter-session-log-v2.1.38-tool_heavy.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = import(dir.path(), &log);
    let stats = |extra: &[&str]| {
        let out = bin()
            .args(["stats", &run, "--json"])
            .args(extra)
            .arg("--storage")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        (
            serde_json::from_str::<Value>(&text(&out.stdout)).unwrap(),
            text(&out.stderr),
        )
    };
    let (s, _) = stats(&[]);
    // The same hand computation as above: 0.2266455 (claude-opus-4-6, LiteLLM 1.110.2).
    let cost = s["cost_by_provider"]["claude"].as_f64().unwrap();
    assert!((cost - 0.2266455).abs() < 1e-9, "{s:#}");
    let table = dir.path().join("prices.json");
    std::fs::write(&table, r#"{"other": {"input_cost_per_token": 1e-6}}"#).unwrap();
    let (s, stderr) = stats(&["--pricing", table.to_str().unwrap()]);
    assert_eq!(s["cost_by_provider"]["claude"], Value::Null);
    assert!(
        stderr.contains("no price for model claude-opus-4-6"),
        "{stderr}"
    );
}

/// The cost on OTLP spans is the receipts' cost: each `chat` span of the imported log carries
/// its turn's price under OpenInference's name (`llm.cost.total`, Phoenix) and the one
/// Langfuse maps (`gen_ai.usage.cost`), the chat spans sum to the hand computation above, and
/// the agent span carries that sum under our name (`transcript.usage.cost_usd`).
#[test]
fn otlp_chat_spans_carry_the_priced_cost_under_the_names_backends_read() {
    let Some(log) = real("spotter-session-log-v2.1.38-tool_heavy.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = import(dir.path(), &log);
    let out = bin()
        .args(["export", &run, "--format", "otlp-json", "--storage"])
        .arg(dir.path())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let spans: Vec<&Value> = doc["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["scopeSpans"].as_array().unwrap())
        .flat_map(|s| s["spans"].as_array().unwrap())
        .collect();
    let attr = |span: &Value, key: &str| -> Option<f64> {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .and_then(|a| a["value"]["doubleValue"].as_f64())
    };
    let chats: Vec<&&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 4, "one chat span per billed request");
    for key in ["llm.cost.total", "gen_ai.usage.cost"] {
        let sum: f64 = chats.iter().map(|s| attr(s, key).unwrap()).sum();
        assert!((sum - 0.2266455).abs() < 1e-9, "{key}: {sum}");
    }
    // The step's sum is on its agent span under our name only, never on a chat span: a
    // backend summing any cost name over the trace counts each call once (otlp_cost.rs).
    assert!(
        chats
            .iter()
            .all(|s| attr(s, "transcript.usage.cost_usd").is_none())
    );
    let agents: Vec<&&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("invoke_agent"))
        .collect();
    assert_eq!(agents.len(), 1);
    for a in agents {
        assert_eq!(attr(a, "llm.cost.total"), None);
        assert_eq!(attr(a, "gen_ai.usage.cost"), None);
        let ours = attr(a, "transcript.usage.cost_usd").unwrap();
        assert!((ours - 0.2266455).abs() < 1e-9, "{ours}");
    }
}
