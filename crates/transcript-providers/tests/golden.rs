//! Golden tests on our own small fixtures (`fixtures/providers/<provider>/`):
//! each input's normalized output must equal its checked-in
//! `<input>.expected.jsonl` (regenerate with `UPDATE_GOLDENS=1`, then review
//! the diff by reading it). Every fixture is also checked for chunking
//! invariance and auto-detection.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use transcript_providers::{AutoNormalizer, Output, Provider, Summary, turn_block_types};

#[test]
fn goldens_match_and_are_chunking_invariant() {
    let update = std::env::var("UPDATE_GOLDENS").is_ok_and(|v| v == "1");
    let mut checked = 0;
    for p in Provider::ALL {
        let dir = own_fixtures().join(p.name());
        for input in inputs(&dir) {
            let name = input.display().to_string();
            let bytes = std::fs::read(&input).unwrap();
            let outputs = assert_chunking_invariant(*p, &bytes, &name);
            let actual = to_jsonl(&outputs);
            let expected_path = format!("{name}.expected.jsonl");
            if update {
                std::fs::write(&expected_path, &actual).unwrap();
            }
            let expected = std::fs::read_to_string(&expected_path)
                .unwrap_or_else(|e| panic!("{expected_path}: {e} (run with UPDATE_GOLDENS=1)"));
            assert_eq!(actual, expected, "{name}: output differs from golden");
            checked += 1;
        }
    }
    assert!(checked >= 18, "only {checked} fixtures found");
}

#[test]
fn every_own_fixture_is_auto_detected() {
    for p in Provider::ALL {
        for input in inputs(&own_fixtures().join(p.name())) {
            let bytes = std::fs::read(&input).unwrap();
            let mut auto = AutoNormalizer::new();
            let mut out = Vec::new();
            for chunk in bytes.chunks(5) {
                use transcript_providers::Normalizer;
                auto.feed(chunk, &mut out);
            }
            transcript_providers::Normalizer::finish(&mut auto, &mut out);
            assert_eq!(auto.detected(), Some(*p), "{}", input.display());
            assert_eq!(
                to_jsonl(&out),
                to_jsonl(&transcript_providers::normalize(*p, &bytes))
            );
        }
    }
}

/// The same scenario (prompt → thinking → tool call → tool result → answer)
/// in every provider's format yields the same block-type sequence, modulo
/// the extras documented in the mapping table (Gemini CLI streams no
/// thinking).
#[test]
fn cross_provider_equivalence() {
    let scenarios = [
        (Provider::Claude, "claude/scenario-stream-json.jsonl"),
        (Provider::Codex, "codex/scenario-exec.jsonl"),
        (Provider::Gemini, "gemini/scenario-stream-json.jsonl"),
        (Provider::Copilot, "copilot/scenario-output-json.jsonl"),
        (Provider::OpenAi, "openai/scenario-chat-messages.json"),
        (
            Provider::Anthropic,
            "anthropic/scenario-http-recording.json",
        ),
    ];
    let canonical = vec![vec!["thinking", "tool_use", "tool_result"], vec!["text"]];
    for (p, file) in scenarios {
        let bytes = std::fs::read(own_fixtures().join(file)).unwrap();
        let out = transcript_providers::normalize(p, &bytes);
        let mut seq = turn_block_types(&out);
        if p == Provider::Gemini {
            // Documented extra: Gemini CLI stream-json carries no thinking.
            seq[0].insert(0, "thinking");
        }
        assert_eq!(seq, canonical, "{file}");
        let s = Summary::of(&out);
        assert_eq!(
            (s.tool_calls, s.tool_results, s.tool_pairs, s.dangling_calls),
            (1, 1, 1, 0),
            "{file}"
        );
        // Each turn carries the provider name (decision 10).
        for o in &out {
            if let Output::Turn(m) = o {
                assert_eq!(m.provider.as_deref(), Some(p.name()), "{file}");
            }
        }
    }
}
