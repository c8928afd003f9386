//! Imported sessions in the diff (#58 item 5): turns align by content (a longest common
//! subsequence), so one inserted turn is one added turn; two unrelated sessions are one
//! summary line, not a change per turn; two imports of one session log differ in nothing
//! that is content (run ids, times, the log file's name, a store import's open run).
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use transcript_compare::{
    Change, DiffOptions, UNRELATED_MIN_TURNS, UNRELATED_SHARE, diff, render_diff_text,
};

/// An imported session as `transcript import` writes it: workflow `import <file>`, one agent
/// step `agent`, the turns `texts` (alternating user and assistant), completed or left open.
fn import(id: &str, file: &str, texts: &[String], completed: bool) -> Run {
    let mut r = Run::new(id);
    r.events.clear();
    r.push(
        "run.started",
        "",
        0,
        json!({"name": format!("import {file}"), "kind": "workflow"}),
        None,
    );
    r.push(
        "step.started",
        "agent",
        0,
        json!({"name": "claude", "kind": "agent"}),
        None,
    );
    for (i, t) in texts.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let meta = if role == "assistant" {
            json!({"provider": "claude", "model": "m"})
        } else {
            json!({})
        };
        r.message("agent", role, meta, json!([{"type": "text", "text": t}]));
    }
    if completed {
        let result = json!({"clock": "provider", "diagnostics": {}, "provider": "claude",
            "source": format!("/logs/{file}")});
        r.end("agent", 0, "claude", result, None);
        r.push(
            "run.completed",
            "",
            0,
            json!({"name": format!("import {file}"), "kind": "workflow", "result": {"clock": "provider"}}),
            None,
        );
    }
    r
}

fn texts(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix} {i}")).collect()
}

fn agent_changes(doc: &transcript_compare::DiffDocument) -> Vec<Change> {
    doc.run.steps[0].changes.clone()
}

#[test]
fn two_imports_of_one_log_are_equal_whatever_the_file_name_or_an_open_run() {
    let log = texts("turn", 12);
    let a = import(A, "session.jsonl", &log, true).record(&[]);
    let b = import(B, "5f0e0a4c.jsonl", &log, false).record(&[]);
    assert!(a.is_import() && b.is_import());
    let doc = diff(&a, &b, &DiffOptions::default());
    assert!(doc.equal, "{doc:#?}");
    // A workflow of ours with another name still differs by name.
    let mut w = Run::new(A);
    w.command("build", "x", 0);
    w.complete(None);
    let mut v = Run::new(B);
    v.events = w.events.clone();
    if let transcript_domain::DecodedPayload::Step(p) = &mut v.events[0].payload {
        p.name = "other".to_owned();
    }
    let doc = diff(&w.record(&[]), &v.record(&[]), &DiffOptions::default());
    assert_eq!(doc.run.changes[0].field, "workflow");
}

#[test]
fn one_inserted_turn_is_one_added_turn() {
    let log = texts("turn", 20);
    let mut grown = log.clone();
    grown.insert(7, "an aside".to_owned());
    grown.insert(8, "noted".to_owned());
    let a = import(A, "s.jsonl", &log, true).record(&[]);
    let b = import(B, "s.jsonl", &grown, true).record(&[]);
    let changes = agent_changes(&diff(&a, &b, &DiffOptions::default()));
    let fields: Vec<(&str, &Value, &Value)> = changes
        .iter()
        .map(|c| (c.field.as_str(), &c.a, &c.b))
        .collect();
    assert_eq!(fields.len(), 3, "{fields:#?}");
    assert_eq!(fields[0], ("turns", &json!(20), &json!(22)));
    assert_eq!(fields[1].0, "turns[7]");
    assert_eq!(fields[2].0, "turns[8]");
    assert!(fields[1].1.is_null() && fields[1].2["blocks"][0]["text"] == "an aside");
    // A changed turn among equal ones is that turn's change, at both indices when they differ.
    let mut edited = grown.clone();
    edited[15] = "turn 13, edited".to_owned();
    let b2 = import(B, "s.jsonl", &edited, true).record(&[]);
    let fields: Vec<String> = agent_changes(&diff(&a, &b2, &DiffOptions::default()))
        .iter()
        .map(|c| c.field.clone())
        .collect();
    assert_eq!(
        fields,
        [
            "turns",
            "turns[7]",
            "turns[8]",
            "turns[13→15].blocks[0].text"
        ]
    );
}

#[test]
fn unrelated_sessions_are_one_summary_not_a_change_per_turn() {
    let a = import(A, "a.jsonl", &texts("apples", 40), true).record(&[]);
    let b = import(B, "b.jsonl", &texts("pears", 35), true).record(&[]);
    let doc = diff(&a, &b, &DiffOptions::default());
    let changes = agent_changes(&doc);
    assert_eq!(changes.len(), 1, "{changes:#?}");
    assert_eq!(changes[0].field, "turns");
    assert_eq!((&changes[0].a, &changes[0].b), (&json!(40), &json!(35)));
    assert_eq!(
        changes[0].note.as_deref(),
        Some(
            "sessions share 0 of 40 turns: 40 only in A, 35 only in B (not compared turn by turn)"
        )
    );
    let text = render_diff_text(&doc, ("a", "b"), &Plain);
    assert!(text.lines().count() < 12, "{text}");
    assert!(text.contains("sessions share 0 of 40 turns"), "{text}");
    // The threshold: a quarter of the longer side in common is related, below it is not;
    // short sessions are always compared turn by turn.
    let n = 4 * UNRELATED_MIN_TURNS;
    let shared = n / UNRELATED_SHARE;
    let mut half: Vec<String> = texts("apples", shared);
    half.extend(texts("pears", n - shared));
    let c = import(B, "c.jsonl", &half, true).record(&[]);
    let a = import(A, "a.jsonl", &texts("apples", n), true).record(&[]);
    let changes = agent_changes(&diff(&a, &c, &DiffOptions::default()));
    assert!(changes.len() > 1 && changes.iter().all(|c| c.note.is_none()));
    half.remove(0);
    let c = import(B, "c.jsonl", &half, true).record(&[]);
    assert!(
        agent_changes(&diff(&a, &c, &DiffOptions::default()))[0]
            .note
            .is_some()
    );
    let short = UNRELATED_MIN_TURNS - 1;
    let a = import(A, "a.jsonl", &texts("apples", short), true).record(&[]);
    let b = import(B, "b.jsonl", &texts("pears", short), true).record(&[]);
    let changes = agent_changes(&diff(&a, &b, &DiffOptions::default()));
    assert_eq!(changes.len(), short);
}
