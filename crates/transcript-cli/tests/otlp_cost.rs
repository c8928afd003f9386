//! Cost counted once in a trace (issue #29): a backend that sums cost attributes over every
//! span (Langfuse `gen_ai.usage.cost`, Phoenix `llm.cost.total`) finds each API request's
//! price once, on its `chat` span, and the total is the hand computation from the pinned
//! LiteLLM table. The agent span keeps its step's sum under `transcript.usage.cost_usd` only
//! (no `chat` span repeats that name) and what the CLI reported itself under
//! `transcript.usage.reported_cost_usd`: Claude Code's `total_cost_usd` covers its whole
//! invocation, so it is never a request's price (before this, the last `chat` span carried it
//! and Phoenix summed the other turns' prices plus the CLI's total: $0.1156 for a $0.0809
//! run).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, text};
use serde_json::Value;

/// The spans of the OTLP/JSON export of `log` imported as Claude (the embedded table).
fn exported_spans(log: &Path) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["import", "claude", "--deterministic"])
        .arg(log)
        .arg("--storage")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = text(&out.stdout)
        .split('\t')
        .next()
        .unwrap()
        .trim()
        .to_owned();
    let out = bin()
        .args(["export", &run, "--format", "otlp-json", "--storage"])
        .arg(dir.path())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    doc["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["scopeSpans"].as_array().unwrap())
        .flat_map(|s| s["spans"].as_array().unwrap())
        .cloned()
        .collect()
}

/// The `doubleValue` attribute `key` of `span`.
fn cost(span: &Value, key: &str) -> Option<f64> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"]["doubleValue"]
        .as_f64()
}

/// The sum of `key` over every span, and the names of the spans carrying it.
fn sum(spans: &[Value], key: &str) -> (f64, Vec<String>) {
    let mut total = 0.0;
    let mut names = Vec::new();
    for s in spans {
        if let Some(c) = cost(s, key) {
            total += c;
            names.push(s["name"].as_str().unwrap().to_owned());
        }
    }
    (total, names)
}

/// Every cost name summed over every span: the backends' names on the `chat` spans only, ours
/// on the agent span only, each totalling `want`.
fn assert_counted_once(spans: &[Value], want: f64, chats: usize) {
    for key in ["llm.cost.total", "gen_ai.usage.cost"] {
        let (total, names) = sum(spans, key);
        assert!(
            (total - want).abs() < 1e-9,
            "{key}: {total} over {names:?}, want {want}"
        );
        assert_eq!(names.len(), chats, "{key} on {names:?}");
        assert!(names.iter().all(|n| n.starts_with("chat ")), "{names:?}");
    }
    let (total, names) = sum(spans, "transcript.usage.cost_usd");
    assert!(
        (total - want).abs() < 1e-9,
        "transcript.usage.cost_usd: {total} over {names:?}, want {want}"
    );
    assert_eq!(names, ["invoke_agent claude"]);
}

/// A Claude Code `stream-json` run whose `result` reports `total_cost_usd`: the trace's cost
/// is the requests' prices, the CLI's figure stays on the agent span under its own name.
#[test]
fn the_clis_reported_total_is_no_requests_price() {
    let Some(log) = common::real_fixture(
        "claude-code",
        "tielec-ai-workflow-stream-json-v2.0.21-multi-tool.jsonl",
    ) else {
        return;
    };
    let spans = exported_spans(&log);
    // Usage: jq -c 'select(.type=="result") | .usage' <log>
    //   → input 13, output 2445, cache read 49430, cache write 7825 (the three requests'
    //     sum; every request names claude-sonnet-4-5-20250929, none above 200k tokens).
    // claude-sonnet-4-5-20250929 in LiteLLM 1.110.2: 3e-06 in, 1.5e-05 out, 3e-07 cache
    // read, 3.75e-06 cache write: 13×3e-06 + 2445×1.5e-05 + 49430×3e-07 + 7825×3.75e-06
    // = 0.000039 + 0.036675 + 0.014829 + 0.02934375 = 0.08088675
    // (the CLI's own modelUsage costUSD for that model says 0.08088675 too).
    assert_counted_once(&spans, 0.080_886_75, 3);
    // jq 'select(.type=="result") | .total_cost_usd' <log> → 0.08373774999999999 (the
    // sonnet requests plus a haiku helper call that is no message of the log).
    let (reported, names) = sum(&spans, "transcript.usage.reported_cost_usd");
    assert!((reported - 0.083_737_75).abs() < 1e-9, "{reported}");
    assert_eq!(names, ["invoke_agent claude"]);
}

/// A Claude Code session log (no reported cost): the same rule, four requests.
#[test]
fn a_session_logs_requests_are_priced_once() {
    let Some(log) = common::real_fixture(
        "claude-code",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ) else {
        return;
    };
    let spans = exported_spans(&log);
    // Tokens: the jq of otlp_counts.rs → input 54, output 212, cache read 88231,
    // cache write 17696, all claude-opus-4-6.
    // claude-opus-4-6 in LiteLLM 1.110.2: 5e-06 in, 2.5e-05 out, 5e-07 cache read,
    // 1e-05 per 1-hour cache write (cache_creation_input_token_cost_above_1hr; all 17696
    // writes of this log are `ephemeral_1h`, #41): 54×5e-06 + 212×2.5e-05 + 88231×5e-07 + 17696×1e-05
    // = 0.00027 + 0.0053 + 0.0441155 + 0.17696 = 0.2266455
    assert_counted_once(&spans, 0.226_645_5, 4);
    assert_eq!(sum(&spans, "transcript.usage.reported_cost_usd").1.len(), 0);
}
