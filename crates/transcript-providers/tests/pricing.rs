//! Prices (issue #29 item 2): the cost of a usage equals a hand computation
//! from the pinned LiteLLM table (1.110.2, `src/pricing/litellm-prices.json`;
//! each price is quoted from it beside the arithmetic), for one model of
//! each provider; unknown models are unknown, never $0; a bad table is a
//! typed error.
#![allow(clippy::unwrap_used)]

use transcript_domain::Usage;
use transcript_providers::{Pricing, PricingError};

fn usage(input: u64, output: u64, read: u64, write: u64, reasoning: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cache_read_tokens: Some(read),
        cache_write_tokens: Some(write),
        reasoning_tokens: Some(reasoning),
        cost_usd: None,
        ..Default::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// Claude (Claude Code, Anthropic API): claude-opus-4-6. input 5e-06,
/// output 2.5e-05, cache read 5e-07, cache write 6.25e-06 per token. Usage:
/// spotter-session-log-v2.1.38-tool_heavy.jsonl's requests (claude.json:
/// input 54, output 212, cache read 88,231, cache write 17,696).
#[test]
fn claude_opus_cost_equals_the_hand_computation() {
    let c = Pricing::embedded()
        .cost("claude-opus-4-6", &usage(54, 212, 88_231, 17_696, 0))
        .unwrap();
    // 54 × 5e-06      = 0.00027
    // 212 × 2.5e-05   = 0.0053
    // 88231 × 5e-07   = 0.0441155
    // 17696 × 6.25e-06 = 0.1106
    // total           = 0.1602855
    assert!(close(c.usd, 0.1602855), "{}", c.usd);
    assert_eq!(c.priced_as, "claude-opus-4-6");
    assert_eq!(c.tier_above, None);
}

/// OpenAI / Codex: gpt-5-codex. input 1.25e-06, output 1e-05, cache read
/// 1.25e-07. Usage: the Codex rollout capture (input 12,757 uncached, cache
/// read 3,584, output 81 of which 63 reasoning, already inside output).
#[test]
fn codex_gpt_5_codex_cost_equals_the_hand_computation() {
    let c = Pricing::embedded()
        .cost("gpt-5-codex", &usage(12_757, 81, 3_584, 0, 63))
        .unwrap();
    // 12757 × 1.25e-06 = 0.01594625
    // 81 × 1e-05       = 0.00081
    // 3584 × 1.25e-07  = 0.000448
    // reasoning: part of output for OpenAI, not billed again
    // total            = 0.01720425
    assert!(close(c.usd, 0.01720425), "{}", c.usd);
}

/// Gemini: gemini-2.5-pro (vertex_ai-language-models entry). input 1.25e-06,
/// output 1e-05, cache read 1.25e-07; above 200k prompt tokens: input
/// 2.5e-06, output 1.5e-05, cache read 2.5e-07. Thought tokens are counted
/// apart from output by Gemini and billed at the output price (the entry has
/// no output_cost_per_reasoning_token). Usage: the france json document's
/// gemini-2.5-pro entry (input 24,939 − 21,263 cached = 3,676, output 20,
/// cached 21,263, thoughts 154).
#[test]
fn gemini_2_5_pro_cost_equals_the_hand_computation_in_both_tiers() {
    let p = Pricing::embedded();
    let c = p
        .cost("gemini-2.5-pro", &usage(3_676, 20, 21_263, 0, 154))
        .unwrap();
    // 3676 × 1.25e-06  = 0.004595
    // 20 × 1e-05       = 0.0002
    // 21263 × 1.25e-07 = 0.002657875
    // 154 × 1e-05      = 0.00154
    // total            = 0.008992875
    assert!(close(c.usd, 0.008992875), "{}", c.usd);
    assert_eq!(c.tier_above, None);
    // Prompt 250,000 + 10,000 cached > 200,000: the whole request at the
    // long-context rate.
    let c = p
        .cost("gemini-2.5-pro", &usage(250_000, 1_000, 10_000, 0, 0))
        .unwrap();
    // 250000 × 2.5e-06 = 0.625
    // 1000 × 1.5e-05   = 0.015
    // 10000 × 2.5e-07  = 0.0025
    // total            = 0.6425
    assert!(close(c.usd, 0.6425), "{}", c.usd);
    assert_eq!(c.tier_above, Some(200_000));
    // Exactly 200,000 is not above the threshold.
    let c = p
        .cost("gemini-2.5-pro", &usage(200_000, 0, 0, 0, 0))
        .unwrap();
    assert!(close(c.usd, 0.25), "{}", c.usd); // 200000 × 1.25e-06
}

#[test]
fn an_unknown_model_has_no_cost_never_zero() {
    let p = Pricing::embedded();
    assert_eq!(p.cost("auto", &usage(10, 10, 0, 0, 0)), None);
    assert_eq!(p.cost("my-local-llama", &usage(10, 10, 0, 0, 0)), None);
    // A vendor-prefixed name falls back to the bare model.
    assert!(p.cost("openrouter/gpt-5", &usage(1, 1, 0, 0, 0)).is_some());
}

#[test]
fn a_replacement_table_replaces_the_prices() {
    let p = Pricing::from_json(
        r#"{"sample_spec": "documents the format",
            "house-model": {"input_cost_per_token": 0.001, "output_cost_per_token": 0.002,
                            "input_cost_per_token_above_10k_tokens": 0.01, "mode": "chat"}}"#,
    )
    .unwrap();
    assert_eq!(p.len(), 1);
    assert!(p.cost("claude-opus-4-6", &usage(1, 1, 0, 0, 0)).is_none());
    let c = p.cost("house-model", &usage(100, 10, 0, 0, 0)).unwrap();
    assert!(close(c.usd, 100.0 * 0.001 + 10.0 * 0.002), "{}", c.usd);
    // Above 10k: input at the tier price, output (no tier price) at base.
    let c = p.cost("house-model", &usage(20_000, 10, 0, 0, 0)).unwrap();
    assert!(close(c.usd, 20_000.0 * 0.01 + 10.0 * 0.002), "{}", c.usd);
    // No cache price: cache counts are priced as input.
    let c = p.cost("house-model", &usage(0, 0, 100, 100, 0)).unwrap();
    assert!(close(c.usd, 200.0 * 0.001), "{}", c.usd);
}

#[test]
fn a_bad_table_is_a_typed_error_naming_the_cause() {
    match Pricing::from_json("{\n  \"m\": {\"input_cost_per_token\": 1e-6,}\n}") {
        Err(PricingError::Json { line: 2, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        Pricing::from_json("[1, 2]"),
        Err(PricingError::NotATable { found: "an array" })
    );
    for bad in [r#""cheap""#, "-1e-6", "null"] {
        let text = format!(r#"{{"m": {{"output_cost_per_token": {bad}}}}}"#);
        match Pricing::from_json(&text) {
            Err(e @ PricingError::BadPrice { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("\"m\"") && msg.contains("output_cost_per_token"),
                    "{msg}"
                );
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(
        Pricing::from_json(r#"{"m": {"mode": "chat"}}"#),
        Err(PricingError::Empty)
    );
}

/// Claude Code's `<synthetic>` turns (its own error messages, no API request) are never
/// billed and never make a cost unknown, whatever usage they carry.
#[test]
fn claude_codes_synthetic_turns_cost_nothing() {
    let c = Pricing::embedded()
        .cost(
            transcript_providers::SYNTHETIC_MODEL,
            &usage(10, 20, 30, 40, 0),
        )
        .unwrap();
    assert_eq!(c.usd, 0.0);
    assert_eq!(c.priced_as, "<synthetic>");
    assert!(
        Pricing::default()
            .cost("<synthetic>", &Usage::default())
            .is_some()
    );
    assert!(
        Pricing::default()
            .cost("claude-opus-4-6", &Usage::default())
            .is_none()
    );
}
