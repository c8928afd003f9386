//! Issue #16's normalizer bugs, on small own fixtures shaped like what the
//! real CLIs print (`fixtures/providers/{codex,claude}/`):
//! - Codex reports an `error` item it then survives (the turn completes):
//!   a warning, not a provider error that fails the step;
//! - Claude Code's `assistant` lines carry the usage snapshot taken at
//!   message_start; the run's totals on the `result` line are what was
//!   billed, and `claude-opus-4-8[1m]` is one model, not two.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use transcript_domain::Usage;
use transcript_providers::{DiagnosticKind as K, Output, Provider, Summary, normalize};

fn fixture(p: Provider, name: &str) -> Vec<Output> {
    let path = own_fixtures().join(p.name()).join(name);
    assert_chunking_invariant(p, &std::fs::read(&path).unwrap(), name)
}

fn kinds(out: &[Output]) -> Vec<K> {
    out.iter()
        .filter_map(Output::as_diagnostic)
        .map(|d| d.kind)
        .collect()
}

#[test]
fn a_codex_error_item_followed_by_a_completed_turn_is_a_warning() {
    let out = fixture(Provider::Codex, "exec-warning-item.jsonl");
    assert!(!kinds(&out).contains(&K::ProviderError), "{out:?}");
    let w: Vec<_> = out
        .iter()
        .filter_map(Output::as_diagnostic)
        .filter(|d| d.kind == K::Warning)
        .collect();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].detail
            .starts_with("Model metadata for `scripted-model` not found")
    );
    assert_eq!(w[0].position.line, 3);
    assert_eq!(Summary::of(&out).turns, 1);
}

/// What real Codex 0.169 printed against our scripted server
/// (`fixtures/agent-clis/codex/tool_round_trip.jsonl`): the warning item comes *before*
/// `turn.started`, and the turn then completes.
#[test]
fn a_codex_warning_printed_before_the_turn_starts_is_a_warning_too() {
    let path = own_fixtures().join("../agent-clis/codex/tool_round_trip.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    let first_lines: Vec<&str> = std::str::from_utf8(&bytes)
        .unwrap()
        .lines()
        .take(3)
        .collect();
    assert!(
        first_lines[1].contains("\"type\":\"error\"") && first_lines[2].contains("turn.started")
    );
    let out = assert_chunking_invariant(Provider::Codex, &bytes, "tool_round_trip.jsonl");
    let kinds = kinds(&out);
    assert!(!kinds.contains(&K::ProviderError), "{out:?}");
    assert_eq!(kinds.iter().filter(|k| **k == K::Warning).count(), 1);
}

#[test]
fn a_codex_error_item_without_a_completed_turn_is_still_an_error() {
    let err = r#"{"type":"item.completed","item":{"id":"e","type":"error","message":"boom"}}"#;
    // The turn fails.
    let failed = format!(
        "{{\"type\":\"turn.started\"}}\n{err}\n{{\"type\":\"turn.failed\",\"error\":{{\"message\":\"x\"}}}}\n"
    );
    let out = normalize(Provider::Codex, failed.as_bytes());
    assert_eq!(
        kinds(&out),
        [K::Metadata, K::ProviderError, K::ProviderError]
    );
    // The stream ends mid-turn.
    let cut = format!("{{\"type\":\"turn.started\"}}\n{err}\n");
    let out = normalize(Provider::Codex, cut.as_bytes());
    assert_eq!(kinds(&out), [K::Metadata, K::ProviderError]);
    // A new turn starts without the previous one completing.
    let restarted =
        format!("{{\"type\":\"turn.started\"}}\n{err}\n{{\"type\":\"turn.started\"}}\n");
    let out = normalize(Provider::Codex, restarted.as_bytes());
    assert_eq!(kinds(&out), [K::Metadata, K::ProviderError, K::Metadata]);
}

#[test]
fn claude_turn_usage_sums_to_the_result_totals() {
    let out = fixture(Provider::Claude, "stream-json-result-usage.jsonl");
    let s = Summary::of(&out);
    assert_eq!(s.turns, 2);
    // The result line's usage, not the message_start snapshots (2 output
    // tokens summed before the fix).
    assert_eq!(
        s.usage,
        Usage {
            input_tokens: Some(22),
            output_tokens: Some(27),
            cache_read_tokens: Some(205),
            cache_write_tokens: Some(5),
            reasoning_tokens: None,
            cost_usd: Some(0.0123),
            ..Default::default()
        }
    );
    let turns: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Turn(m) => Some(m),
            _ => None,
        })
        .collect();
    // Earlier turns keep their own report; the last carries the rest.
    assert_eq!(turns[0].usage.as_ref().unwrap().output_tokens, Some(1));
    assert_eq!(turns[1].usage.as_ref().unwrap().output_tokens, Some(26));
    // One model: the context tag of `claude-opus-4-8[1m]` is not a model.
    for t in &turns {
        assert_eq!(t.model.as_deref(), Some("claude-opus-4-8"));
    }
}

#[test]
fn claude_result_without_usage_sums_model_usage_and_strips_the_tag_of_init() {
    let input = r#"{"type":"system","subtype":"init","model":"claude-opus-4-8[1m]"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1}}}
{"type":"result","subtype":"success","modelUsage":{"claude-opus-4-8[1m]":{"inputTokens":3,"outputTokens":9},"claude-haiku-4-5":{"inputTokens":100,"outputTokens":20}}}
"#;
    let out = normalize(Provider::Claude, input.as_bytes());
    let s = Summary::of(&out);
    assert_eq!(
        (s.usage.input_tokens, s.usage.output_tokens),
        (Some(103), Some(29))
    );
    let Some(Output::Turn(t)) = out.iter().find(|o| matches!(o, Output::Turn(_))) else {
        panic!("{out:?}")
    };
    assert_eq!(t.model.as_deref(), Some("claude-opus-4-8"));
}

#[test]
fn each_claude_run_in_a_file_is_settled_on_its_own_result() {
    let run = |id: &str, out_tokens: u64| {
        format!(
            "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}}],\"usage\":{{\"output_tokens\":1}}}}}}\n\
             {{\"type\":\"result\",\"subtype\":\"success\",\"usage\":{{\"output_tokens\":{out_tokens}}}}}\n"
        )
    };
    let input = format!("{}{}", run("a", 10), run("b", 7));
    let out = normalize(Provider::Claude, input.as_bytes());
    let per_turn: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Turn(m) => m.usage.as_ref().and_then(|u| u.output_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(per_turn, [10, 7]);
}

/// Gemini CLI 0.61 against our scripted server (`fixtures/agent-clis/gemini/`), which billed 62
/// output tokens of which 10 thinking: the CLI prints `output_tokens` 52 without `thoughts`,
/// and `total_tokens` still counts them.
#[test]
fn gemini_thought_tokens_come_from_the_total_when_the_cli_omits_them() {
    let path = own_fixtures().join("../agent-clis/gemini/tool_round_trip.jsonl");
    let out = assert_chunking_invariant(
        Provider::Gemini,
        &std::fs::read(&path).unwrap(),
        "tool_round_trip.jsonl",
    );
    let mut usage = Usage::default();
    for o in &out {
        if let Some(u) = o
            .to_payload()
            .and_then(|p| p.as_message().and_then(|m| m.usage.clone()))
        {
            usage.accumulate(&u);
        }
    }
    assert_eq!(usage.reasoning_tokens, Some(10), "{usage:?}");
    assert_eq!(usage.output_tokens, Some(52), "{usage:?}");
}
