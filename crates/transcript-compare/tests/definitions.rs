//! Step definitions in the diff (#58 item 2): a step whose definition changed between A's
//! workflow and B's is a change at that step, one per changed top-level key, with a line diff
//! for a multi-line prompt, even when what the step recorded is equal; a side without
//! definitions is not compared; child runs' steps are named `<call>/<step>`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use serde_json::{Value, json};
use transcript_compare::{DiffOptions, LineOp, StepDefinitions, diff, diff_with_definitions};

fn defs(entries: &[(&str, Value)]) -> StepDefinitions {
    StepDefinitions(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn pipeline(id: &str) -> Run {
    let mut r = Run::new(id);
    r.command("build", "ok\n", 0);
    r.agent("review", "read_file", json!({"path": "a"}), "c1", "fine");
    r.complete(None);
    r
}

#[test]
fn a_changed_definition_is_a_change_at_its_step_even_when_the_events_are_equal() {
    let (a, b) = (pipeline(A).record(&[]), pipeline(B).record(&[]));
    assert!(diff(&a, &b, &DiffOptions::default()).equal);
    let build = json!({"command": "make", "env": ["CC"]});
    let da = defs(&[
        ("build", build.clone()),
        (
            "review",
            json!({"prompt": "Review the code.\nBe brief.\nQuote lines.", "model": "m", "tools": ["read_file"]}),
        ),
    ]);
    let db = defs(&[
        ("build", build),
        (
            "review",
            json!({"prompt": "Review the code.\nBe thorough.\nQuote lines.", "model": "m2", "tools": ["read_file"]}),
        ),
    ]);
    let doc = diff_with_definitions(&a, &b, &DiffOptions::default(), (&da, &db));
    assert!(!doc.equal);
    assert!(doc.options.definitions);
    let differing = doc.differing_steps();
    assert_eq!(differing.len(), 1, "{differing:#?}");
    assert_eq!(differing[0].0, "review");
    let changes = &differing[0].1.changes;
    let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["definition.model", "definition.prompt"]);
    // A changed definition is a cause, not a divergence: the runs behaved the same (#61).
    assert_eq!(doc.divergence, None);
    assert_eq!((&changes[0].a, &changes[0].b), (&json!("m"), &json!("m2")));
    let ops: Vec<(LineOp, &str)> = changes[1].hunks[0]
        .lines
        .iter()
        .map(|l| (l.op, l.text.as_str()))
        .collect();
    assert!(ops.contains(&(LineOp::Delete, "Be brief.")));
    assert!(ops.contains(&(LineOp::Insert, "Be thorough.")));
    assert_eq!(doc.summary.changed, 1);
    // Equal definitions, numbers as numbers: nothing.
    let one = defs(&[("build", json!({"timeout": 1}))]);
    let same = defs(&[("build", json!({"timeout": 1.0}))]);
    assert!(diff_with_definitions(&a, &b, &DiffOptions::default(), (&one, &same)).equal);
}

#[test]
fn a_side_without_definitions_is_not_compared_and_a_step_defined_on_one_side_is() {
    let (a, b) = (pipeline(A).record(&[]), pipeline(B).record(&[]));
    let some = defs(&[("build", json!({"command": "make"}))]);
    let none = StepDefinitions::default();
    let doc = diff_with_definitions(&a, &b, &DiffOptions::default(), (&some, &none));
    assert!(doc.equal && !doc.options.definitions);
    let other = defs(&[("review", json!({"model": "m"}))]);
    let doc = diff_with_definitions(&a, &b, &DiffOptions::default(), (&some, &other));
    let named: Vec<(String, Vec<String>)> = doc
        .differing_steps()
        .iter()
        .map(|(n, s)| {
            (
                n.clone(),
                s.changes.iter().map(|c| c.field.clone()).collect(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("build".to_owned(), vec!["definition".to_owned()]),
            ("review".to_owned(), vec!["definition".to_owned()])
        ]
    );
}

#[test]
fn a_child_runs_steps_are_named_under_their_call() {
    let parent = |id: &str, child: &str| {
        let mut r = Run::new(id);
        r.push(
            "step.call_workflow.started",
            "sub",
            0,
            json!({"name": "sub", "kind": "call_workflow"}),
            Some(child),
        );
        r.push(
            "step.call_workflow.completed",
            "sub",
            0,
            json!({"name": "sub", "kind": "call_workflow"}),
            Some(child),
        );
        r.complete(None);
        r
    };
    let mut ca = Run::child_of(CA, A);
    ca.command("inner", "same", 0);
    ca.complete(None);
    let mut cb = Run::child_of(CB, B);
    cb.command("inner", "same", 0);
    cb.complete(None);
    let (a, b) = (parent(A, CA).record(&[&ca]), parent(B, CB).record(&[&cb]));
    let da = defs(&[("sub/inner", json!({"command": "echo same"}))]);
    let db = defs(&[("sub/inner", json!({"command": "printf same"}))]);
    let doc = diff_with_definitions(&a, &b, &DiffOptions::default(), (&da, &db));
    let differing = doc.differing_steps();
    assert_eq!(differing.len(), 1);
    assert_eq!(differing[0].0, "sub/inner");
    assert_eq!(differing[0].1.changes[0].field, "definition.command");
}

#[test]
fn the_first_divergence_is_the_earliest_differing_turn_after_a_changed_definition() {
    let a = pipeline(A).record(&[]);
    let mut b = Run::new(B);
    b.command("build", "ok\n", 0);
    b.agent("review", "read_file", json!({"path": "b"}), "c1", "worse");
    b.complete(None);
    let b = b.record(&[]);
    let da = defs(&[("review", json!({"prompt": "Review."}))]);
    let db = defs(&[("review", json!({"prompt": "Review harder."}))]);
    let doc = diff_with_definitions(&a, &b, &DiffOptions::default(), (&da, &db));
    let d = doc.divergence.unwrap();
    assert_eq!(d.step, "review");
    // The tool call's input in the model's second turn (turn 1) is where it first behaved
    // otherwise: before its output (a step-level field) and its definition.
    assert_eq!(d.turn, Some(1), "{d:?}");
    assert!(d.field.starts_with("turns[1]"), "{d:?}");
    assert_eq!(d.to_string(), format!("step review turn 2 ({})", d.field));
}

/// A step that answered the same text with other token counts (a replay server's zeros where
/// the recording had none, a live turn's cache reads): not a divergence.
fn answered(id: &str, usage: Value) -> transcript_compare::RunRecord {
    let mut r = Run::new(id);
    r.start("ask", 0, "agent");
    r.message(
        "ask",
        "user",
        json!({}),
        json!([{"type": "text", "text": "Q?"}]),
    );
    r.message(
        "ask",
        "assistant",
        json!({"model": "m", "usage": usage}),
        json!([{"type": "text", "text": "42"}]),
    );
    r.end("ask", 0, "agent", json!({"output": "42"}), None);
    r.complete(None);
    r.record(&[])
}

#[test]
fn counted_tokens_are_not_a_divergence_but_a_changed_answer_is() {
    let a = answered(A, json!({"input_tokens": 10, "output_tokens": 2}));
    let b = answered(
        B,
        json!({"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 0, "reasoning_tokens": 0}),
    );
    let doc = diff(&a, &b, &DiffOptions::default());
    assert!(
        !doc.equal,
        "the counts differ: {:#?}",
        doc.differing_steps()
    );
    assert_eq!(doc.divergence, None);
    let mut c = Run::new(B);
    c.start("ask", 0, "agent");
    c.message(
        "ask",
        "user",
        json!({}),
        json!([{"type": "text", "text": "Q?"}]),
    );
    c.message(
        "ask",
        "assistant",
        json!({"model": "m", "usage": {"input_tokens": 99}}),
        json!([{"type": "text", "text": "43"}]),
    );
    c.end("ask", 0, "agent", json!({"output": "43"}), None);
    c.complete(None);
    let doc = diff(&a, &c.record(&[]), &DiffOptions::default());
    let d = doc.divergence.unwrap();
    assert_eq!((d.step.as_str(), d.turn), ("ask", Some(1)), "{d:?}");
    assert!(!d.field.contains("tokens"), "{d:?}");
}
