//! Expectations on hand-written runs: every rule holds on a run that does it and fails, naming
//! the step and what the run did, on one that does not; a bad file is refused naming the key
//! and its line; an unknown cost never passes a bound; the JUnit XML parses with one failure
//! per failed expectation.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::json;
use transcript_compare::{Expectations, Outcome, check, junit_xml};

/// build (command), review (agent: grep then edit, then answers "all done"), test (failed).
fn sample() -> Run {
    let mut r = Run::new(A);
    r.command("build", "compiled 3 crates\n", 0);
    r.start("review", 0, "agent");
    r.push("message.assistant", "review", 0, json!({"role": "assistant", "model": "m",
        "usage": {"input_tokens": 10, "output_tokens": 1},
        "blocks": [{"type": "tool_use", "fidelity": "agent_emitted", "tool_name": "grep",
            "tool_id": "t1", "tool_input": {"pattern": "TODO", "path": "src", "opts": {"i": true, "n": [1, 2]}}}]}), None);
    r.push(
        "tool.call",
        "review",
        0,
        json!({"name": "grep", "call_id": "t1",
        "input": {"pattern": "TODO", "path": "src", "opts": {"i": true, "n": [1, 2]}},
        "output": null, "fidelity": "agent_emitted"}),
        None,
    );
    r.push(
        "tool.result",
        "review",
        0,
        json!({"name": "grep", "call_id": "t1",
        "input": null, "output": "3 hits", "fidelity": "agent_emitted"}),
        None,
    );
    r.push(
        "message.assistant",
        "review",
        0,
        json!({"role": "assistant", "model": "m",
        "usage": {"input_tokens": 20, "output_tokens": 2},
        "blocks": [{"type": "tool_use", "fidelity": "agent_emitted", "tool_name": "edit",
            "tool_id": "t2", "tool_input": {"file": "src/lib.rs"}}]}),
        None,
    );
    r.push(
        "tool.call",
        "review",
        0,
        json!({"name": "edit", "call_id": "t2",
        "input": {"file": "src/lib.rs"}, "output": null, "fidelity": "agent_emitted"}),
        None,
    );
    r.push(
        "tool.result",
        "review",
        0,
        json!({"name": "edit", "call_id": "t2",
        "input": null, "output": null, "error": "permission denied", "fidelity": "agent_emitted"}),
        None,
    );
    r.push(
        "message.assistant",
        "review",
        0,
        json!({"role": "assistant", "model": "m",
        "usage": {"input_tokens": 30, "output_tokens": 3},
        "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": "all done"}]}),
        None,
    );
    r.end("review", 0, "agent", json!("all done"), None);
    r.command("test", "1 failed\n", 1);
    r.complete(Some("step test failed"));
    r
}

fn run_check(yaml: &str) -> Vec<Outcome> {
    let e = Expectations::parse(yaml, "expect.yaml").unwrap();
    check(&sample().record(&[]), &e)
}

#[test]
fn expectations_the_run_meets_hold() {
    let outcomes = run_check(
        "run:\n  status: failed\n  max_cost_usd: 60\n  max_tokens: 66\n  max_duration_ms: 60000\n\
         steps:\n  build:\n    status: succeeded\n    output: {contains: \"3 crates\", matches: \"^compiled \\\\d\", equals: \"compiled 3 crates\"}\n\
         \x20 review:\n    tools_used: [grep, edit]\n    tools_not_used: [bash]\n    tool_sequence: [grep, edit]\n\
         \x20   tool_args:\n      grep:\n        pattern: {equals: TODO}\n        path: {matches: \"^sr\"}\n        opts: {subset: {n: [2]}}\n\
         \x20   tool_failed: true\n    max_turns: 3\n    max_cost_usd: 60\n  test:\n    status: failed\n",
    );
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| !o.passed).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(outcomes.len(), 16);
    // The run's spend is the domain's bill: 60 input + 6 output tokens, $1 per input token.
    assert_eq!(outcomes[1].detail, "the run cost $60.0000");
    assert_eq!(outcomes[2].detail, "the run used 66 tokens");
}

#[test]
fn each_failing_expectation_names_its_step_and_what_the_run_did() {
    let outcomes = run_check(
        "run:\n  status: succeeded\n  max_tokens: 10\n\
         steps:\n  review:\n    tools_used: [bash]\n    tools_not_used: [edit]\n    tool_sequence: [edit, grep]\n\
         \x20   tool_args:\n      grep:\n        pattern: {equals: FIXME}\n    tool_failed: false\n    max_turns: 2\n    max_cost_usd: 1\n\
         \x20 test:\n    status: succeeded\n    output: {contains: passed}\n  missing:\n    status: succeeded\n",
    );
    let failed: Vec<(&str, &str, u64, &str)> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| {
            (
                o.scope.as_str(),
                o.expectation.as_str(),
                o.line,
                o.detail.as_str(),
            )
        })
        .collect();
    assert_eq!(
        failed,
        [
            (
                "run",
                "status: succeeded",
                2,
                "the run failed (\"step test failed\")"
            ),
            ("run", "max_tokens: 10", 3, "the run used 66 tokens"),
            (
                "review",
                "tools_used: [bash]",
                6,
                "never called bash; called [grep, edit]"
            ),
            ("review", "tools_not_used: [edit]", 7, "called edit (1×)"),
            (
                "review",
                "tool_sequence: [edit, grep]",
                8,
                "no grep after the earlier tools of the sequence; called [grep, edit]"
            ),
            (
                "review",
                "tool_args: grep(pattern equals \"FIXME\")",
                11,
                "no call of grep matches; its 1 call(s) had \"{\\\"opts\\\":{\\\"i\\\":true,\\\"n\\\":[1,2]},\\\"path\\\":\\\"src\\\",\\\"pattern\\\":\\\"TODO\\\"}\""
            ),
            ("review", "tool_failed: false", 12, "failed: edit"),
            ("review", "max_turns: 2", 13, "#0 took 3 turns"),
            ("review", "max_cost_usd: 1", 14, "the step cost $60.0000"),
            (
                "test",
                "status: succeeded",
                16,
                "#0 failed: \"command exited with code 1\""
            ),
            (
                "test",
                "output contains \"passed\"",
                17,
                "#0 output \"1 failed\\n\""
            ),
            (
                "missing",
                "status: succeeded",
                19,
                "the run has no step \"missing\""
            ),
        ]
    );
}

#[test]
fn an_unknown_cost_never_passes_a_bound() {
    let mut r = Run::new(A);
    r.start("a", 0, "agent");
    r.push(
        "message.assistant",
        "a",
        0,
        json!({"role": "assistant", "model": "unpriced",
        "usage": {"input_tokens": 1}, "blocks": []}),
        None,
    );
    r.end("a", 0, "agent", json!("x"), None);
    r.complete(None);
    let e = Expectations::parse(
        "run: {max_cost_usd: 1000}\nsteps: {a: {max_cost_usd: 1000}}\n",
        "e.yaml",
    )
    .unwrap();
    let outcomes = check(&r.record(&[]), &e);
    assert!(outcomes.iter().all(|o| !o.passed), "{outcomes:#?}");
    assert!(outcomes[0].detail.contains("unknown"), "{outcomes:#?}");
}

#[test]
fn bad_files_are_refused_naming_the_key_and_its_line() {
    let cases = [
        (
            "steps:\n  build:\n    status: succeeded\n    tols_used: [x]\n",
            4,
            "unknown field `tols_used`",
        ),
        ("run:\n  stauts: failed\n", 2, "unknown field `stauts`"),
        (
            "run:\n  status: sucseeded\n",
            2,
            "unknown variant `sucseeded`",
        ),
        (
            "steps:\n  a:\n    tool_args:\n      Bash:\n        command: {equalz: 1}\n",
            5,
            "unknown field `equalz`",
        ),
        (
            "steps:\n  a:\n    tool_args:\n      Bash:\n        command: {equals: 1, matches: x}\n",
            5,
            "steps.a.tool_args.Bash.command: needs exactly one of",
        ),
        (
            "steps:\n  a:\n    output: {matches: \"(\"}\n",
            3,
            "steps.a.output.matches: invalid regex",
        ),
        ("steps:\n  a:\n    output: {}\n", 3, "steps.a.output: needs"),
        ("steps:\n  a: {}\n", 2, "steps.a: no expectation"),
        ("run:\n  max_tokens: -1\n", 2, ""),
        ("", 1, "no expectation"),
        // The top-level `judge:` configures the model; a rubric goes on the run or a step.
        ("judge: {rubric: x}\n", 1, "unknown field `rubric`"),
        (
            "run:\n  judge: {rubric: x, weight: 2}\n",
            2,
            "unknown field `weight`",
        ),
        (
            "steps:\n  a:\n    judge: {rubrik: x}\n",
            3,
            "unknown field `rubrik`",
        ),
        // A key is never in the file, only the name of its variable.
        (
            "judge:\n  model: m\n  api_key: sk-secret\nrun: {status: succeeded}\n",
            3,
            "unknown field `api_key`",
        ),
        (
            "judge:\n  max_chunks: 0\nrun: {status: succeeded}\n",
            2,
            "judge.max_chunks: must be at least 1",
        ),
    ];
    for (yaml, line, message) in cases {
        let e = Expectations::parse(yaml, "ci/expect.yaml").unwrap_err();
        assert_eq!(e.line, line, "{yaml:?}: {e}");
        assert!(e.message.contains(message), "{yaml:?}: {e}");
        assert!(
            e.to_string()
                .starts_with(&format!("ci/expect.yaml: line {line}: ")),
            "{e}"
        );
    }
}

#[test]
fn junit_xml_parses_with_one_failure_per_failed_expectation() {
    // A hostile step path and output: markup and a control character.
    let mut r = Run::new(A);
    r.command("x<y>&\"z\"", "<b>\u{1b}[31m</b>\n", 1);
    r.complete(None);
    let e = Expectations::parse(
        "run: {status: succeeded}\nsteps:\n  'x<y>&\"z\"':\n    status: succeeded\n    output: {contains: ok}\n  build: {status: succeeded}\n",
        "e&.yaml",
    )
    .unwrap();
    let outcomes = check(&r.record(&[]), &e);
    assert_eq!(outcomes.iter().filter(|o| !o.passed).count(), 3);
    let xml = junit_xml("run <1>", "e&.yaml", &outcomes);
    let mut reader = Reader::from_str(&xml);
    let (mut cases, mut failures) = (0, Vec::new());
    let mut classnames = Vec::new();
    let attr = |t: &quick_xml::events::BytesStart<'_>, name: &[u8]| {
        t.attributes()
            .map(|a| a.unwrap())
            .find(|a| a.key.as_ref() == name)
            .map(|a| a.unescape_value().unwrap().into_owned())
            .unwrap()
    };
    loop {
        match reader.read_event().unwrap() {
            Event::Start(t) | Event::Empty(t) if t.name().as_ref() == b"testcase" => {
                cases += 1;
                classnames.push(attr(&t, b"classname"));
            }
            Event::Start(t) if t.name().as_ref() == b"failure" => {
                failures.push(attr(&t, b"message"));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(cases, 4);
    assert_eq!(classnames, ["run", "x<y>&\"z\"", "x<y>&\"z\"", "build"]);
    assert_eq!(failures.len(), 3, "{xml}");
    assert_eq!(failures[1], "#0 output \"<b>\\u{1b}[31m</b>\\n\"");
    // A detail that carries a character XML cannot hold at all still makes a document.
    let raw = Outcome {
        scope: "s\u{1}".to_owned(),
        expectation: "x".to_owned(),
        line: 1,
        passed: false,
        errored: false,
        detail: "a\u{1b}b\u{ffff}".to_owned(),
    };
    let xml = junit_xml("r", "e", &[raw]);
    assert!(!xml.contains('\u{1b}') && !xml.contains('\u{1}'));
    let mut reader = Reader::from_str(&xml);
    let mut seen = Vec::new();
    loop {
        match reader.read_event().unwrap() {
            Event::Start(t) if t.name().as_ref() == b"failure" => seen.push(attr(&t, b"message")),
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(seen, ["a\\u{1b}b\\u{ffff}"]);
}

#[test]
fn the_readme_and_crate_doc_examples_parse() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = &readme[readme.find("### Compare and check runs in CI").unwrap()..];
    let start = section.find("```yaml\n").unwrap() + "```yaml\n".len();
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let e = Expectations::parse(yaml, "README.md").unwrap();
    assert_eq!(e.items.len(), 14);
    let doc =
        std::fs::read_to_string(root.join("crates/transcript-compare/src/expect/mod.rs")).unwrap();
    let yaml: String = doc
        .lines()
        .skip_while(|l| *l != "//! ```yaml")
        .skip(1)
        .take_while(|l| *l != "//! ```")
        .map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or("")))
        .collect();
    assert_eq!(
        Expectations::parse(&yaml, "mod.rs").unwrap().items.len(),
        14
    );
}
