//! Money in the diff and the check (#58 items 3 and 4): costs print as `transcript receipts`
//! prints them (transcript-export's receipts are the reference), in the text view and on the
//! HTML page, whose changed field is marked; a cost bound over an unknown cost names each
//! model without a price and its step; Claude Code's `<synthetic>` turns never make a cost
//! unknown.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;
use transcript_compare::{
    DiffOptions, Expectations, RunRecord, check, diff, render_diff_text, render_html, usd,
};
use transcript_domain::{RunId, Usage};

#[test]
fn costs_print_as_receipts_print_them() {
    for cost in [
        0.000876,
        0.0008759999999999999,
        0.0,
        12.34567,
        0.00005,
        1e-9,
    ] {
        let receipts = transcript_export::Receipts {
            run_id: A.to_owned(),
            receipts: Vec::new(),
            per_run: Vec::new(),
            total: Usage::default(),
            cost_usd: Some(cost),
            by_model: Vec::new(),
            unpriced_models: Vec::new(),
            duplicates: 0,
        };
        let printed = receipts.render();
        let ours = format!("cost {} · reported", usd(Some(cost)));
        assert!(printed.contains(&ours), "{ours:?} not in {printed}");
    }
    assert_eq!(usd(None), "—");
}

/// A run whose agent step `ask` had one turn of `model` reading `input` tokens.
fn asked(id: &str, model: &str, input: u64) -> transcript_compare::RunRecord {
    let mut r = Run::new(id);
    r.start("ask", 0, "agent");
    r.message(
        "ask",
        "assistant",
        json!({"provider": "claude", "model": model, "usage": {"input_tokens": input}}),
        json!([{"type": "text", "text": "hi"}]),
    );
    r.end("ask", 0, "agent", json!("hi"), None);
    r.complete(None);
    // $0.000001 per input token of model `m`.
    let price = |m: &str, u: &Usage| (m == "m").then(|| u.input_tokens.unwrap_or(0) as f64 * 1e-6);
    RunRecord::build(&r.events, &mut |_: RunId| None, Some(&price))
}

#[test]
fn the_text_view_and_the_page_show_costs_as_money_and_mark_the_changed_field() {
    let doc = diff(
        &asked(A, "m", 876),
        &asked(B, "m", 1234),
        &DiffOptions::default(),
    );
    let text = render_diff_text(&doc, ("a", "b"), &Plain);
    assert!(text.contains("cost_usd: $0.0009 → $0.0012"), "{text}");
    assert!(!text.contains("0.000876"), "{text}");
    let page = render_html(&doc, "a", "b");
    assert!(
        page.contains("<div class=\"field changed\">cost_usd</div>"),
        "{page}"
    );
    assert!(page.contains("<pre class=\"was\">$0.0009</pre>"), "{page}");
    assert!(page.contains("<pre class=\"now\">$0.0012</pre>"), "{page}");
    assert!(!page.contains("0.000876"));
}

#[test]
fn the_page_marks_the_changed_keys_of_an_object() {
    let mut a = Run::new(A);
    a.agent(
        "review",
        "read",
        json!({"path": "a.rs", "limit": 10}),
        "c",
        "ok",
    );
    a.complete(None);
    let mut b = Run::new(B);
    b.agent(
        "review",
        "read",
        json!({"path": "b.rs", "limit": 10}),
        "c",
        "ok",
    );
    b.complete(None);
    let doc = diff(&a.record(&[]), &b.record(&[]), &DiffOptions::default());
    let page = render_html(&doc, "a", "b");
    assert!(
        page.contains("<span class=\"key\">  &quot;path&quot;: &quot;a.rs&quot;</span>"),
        "{page}"
    );
    assert!(
        page.contains("  &quot;limit&quot;: 10,\n") || page.contains("  &quot;limit&quot;: 10\n"),
        "{page}"
    );
}

#[test]
fn an_unknown_cost_names_the_model_without_a_price_and_its_step() {
    let run = asked(A, "claude-foo-9", 10);
    assert_eq!(run.spend.cost_usd, None);
    assert_eq!(run.spend.unpriced_models, ["claude-foo-9"]);
    let e = Expectations::parse(
        "run: {max_cost_usd: 1}\nsteps: {ask: {max_cost_usd: 1}}\n",
        "e.yaml",
    )
    .unwrap();
    let outcomes = check(&run, &e);
    for o in &outcomes {
        assert!(!o.passed);
        assert_eq!(
            o.detail,
            "cost unknown: no price for model claude-foo-9 (step ask)"
        );
    }
}

#[test]
fn synthetic_turns_are_not_billed_and_never_unknown() {
    let mut r = Run::new(A);
    r.start("ask", 0, "agent");
    let usage = json!({"input_tokens": 0, "output_tokens": 0});
    r.message(
        "ask",
        "assistant",
        json!({"model": "m", "usage": {"input_tokens": 5}}),
        json!([{"type": "text", "text": "a"}]),
    );
    r.message(
        "ask",
        "assistant",
        json!({"model": "<synthetic>", "usage": usage}),
        json!([{"type": "text", "text": "API Error: overloaded"}]),
    );
    r.end("ask", 0, "agent", json!("a"), None);
    r.complete(None);
    // A price table that knows only `m`, as a `--pricing` file might.
    let price = |m: &str, u: &Usage| (m == "m").then(|| u.input_tokens.unwrap_or(0) as f64);
    let run = RunRecord::build(&r.events, &mut |_: RunId| None, Some(&price));
    assert_eq!(run.spend.cost_usd, Some(5.0));
    assert!(run.spend.unpriced_models.is_empty());
    let e = Expectations::parse("run: {max_cost_usd: 6}\n", "e.yaml").unwrap();
    assert!(check(&run, &e)[0].passed, "{:#?}", check(&run, &e));
}
