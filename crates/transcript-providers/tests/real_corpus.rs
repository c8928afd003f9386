//! Real corpus: every file under `$TRANSCRIPT_REAL_FIXTURES/<folder>` is
//! normalized and its counts compared with the checked-in manifest
//! `fixtures/real-manifest/<provider>.json`, whose numbers were computed by
//! the jq program named in it (`fixtures/real-manifest/generate.sh`), never
//! by this parser. Unset variable: skipped (printed). Set but folder
//! missing: fails loudly. A capture missing from the manifest fails too.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;
use transcript_providers::{Provider, Summary};

fn count(s: &Summary, key: &str) -> u64 {
    match key {
        "text" | "thinking" | "tool_use" | "tool_result" => s.blocks.get(key).copied().unwrap_or(0),
        "tool_pairs" => s.tool_pairs,
        "dangling_calls" => s.dangling_calls,
        "input_tokens" => s.usage.input_tokens.unwrap_or(0),
        "output_tokens" => s.usage.output_tokens.unwrap_or(0),
        "cache_read_tokens" => s.usage.cache_read_tokens.unwrap_or(0),
        "cache_write_tokens" => s.usage.cache_write_tokens.unwrap_or(0),
        "provider_error" | "malformed" | "refusal" | "incomplete" => {
            s.diagnostics.get(key).copied().unwrap_or(0)
        }
        other => panic!("manifest count {other:?} is not known to the test"),
    }
}

fn check_provider(provider: Provider) {
    let Some(root) = real_root() else { return };
    let manifest_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/real-manifest")
        .join(format!("{}.json", provider.name()));
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let folder = root.join(manifest["folder"].as_str().unwrap());
    assert!(folder.is_dir(), "{} is missing", folder.display());
    let files = manifest["files"].as_object().unwrap();
    let mut failures = Vec::new();
    let mut seen = 0;
    for path in inputs(&folder) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let expected = files
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is not covered by {}", manifest_path.display()));
        let bytes = std::fs::read(&path).unwrap();
        let out = assert_chunking_invariant(provider, &bytes, &name);
        let s = Summary::of(&out);
        // Tool events and blocks agree with each other.
        assert_eq!(
            s.tool_calls,
            count(&s, "tool_use"),
            "{name}: tool.call vs tool_use blocks"
        );
        assert_eq!(
            s.tool_results,
            count(&s, "tool_result"),
            "{name}: tool.result vs tool_result blocks"
        );
        for (key, want) in expected.as_object().unwrap() {
            let got = count(&s, key);
            if got != want.as_u64().unwrap() {
                failures.push(format!("{name}: {key} = {got}, manifest (jq) says {want}"));
            }
        }
        seen += 1;
    }
    assert_eq!(
        seen,
        files.len(),
        "manifest lists files that are not in {}",
        folder.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn claude_corpus_matches_manifest() {
    check_provider(Provider::Claude);
}

#[test]
fn codex_corpus_matches_manifest() {
    check_provider(Provider::Codex);
}

#[test]
fn gemini_corpus_matches_manifest() {
    check_provider(Provider::Gemini);
}

#[test]
fn copilot_corpus_matches_manifest() {
    check_provider(Provider::Copilot);
}

#[test]
fn openai_corpus_matches_manifest() {
    check_provider(Provider::OpenAi);
}

#[test]
fn anthropic_corpus_matches_manifest() {
    check_provider(Provider::Anthropic);
}

/// Issue #18 item 5: auto-detection names the right provider for every real
/// capture, including `_synthetic/awf-cli-transcript-input-<provider>.jsonl`
/// (the Gemini one starts with `{"type":"user",…}`, once read as Claude).
#[test]
fn every_real_capture_is_auto_detected_as_its_provider() {
    use transcript_providers::{AutoNormalizer, Normalizer};
    let Some(root) = real_root() else { return };
    let mut cases = Vec::new();
    for p in Provider::ALL {
        let manifest_path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/real-manifest")
            .join(format!("{}.json", p.name()));
        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
        for path in inputs(&root.join(manifest["folder"].as_str().unwrap())) {
            cases.push((*p, path));
        }
    }
    let synthetic = root.join("_synthetic");
    if synthetic.is_dir() {
        for path in inputs(&synthetic) {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let p = match name.rsplit('-').next().unwrap() {
                "claude.jsonl" => Provider::Claude,
                "codex.jsonl" => Provider::Codex,
                "gemini.jsonl" => Provider::Gemini,
                "copilot.jsonl" => Provider::Copilot,
                "openaicompatible.jsonl" => Provider::OpenAi,
                other => panic!("{name}: no provider known for {other}"),
            };
            cases.push((p, path));
        }
    }
    let mut wrong = Vec::new();
    for (p, path) in &cases {
        let bytes = std::fs::read(path).unwrap();
        let mut auto = AutoNormalizer::new();
        let mut out = Vec::new();
        for c in bytes.chunks(13) {
            auto.feed(c, &mut out);
        }
        auto.finish(&mut out);
        if auto.detected() != Some(*p) {
            wrong.push(format!(
                "{}: {:?}, expected {p}",
                path.display(),
                auto.detected()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
