//! Copilot CLI's session store (`~/.copilot/session-state/<session-id>/events.jsonl`) bills
//! each request once: every `assistant.message` its `outputTokens`, and `session.shutdown`
//! each model's remainder from `modelMetrics.<model>.usage` (`inputTokens` includes the cache
//! reads and writes), so the turns sum to the shutdown's per-model totals. The record shapes
//! are the ones third-party readers of real sessions publish (no schema is published by
//! GitHub): `modelMetrics.<model>.{requests.count, usage.{inputTokens, cacheReadTokens,
//! cacheWriteTokens, outputTokens}}` in https://github.com/mag123c/toktrack/pull/211, input
//! including the cache and one shutdown per resumed segment in
//! https://github.com/kenn-io/agentsview/pull/577, the event envelope and sequence in
//! https://github.com/ingo-eichhorst/Irrlicht/issues/1256 and
//! https://github.com/tenequm/pond/issues/206. Our fixture built from them:
//! `fixtures/providers/copilot/session-state-events.jsonl` (provenance in
//! `fixtures/providers/README.md`).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use transcript_domain::Usage;
use transcript_providers::{Output, Provider, normalize};

fn fixture() -> Vec<u8> {
    std::fs::read(own_fixtures().join("copilot/session-state-events.jsonl")).unwrap()
}

/// Every turn's model and usage.
fn billed(out: &[Output]) -> Vec<(Option<String>, Usage)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Turn(m) => Some((m.model.clone(), m.usage.clone()?)),
            _ => None,
        })
        .collect()
}

fn sum(turns: &[(Option<String>, Usage)]) -> Usage {
    let mut total = Usage::default();
    for (_, u) in turns {
        total.accumulate(u);
    }
    total
}

#[test]
fn the_shutdown_bills_each_models_remainder_once() {
    let turns = billed(&normalize(Provider::Copilot, &fixture()));
    // jq -c 'select(.type=="assistant.message") | .data.outputTokens' → 30, 12 (m-0, m-1);
    // jq -c 'select(.type=="session.shutdown") | .data.modelMetrics."gpt-5-mini".usage'
    //   → inputTokens 21100 (cache included), cacheReadTokens 21000, cacheWriteTokens 0,
    //     outputTokens 42: the remainder is input 100, cache read 21000, output 42 − 30 − 12.
    assert_eq!(turns.len(), 3, "{turns:?}");
    assert_eq!(turns[0].1.output_tokens, Some(30));
    assert_eq!(turns[1].1.output_tokens, Some(12));
    let rest = &turns[2];
    assert_eq!(rest.0.as_deref(), Some("gpt-5-mini"));
    assert_eq!(rest.1.input_tokens, Some(100));
    assert_eq!(rest.1.cache_read_tokens, Some(21000));
    assert_eq!(rest.1.output_tokens, Some(0));
    let total = sum(&turns);
    assert_eq!(
        (
            total.input_tokens,
            total.output_tokens,
            total.cache_read_tokens
        ),
        (Some(100), Some(42), Some(21000))
    );
}

/// A resumed session writes one shutdown per segment, each counting its own segment: the
/// second segment's remainder is its own usage minus its own messages' output.
#[test]
fn each_resumed_segment_is_billed_by_its_own_shutdown() {
    let once = String::from_utf8(fixture()).unwrap();
    let second = once
        .replace("\"m-0\"", "\"m-2\"")
        .replace("\"m-1\"", "\"m-3\"")
        .replace("\"inputTokens\":21100", "\"inputTokens\":500");
    let both = format!("{once}{second}");
    let turns = billed(&normalize(Provider::Copilot, both.as_bytes()));
    let total = sum(&turns);
    // Segment 1: input 100, cache read 21000, output 42; segment 2: input 500 − 21000
    // (saturating: 0), cache read 21000, output 42.
    assert_eq!(total.output_tokens, Some(84), "{turns:?}");
    assert_eq!(total.cache_read_tokens, Some(42000));
    assert_eq!(total.input_tokens, Some(100));
}

/// A shutdown whose `modelMetrics` has no `usage` (Copilot 1.0.77's
/// `{"requests": 2}`, as in the real capture of `$TRANSCRIPT_REAL_FIXTURES/copilot`) adds
/// no turn: the messages' output is the bill.
#[test]
fn a_shutdown_without_usage_adds_nothing() {
    let text = String::from_utf8(fixture()).unwrap();
    let start = text.find("\"modelMetrics\"").unwrap();
    let end = text.find(",\"tokenDetails\"").unwrap();
    let bare = format!(
        "{}\"modelMetrics\":{{\"gpt-5-mini\":{{\"requests\":2}}}}{}",
        &text[..start],
        &text[end..]
    );
    let turns = billed(&normalize(Provider::Copilot, bare.as_bytes()));
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(sum(&turns).output_tokens, Some(42));
    assert_eq!(sum(&turns).input_tokens, None);
}
