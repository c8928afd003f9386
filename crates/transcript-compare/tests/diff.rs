//! The diff on hand-written runs: equal runs are equal whatever their ids and times, a change
//! is named in its step only, both values of a changed tool argument are shown, steps on one
//! side are reported, child runs are compared under their call.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;
use transcript_compare::{DiffOptions, LineOp, Side, diff};

fn pipeline(id: &str, build_out: &str, path_arg: &str) -> Run {
    let mut r = Run::new(id);
    r.command("build", build_out, 0);
    r.agent(
        "review",
        "read_file",
        json!({"path": path_arg, "limit": 10}),
        "router-1",
        "fine",
    );
    r.command("test", "ok\n", 0);
    r.complete(None);
    r
}

#[test]
fn the_same_run_under_other_ids_and_times_is_equal_unless_ids_are_strict() {
    let a = pipeline(A, "line 1\nline 2\n", "src/main.rs").record(&[]);
    let mut b_run = pipeline(B, "line 1\nline 2\n", "src/main.rs");
    // Other timestamps too: push one more event in front shifts every seq and time.
    b_run.events.iter_mut().for_each(|e| e.seq += 7);
    let b = b_run.record(&[]);
    let doc = diff(&a, &b, &DiffOptions::default());
    assert!(doc.equal, "{doc:#?}");
    assert!(doc.differing_steps().is_empty());
    assert_eq!(doc.summary.compared, 3);
    let strict = diff(&a, &b, &DiffOptions { strict_ids: true });
    assert!(!strict.equal);
    assert_eq!(strict.run.changes[0].field, "run_id");
    assert!(
        strict.differing_steps().is_empty(),
        "the call ids are the same"
    );
}

#[test]
fn a_changed_command_output_is_named_in_that_step_only_with_a_line_diff() {
    let a = pipeline(A, "line 1\nline 2\nline 3\n", "x").record(&[]);
    let b = pipeline(B, "line 1\nline two\nline 3\n", "x").record(&[]);
    let doc = diff(&a, &b, &DiffOptions::default());
    assert!(!doc.equal);
    let differing = doc.differing_steps();
    assert_eq!(differing.len(), 1, "{differing:#?}");
    let (name, step) = &differing[0];
    assert_eq!(name, "build");
    assert_eq!(step.changes.len(), 1, "{:#?}", step.changes);
    let change = &step.changes[0];
    assert_eq!(change.field, "output");
    assert_eq!(change.a, json!("line 1\nline 2\nline 3\n"));
    let ops: Vec<(LineOp, &str)> = change.hunks[0]
        .lines
        .iter()
        .map(|l| (l.op, l.text.as_str()))
        .collect();
    assert_eq!(
        ops,
        [
            (LineOp::Equal, "line 1"),
            (LineOp::Delete, "line 2"),
            (LineOp::Insert, "line two"),
            (LineOp::Equal, "line 3")
        ]
    );
    assert_eq!(doc.summary.changed, 1);
}

#[test]
fn a_changed_tool_argument_shows_both_values_in_the_turn_and_the_router_call() {
    let a = pipeline(A, "x", "src/main.rs").record(&[]);
    let b = pipeline(B, "x", "src/lib.rs").record(&[]);
    let doc = diff(&a, &b, &DiffOptions::default());
    let differing = doc.differing_steps();
    assert_eq!(differing.len(), 1);
    assert_eq!(differing[0].0, "review");
    let fields: Vec<&str> = differing[0]
        .1
        .changes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert_eq!(
        fields,
        ["turns[1].blocks[1].tool_use.input", "tool_calls[0].input"]
    );
    for c in &differing[0].1.changes {
        assert_eq!(c.a, json!({"path": "src/main.rs", "limit": 10}));
        assert_eq!(c.b, json!({"path": "src/lib.rs", "limit": 10}));
    }
}

#[test]
fn steps_on_one_side_and_changed_status_are_reported() {
    let mut a_run = Run::new(A);
    a_run.command("build", "ok", 0);
    a_run.command("lint", "ok", 0);
    a_run.complete(None);
    let mut b_run = Run::new(B);
    b_run.command("build", "boom", 2);
    b_run.command("deploy", "ok", 0);
    b_run.complete(Some("build failed"));
    let doc = diff(
        &a_run.record(&[]),
        &b_run.record(&[]),
        &DiffOptions::default(),
    );
    let sides: Vec<(&str, Side)> = doc
        .run
        .steps
        .iter()
        .map(|s| (s.path.as_str(), s.side))
        .collect();
    assert_eq!(
        sides,
        [
            ("build", Side::Both),
            ("deploy", Side::OnlyB),
            ("lint", Side::OnlyA)
        ]
    );
    let build = &doc.run.steps[0];
    let fields: Vec<&str> = build.changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["status", "exit_code", "error", "output"]);
    assert_eq!(build.changes[1].b, json!(2));
    let run_fields: Vec<&str> = doc.run.changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(run_fields, ["status", "error"]);
    assert_eq!((doc.summary.only_in_a, doc.summary.only_in_b), (1, 1));
}

#[test]
fn parallel_branches_started_in_another_order_still_meet() {
    let branch = |r: &mut Run, p: &str| {
        r.start(p, 0, "command");
        r.end(
            p,
            0,
            "command",
            json!({"command": "x", "stdout": p, "exit_code": 0}),
            None,
        );
    };
    let mut a = Run::new(A);
    a.start("par", 0, "parallel");
    branch(&mut a, "par.x");
    branch(&mut a, "par.y");
    a.end("par", 0, "parallel", json!({"branches": {}}), None);
    let mut b = Run::new(B);
    b.start("par", 0, "parallel");
    branch(&mut b, "par.y");
    branch(&mut b, "par.x");
    b.end("par", 0, "parallel", json!({"branches": {}}), None);
    let doc = diff(&a.record(&[]), &b.record(&[]), &DiffOptions::default());
    assert!(doc.equal, "{doc:#?}");
    assert_eq!(doc.summary.compared, 3);
}

#[test]
fn child_runs_are_compared_under_their_call_and_named_with_it() {
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
    ca.command("inner", "one", 0);
    ca.complete(None);
    let mut cb = Run::child_of(CB, B);
    cb.command("inner", "two", 0);
    cb.complete(None);
    let a = parent(A, CA).record(&[&ca]);
    let b = parent(B, CB).record(&[&cb]);
    let doc = diff(&a, &b, &DiffOptions::default());
    let differing = doc.differing_steps();
    assert_eq!(differing.len(), 1, "{differing:#?}");
    assert_eq!(differing[0].0, "sub/inner");
    assert_eq!(differing[0].1.changes[0].b, json!("two"));
    // The call itself is equal, its child run is not.
    assert!(doc.run.steps[0].changes.is_empty());
    assert!(!doc.run.steps[0].equal);
}

#[test]
fn tokens_and_cost_differences_are_changes() {
    let a = pipeline(A, "x", "p").record(&[]);
    // The bill is the one of `StepNode::bill`: $1 per input token of model `m`.
    assert_eq!(a.steps[1].spend.cost_usd, Some(220.0));
    assert_eq!(a.spend.usage.input_tokens, Some(220));
    let mut b_run = pipeline(B, "x", "p");
    // The final turn of B read 30 more input tokens.
    let last = b_run
        .events
        .iter_mut()
        .rev()
        .find_map(|e| match &mut e.payload {
            transcript_domain::DecodedPayload::Message(m) if m.role == "assistant" => Some(m),
            _ => None,
        })
        .unwrap();
    last.usage.as_mut().unwrap().input_tokens = Some(150);
    let doc = diff(&a, &b_run.record(&[]), &DiffOptions::default());
    let differing = doc.differing_steps();
    assert_eq!(differing.len(), 1);
    let changes: Vec<(&str, serde_json::Value, serde_json::Value)> = differing[0]
        .1
        .changes
        .iter()
        .map(|c| (c.field.as_str(), c.a.clone(), c.b.clone()))
        .collect();
    assert_eq!(
        changes,
        [
            ("usage.input_tokens", json!(220), json!(250)),
            ("cost_usd", json!(220.0), json!(250.0))
        ]
    );
    let run_fields: Vec<&str> = doc.run.changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(run_fields, ["usage.input_tokens", "cost_usd"]);
}
