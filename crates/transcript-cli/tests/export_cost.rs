//! Cost in the exports (issue #29): a real Claude capture imported by the binary, its
//! transcript exported as Markdown, HTML and JSON and priced with the code `receipts` uses
//! (the providers crate's embedded LiteLLM table through `transcript_export::price_document`,
//! which prices with `priced_receipts`). The figures equal a hand computation from the
//! pinned table; a CLI's own `total_cost_usd` shows beside ours; a model the table lacks is
//! `—`, never $0.
//! Each test also runs `transcript export` itself (embedded table and `--pricing FILE`).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{bin, text};
use serde_json::Value;
use transcript_domain::{DecodedEvent, Usage};
use transcript_export::{ExportDocument, ExportOptions, build_document, price_document};
use transcript_providers::{LITELLM_VERSION, Pricing};

fn real(name: &str) -> Option<PathBuf> {
    common::real_fixture("claude-code", name)
}

/// Imports `file` as Claude into `storage` with the binary; its events as recorded.
fn import(storage: &Path, file: &Path) -> Vec<DecodedEvent> {
    let out = bin()
        .args(["import", "claude", "--deterministic"])
        .arg(file)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = text(&out.stdout);
    let run = run.trim_end().split('\t').next().unwrap();
    let transcript = std::fs::read_to_string(storage.join(format!("{run}.jsonl"))).unwrap();
    transcript
        .lines()
        .map(|l| transcript_domain::decode_str(l).unwrap().event)
        .collect()
}

/// `transcript export <run> --format <format> [extra]` over the only run of `storage`:
/// (stdout, stderr).
fn export(storage: &Path, format: &str, extra: &[&str]) -> (String, String) {
    let out = bin()
        .args(["export", "latest", "--format", format, "--storage"])
        .arg(storage)
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

/// The document of `events`, priced with `table` as `receipts` prices.
fn priced(events: &[DecodedEvent], table: &Pricing) -> ExportDocument {
    let mut doc = build_document(events, &mut |_| None, &ExportOptions::default());
    let price = |model: &str, u: &Usage| table.cost(model, u).map(|c| c.usd);
    price_document(&mut doc, &price, &format!("LiteLLM {LITELLM_VERSION}"));
    doc
}

#[test]
fn an_exported_session_log_shows_the_pinned_price_per_step_run_and_model() {
    let Some(log) = real("spotter-session-log-v2.1.38-tool_heavy.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let doc = priced(&import(dir.path(), &log), Pricing::embedded());
    // Tokens: the jq truth of receipts_cost.rs (one request = one message.id + requestId, its
    // last record) → {"input":54,"output":212,"read":88231,"write":17696}.
    // claude-opus-4-6 in LiteLLM 1.110.2: 5e-06 in, 2.5e-05 out, 5e-07 cache read,
    // 1e-05 per 1-hour cache write (cache_creation_input_token_cost_above_1hr; all 17696
    // writes of this log are `ephemeral_1h`, #41): 54×5e-06 + 212×2.5e-05 + 88231×5e-07 + 17696×1e-05
    // = 0.00027 + 0.0053 + 0.0441155 + 0.17696 = 0.2266455
    let want = 0.2266455;
    let cost = doc.cost.as_ref().unwrap();
    assert!((cost.total_usd.unwrap() - want).abs() < 1e-9, "{cost:?}");
    assert_eq!(cost.by_model.len(), 1);
    assert_eq!(cost.by_model[0].model, "claude-opus-4-6");
    assert_eq!(cost.by_model[0].turns, 4);
    assert_eq!(cost.by_model[0].usage.cache_read_tokens, Some(88231));
    assert!((cost.by_model[0].cost_usd.unwrap() - want).abs() < 1e-9);
    assert!(cost.unpriced_models.is_empty());
    assert!((doc.run.cost_usd.unwrap() - want).abs() < 1e-9);
    let steps: f64 = doc.run.steps.iter().filter_map(|s| s.cost_usd).sum();
    assert!((steps - want).abs() < 1e-9, "the steps sum to the run");
    let md = transcript_export::to_markdown(&doc);
    assert!(md.contains("- Cost: $0.2266\n"), "{md}");
    assert!(
        md.contains(
            "- `claude-opus-4-6`: 4 turns · 54 in / 212 out / 88231 cache read / 17696 cache write · cost $0.2266\n"
        ),
        "{md}"
    );
    assert!(md.contains("_Priced with LiteLLM 1.110.2._"));
    let html = transcript_export::to_html(&doc);
    assert!(html.contains(" · cost $0.2266</p>"), "{html}");
    let json: Value = serde_json::to_value(&doc).unwrap();
    assert!((json["cost"]["total_usd"].as_f64().unwrap() - want).abs() < 1e-9);
    // The binary prints the same figures in every format.
    let (bin_md, _) = export(dir.path(), "markdown", &[]);
    assert!(bin_md.contains("- Cost: $0.2266\n"), "{bin_md}");
    assert!(
        bin_md.contains(
            "- `claude-opus-4-6`: 4 turns · 54 in / 212 out / 88231 cache read / 17696 cache write · cost $0.2266\n"
        ),
        "{bin_md}"
    );
    assert!(bin_md.contains("LiteLLM 1.110.2"), "{bin_md}");
    let (bin_html, _) = export(dir.path(), "html", &[]);
    assert!(bin_html.contains(" · cost $0.2266</p>"), "{bin_html}");
    let (bin_json, _) = export(dir.path(), "json", &[]);
    let bin_json: Value = serde_json::from_str(&bin_json).unwrap();
    assert!((bin_json["cost"]["total_usd"].as_f64().unwrap() - want).abs() < 1e-9);
}

#[test]
fn the_clis_own_cost_shows_beside_ours_and_an_unknown_model_is_never_zero() {
    let Some(log) = real("gleam-sdk-golden-basic-query-v2.1.7.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let events = import(dir.path(), &log);
    let doc = priced(&events, Pricing::embedded());
    // jq -c 'select(.type=="result") | .total_cost_usd' <log> → 0.1354875 (the CLI's own).
    // jq -c 'select(.type=="result") | .usage' <log> → input 10, cache_creation 21570,
    //   cache_read 0, output 25; the model (assistant record): claude-opus-4-5-20251101.
    // LiteLLM 1.110.2 claude-opus-4-5-20251101: 10×5e-06 + 25×2.5e-05 + 21570×6.25e-06
    //   = 0.00005 + 0.000625 + 0.1348125 = 0.1354875
    let cost = doc.cost.as_ref().unwrap();
    assert_eq!(cost.reported_usd, Some(0.1354875), "{cost:?}");
    assert!(
        (cost.total_usd.unwrap() - 0.1354875).abs() < 1e-9,
        "{cost:?}"
    );
    let md = transcript_export::to_markdown(&doc);
    assert!(
        md.contains("- Cost: $0.1355 (the CLI reported $0.1355)\n"),
        "{md}"
    );
    assert!(md.contains("- Total (with child runs): $0.1355 · the CLIs reported $0.1355\n"));
    // A table without the model: `—` and the model named, never $0.
    let house = Pricing::from_json(
        r#"{"house-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}"#,
    )
    .unwrap();
    let doc = priced(&events, &house);
    let cost = doc.cost.as_ref().unwrap();
    assert_eq!(cost.total_usd, None);
    assert_eq!(cost.unpriced_models, ["claude-opus-4-5-20251101"]);
    let md = transcript_export::to_markdown(&doc);
    assert!(
        md.contains("- Cost: — (the CLI reported $0.1355)\n"),
        "{md}"
    );
    assert!(md.contains("- ⚠ No price for `claude-opus-4-5-20251101`: its cost shows —, never $0"));
    assert!(!md.contains("$0.0000"), "{md}");
    // The binary with that table as `--pricing FILE`: the same `—`, one warning naming it.
    let table = dir.path().join("house.json");
    std::fs::write(
        &table,
        r#"{"house-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}"#,
    )
    .unwrap();
    let (bin_md, err) = export(
        dir.path(),
        "markdown",
        &["--pricing", table.to_str().unwrap()],
    );
    assert!(
        bin_md.contains("- Cost: — (the CLI reported $0.1355)\n"),
        "{bin_md}"
    );
    assert!(!bin_md.contains("$0.0000"), "{bin_md}");
    assert_eq!(
        err.matches("claude-opus-4-5-20251101").count(),
        1,
        "one warning naming the model: {err}"
    );
}
