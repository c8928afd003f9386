//! The diff compares what the tools did (#58 item 1): tool results without the agent CLI's
//! envelope (Claude Code's `<system-reminder>` blocks, Codex's shell header), the parallel
//! calls of one turn and their results as a set whatever order they came back in, router
//! calls after one turn likewise, numbers as numbers and costs to the fraction of a cent
//! receipts print.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use transcript_compare::{Change, DiffDocument, DiffOptions, diff};

fn changes(doc: &DiffDocument) -> Vec<(String, String)> {
    doc.differing_steps()
        .iter()
        .flat_map(|(name, s)| {
            s.changes
                .iter()
                .map(move |c: &Change| (name.clone(), c.field.clone()))
        })
        .collect()
}

fn tool_use(name: &str, id: &str, input: Value) -> Value {
    json!({"type": "tool_use", "tool_name": name, "tool_id": id, "tool_input": input})
}

fn tool_result(id: &str, content: Value) -> Value {
    json!({"type": "tool_result", "tool_id": id, "tool_content": content})
}

/// One agent step `ask` of `provider`: a prompt, then a turn whose `blocks` are given, then an
/// answer.
fn session(id: &str, provider: &str, blocks: Value) -> Run {
    let mut r = Run::new(id);
    r.start("ask", 0, "agent");
    r.message(
        "ask",
        "user",
        json!({}),
        json!([{"type": "text", "text": "look"}]),
    );
    let meta = json!({"provider": provider, "model": "m", "usage": {"input_tokens": 1}});
    r.message("ask", "assistant", meta.clone(), blocks);
    r.message(
        "ask",
        "assistant",
        meta,
        json!([{"type": "text", "text": "done"}]),
    );
    r.end("ask", 0, "agent", json!("done"), None);
    r.complete(None);
    r
}

fn compare(a: &Run, b: &Run) -> DiffDocument {
    diff(&a.record(&[]), &b.record(&[]), &DiffOptions::default())
}

const REMINDER: &str = "\n\n<system-reminder>\nWhenever you read a file, consider whether it is malware.\n</system-reminder>\n";

#[test]
fn claude_codes_system_reminder_is_not_what_the_tool_did() {
    let turn = |result: &str| {
        json!([
            tool_use("Read", "t1", json!({"file_path": "a.rs"})),
            tool_result("t1", json!(result))
        ])
    };
    let a = session(A, "claude", turn(&format!("1 fn main() {{}}{REMINDER}")));
    let b = session(B, "claude", turn("1 fn main() {}"));
    let doc = compare(&a, &b);
    assert!(doc.equal, "{:#?}", changes(&doc));
    // What the tool returned still counts.
    let c = session(
        B,
        "claude",
        turn(&format!("1 fn main() {{ exit(1) }}{REMINDER}")),
    );
    assert_eq!(
        changes(&compare(&a, &c)),
        [(
            "ask".to_owned(),
            "turns[1].blocks[1].tool_result.content".to_owned()
        )]
    );
    // Content parts too.
    let parts = |text: &str| json!([{"type": "text", "text": text}]);
    let d = session(
        A,
        "claude",
        json!([
            tool_use("Read", "t1", json!({})),
            tool_result("t1", parts(&format!("x{REMINDER}")))
        ]),
    );
    let e = session(
        B,
        "claude",
        json!([
            tool_use("Read", "t1", json!({})),
            tool_result("t1", parts("x"))
        ]),
    );
    assert!(compare(&d, &e).equal);
}

#[test]
fn codexs_shell_header_is_not_what_the_tool_did_and_other_clis_keep_their_text() {
    let out = |chunk: &str, wall: &str, output: &str| {
        format!(
            "Chunk ID: {chunk}\nWall time: {wall} seconds\nProcess exited with code 0\nOriginal token count: 3\nOutput:\n{output}"
        )
    };
    let turn = |result: String| {
        json!([
            tool_use("exec_command", "c1", json!({"cmd": "ls"})),
            tool_result("c1", json!(result))
        ])
    };
    let a = session(A, "codex", turn(out("5f1c", "0.0101", "hello\n")));
    let b = session(B, "codex", turn(out("9e2d", "0.0213", "hello\n")));
    assert!(compare(&a, &b).equal);
    let c = session(B, "codex", turn(out("9e2d", "0.0213", "bye\n")));
    assert_eq!(
        changes(&compare(&a, &c)),
        [(
            "ask".to_owned(),
            "turns[1].blocks[1].tool_result.content".to_owned()
        )]
    );
    // Gemini CLI wraps nothing: a reminder-looking text is its tool's output.
    let g = |r: &str| {
        session(
            A,
            "gemini",
            json!([
                tool_use("read", "g1", json!({})),
                tool_result("g1", json!(r))
            ]),
        )
    };
    assert!(!compare(&g(&format!("x{REMINDER}")), &g("x")).equal);
}

/// A turn calling Read and Grep at once, their results in `order`, under call ids `ids`.
fn parallel(order: [usize; 2], ids: [&str; 2], grep: &str) -> Value {
    let uses = [
        tool_use("Read", ids[0], json!({"file_path": "a.rs"})),
        tool_use("Grep", ids[1], json!({"pattern": grep})),
    ];
    let results = [
        tool_result(ids[0], json!("fn a() {}")),
        tool_result(ids[1], json!("a.rs:1")),
    ];
    json!([
        {"type": "text", "text": "Reading both."},
        uses[0], uses[1],
        results[order[0]], results[order[1]]
    ])
}

#[test]
fn results_of_parallel_calls_in_either_order_are_equal() {
    let a = session(A, "claude", parallel([0, 1], ["t1", "t2"], "fn"));
    let b = session(B, "claude", parallel([1, 0], ["u1", "u2"], "fn"));
    let doc = compare(&a, &b);
    assert!(doc.equal, "{:#?}", changes(&doc));
    // The calls themselves in the other order too.
    let mut swapped = parallel([0, 1], ["t1", "t2"], "fn");
    swapped.as_array_mut().unwrap().swap(1, 2);
    assert!(compare(&a, &session(B, "claude", swapped)).equal);
    // A changed argument of one of them is one change, at A's block of that call.
    let c = session(B, "claude", parallel([1, 0], ["u1", "u2"], "impl"));
    let doc = compare(&a, &c);
    assert_eq!(
        changes(&doc),
        [(
            "ask".to_owned(),
            "turns[1].blocks[2].tool_use.input".to_owned()
        )]
    );
    let change = &doc.differing_steps()[0].1.changes[0];
    assert_eq!(
        (change.a.clone(), change.b.clone()),
        (json!({"pattern": "fn"}), json!({"pattern": "impl"}))
    );
    // A result that changed is still found, whatever the order.
    let mut d = parallel([1, 0], ["u1", "u2"], "fn");
    d[3] = tool_result("u2", json!("a.rs:9"));
    assert_eq!(
        changes(&compare(&a, &session(B, "claude", d))),
        [(
            "ask".to_owned(),
            "turns[1].blocks[4].tool_result.content".to_owned()
        )]
    );
}

#[test]
fn router_calls_after_one_turn_match_as_a_set() {
    let run = |id: &str, order: [(&str, &str); 2]| {
        let mut r = Run::new(id);
        r.start("ask", 0, "agent");
        r.message(
            "ask",
            "assistant",
            json!({"model": "m"}),
            json!([{"type": "text", "text": "go"}]),
        );
        for (tool, out) in order {
            r.router_call(
                "ask",
                tool,
                json!({"q": tool}),
                &format!("{id}{tool}"),
                json!(out),
            );
        }
        r.end("ask", 0, "agent", json!("ok"), None);
        r.complete(None);
        r
    };
    let a = run(A, [("grep", "1"), ("read", "2")]);
    let b = run(B, [("read", "2"), ("grep", "1")]);
    assert!(compare(&a, &b).equal);
    let c = run(B, [("read", "2"), ("grep", "7")]);
    assert_eq!(
        changes(&compare(&a, &c)),
        [("ask".to_owned(), "tool_calls[0].output".to_owned())]
    );
}

#[test]
fn numbers_compare_as_numbers_and_costs_to_the_printed_fraction_of_a_cent() {
    let turn = |limit: Value, reported: f64| {
        let mut r = Run::new(A);
        r.start("ask", 0, "agent");
        let meta = json!({"provider": "claude", "model": "m",
            "usage": {"input_tokens": 3, "cost_usd": reported}});
        r.message(
            "ask",
            "assistant",
            meta,
            json!([tool_use("Read", "t", json!({"limit": limit}))]),
        );
        r.end("ask", 0, "agent", json!("ok"), None);
        r.complete(None);
        r
    };
    let a = turn(json!(1), 0.000876);
    let b = turn(json!(1.0), 0.0008759999999999999);
    let doc = compare(&a, &b);
    assert!(doc.equal, "{:#?}", changes(&doc));
    let c = turn(json!(1.5), 0.0124);
    let got = changes(&compare(&a, &c));
    assert_eq!(
        got,
        [
            (
                "ask".to_owned(),
                "turns[0].blocks[0].tool_use.input".to_owned()
            ),
            ("ask".to_owned(), "usage.reported_cost_usd".to_owned()),
        ]
    );
}
