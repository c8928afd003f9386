//! A backend that sums token and cost attributes over every span of a trace (Langfuse sums
//! `gen_ai.usage.*` and `gen_ai.usage.cost` over its observations, Phoenix
//! `llm.token_count.*` and `llm.cost.total` over its spans) counts each API request once:
//! over the OTLP/JSON export of a real Claude Code session log, every such name sums to the
//! jq truth of the raw log, never to twice it (agent spans and their chat spans).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::{bin, text};
use serde_json::Value;

fn real(name: &str) -> Option<PathBuf> {
    common::real_fixture("claude-code", name)
}

/// The attribute `key` of `span` as a number (OTLP/JSON: `intValue` is a string).
fn number(span: &Value, key: &str) -> Option<f64> {
    let value = &span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"];
    value["doubleValue"].as_f64().or_else(|| {
        let v = &value["intValue"];
        v.as_f64().or_else(|| v.as_str()?.parse().ok())
    })
}

#[test]
fn a_backend_summing_every_span_counts_each_request_once() {
    let Some(log) = real("spotter-session-log-v2.1.38-tool_heavy.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["import", "claude", "--deterministic"])
        .arg(&log)
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
    let spans: Vec<&Value> = doc["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["scopeSpans"].as_array().unwrap())
        .flat_map(|s| s["spans"].as_array().unwrap())
        .collect();
    assert!(
        spans
            .iter()
            .any(|s| s["name"].as_str().unwrap().starts_with("invoke_agent")),
        "the agent span is there"
    );
    // jq -s '[.[] | select(.type=="assistant" and .message.usage != null)
    //   | {k: [.message.id, .requestId], u: .message.usage}] | group_by(.k) | map(last.u)
    //   | {input: map(.input_tokens) | add, output: map(.output_tokens) | add,
    //      read: map(.cache_read_input_tokens) | add,
    //      write: map(.cache_creation_input_tokens) | add}' <log>
    //   → {"input":54,"output":212,"read":88231,"write":17696}
    // The conventions' input includes the cache: 54 + 88231 + 17696 = 105981.
    // Cost: LiteLLM 1.110.2 claude-opus-4-6 (receipts_cost.rs): 0.2266455.
    let want = [
        ("gen_ai.usage.input_tokens", 105_981.0),
        ("gen_ai.usage.output_tokens", 212.0),
        ("gen_ai.usage.cache_read.input_tokens", 88_231.0),
        ("gen_ai.usage.cache_creation.input_tokens", 17_696.0),
        ("llm.token_count.prompt", 105_981.0),
        ("llm.token_count.completion", 212.0),
        ("llm.token_count.total", 106_193.0),
        ("gen_ai.usage.cost", 0.2266455),
        ("llm.cost.total", 0.2266455),
    ];
    for (key, total) in want {
        let sum: f64 = spans.iter().filter_map(|s| number(s, key)).sum();
        assert!(
            (sum - total).abs() < 1e-9,
            "{key}: {sum} over all spans, want {total}"
        );
    }
}
