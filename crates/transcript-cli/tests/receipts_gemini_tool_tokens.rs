//! Gemini's tool-use prompt tokens are input, whichever Gemini CLI output is imported.
//!
//! The Gemini API bills `toolUsePromptTokenCount` as input and counts it outside the prompt:
//! `total = prompt + candidates + thoughts + tool`. Gemini CLI reports it as `tool` in each
//! model's `tokens` of its `--output-format json` document, as in its saved sessions. The
//! saved-session reader already added it to the input; the `json` document's reader dropped
//! it (the real capture below: 28 of gemini-2.5-flash's input tokens missing, and their
//! price). Truth: jq over the raw capture and the pinned LiteLLM table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{bin, real_fixture, text};
use serde_json::Value;

fn jq(filter: &str, file: &Path) -> Value {
    let out = Command::new("jq")
        .arg("-c")
        .arg(filter)
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "jq: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_json_documents_tool_use_prompt_tokens_are_billed_as_input() {
    let Some(doc) = real_fixture("gemini", "gemini-cli-docs-headless-json-output-france.json")
    else {
        return;
    };
    // The capture's own arithmetic: each model's total is prompt + candidates + thoughts +
    // tool, so `tool` is not inside `prompt`.
    let sums = jq(
        ".stats.models | map_values(.tokens | .total == .prompt + .candidates + .thoughts + .tool)",
        &doc,
    );
    assert_eq!(
        sums,
        serde_json::json!({"gemini-2.5-pro": true, "gemini-2.5-flash": true})
    );
    // jq '.stats.models | map_values(.tokens | .prompt - .cached + .tool)'
    //   → {"gemini-2.5-pro": 3676, "gemini-2.5-flash": 8993}
    let want_input = jq(
        ".stats.models | map_values(.tokens | .prompt - .cached + .tool)",
        &doc,
    );
    let storage = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["import", "gemini"])
        .arg(&doc)
        .arg("--storage")
        .arg(storage.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = bin()
        .args(["receipts", "--by", "model", "--json", "--storage"])
        .arg(storage.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let receipts: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = receipts["groups"].as_array().unwrap();
    let group = |model: &str| {
        groups
            .iter()
            .find(|g| g["key"] == model)
            .unwrap_or_else(|| panic!("no group {model}: {receipts}"))
    };
    for model in ["gemini-2.5-pro", "gemini-2.5-flash"] {
        assert_eq!(
            group(model)["usage"]["input_tokens"],
            want_input[model],
            "{model}: {receipts}"
        );
    }
    // LiteLLM 1.110.2 gemini-2.5-flash: 3e-07 in, 2.5e-06 out and reasoning (no cache reads):
    // (8965 − 0 + 28)×3e-07 + 10×2.5e-06 + 30×2.5e-06 = 0.0026979 + 0.000025 + 0.000075
    //   = 0.0027979 (without the tool tokens: 0.0027895).
    let flash = group("gemini-2.5-flash")["cost_usd"].as_f64().unwrap();
    assert!((flash - 0.002_797_9).abs() < 1e-12, "flash cost {flash}");
}
