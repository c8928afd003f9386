//! Oversized values (#17 item 2) and a transcript linear in what was
//! produced (#20): a command printing 50 MB gives a file every line of
//! which the reader accepts, with a stub naming the original's size and
//! sha256; parents refer to their children instead of repeating them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use serde_json::{Map, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventType, MAX_LINE_BYTES, ManualClock};
use transcript_exec::{ExecutionService, Workflow, WorkflowSet};
use transcript_infra::JsonlRecorderFactory;

use support::*;

const FIFTY_MB: usize = 50_000_000;

fn set_of(yaml: &str) -> WorkflowSet {
    WorkflowSet::new("w.yaml", Workflow::from_yaml(yaml, "w.yaml").unwrap())
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_command_printing_50_mb_gives_a_valid_file_with_a_stub() {
    let (_d, ws) = workspace();
    let storage = tempfile::tempdir().unwrap();
    let factory = JsonlRecorderFactory::new(storage.path())
        .with_clock(Arc::new(ManualClock::stepping(ts0(), 1)));
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(Arc::new(factory))
        .build()
        .unwrap();
    let set = set_of(&format!(
        "name: w\nsteps:\n  - name: big\n    type: command\n    command: \"head -c {FIFTY_MB} /dev/zero | tr '\\\\0' a\"\n"
    ));
    let out = svc
        .run(&set, Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    assert!(
        out.transcript_errors.is_empty(),
        "{:?}",
        out.transcript_errors
    );

    let bytes = std::fs::read(storage.path().join(format!("{}.jsonl", out.run_id))).unwrap();
    for line in bytes.split(|b| *b == b'\n') {
        assert!(line.len() <= MAX_LINE_BYTES, "line of {} bytes", line.len());
    }
    let events = decode_all(&bytes);
    assert_well_formed(&events);
    // The file stays small: the default cap is 1 MiB per value.
    assert!(bytes.len() < 2 * 1024 * 1024, "{} bytes", bytes.len());

    let done = events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::StepCompleted))
        .unwrap();
    let result = done.step().unwrap().result.as_ref().unwrap().to_value();
    let stdout = result["stdout"].as_str().unwrap();
    let expected = sha256_hex(&vec![b'a'; FIFTY_MB]);
    let marker = format!("…[truncated: {FIFTY_MB} bytes, sha256 {expected}]");
    assert!(
        stdout.ends_with(&marker),
        "{}",
        &stdout[stdout.len() - 200..]
    );
    assert!(stdout.starts_with("aaaa"));
    assert!(stdout.len() <= 1 << 20);
    assert_eq!(result["exit_code"], 0);
}

#[tokio::test]
async fn max_value_bytes_bounds_tool_values_and_messages() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .max_value_bytes(1000)
        .build()
        .unwrap();
    let big = "q".repeat(5000);
    let set = set_of(&format!(
        "name: w\nsteps:\n  - name: w\n    type: operation\n    tool: write_file\n    input: {{ path: f.txt, content: \"{big}\" }}\n  - name: r\n    type: operation\n    tool: read_file\n    input: {{ path: f.txt }}\n"
    ));
    let out = svc
        .run(&set, Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    // The file got the whole content: only the record is bounded.
    assert_eq!(std::fs::read_to_string(ws.join("f.txt")).unwrap(), big);
    let events = factory.events(out.run_id);
    let expected = format!(
        "…[truncated: 5000 bytes, sha256 {}]",
        sha256_hex(big.as_bytes())
    );
    let call = events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::ToolCall))
        .unwrap();
    let input = call.tool().unwrap().input.to_value();
    assert!(input["content"].as_str().unwrap().ends_with(&expected));
    let read = events
        .iter()
        .filter(|e| e.kind.known() == Some(EventType::ToolResult))
        .nth(1)
        .unwrap();
    // read_file reads at most its cap (#28): the first bytes and what it left.
    let output = read.tool().unwrap().output.to_value();
    let kept = 1000 - transcript_exec::builtins::READ_FILE_NOTE_RESERVE;
    assert_eq!(
        output.as_str().unwrap(),
        format!(
            "{}…[truncated: 5000 bytes; read_file reads the first {kept}]",
            "q".repeat(kept)
        )
    );
    assert!(output.as_str().unwrap().len() <= 1000);
}

/// 2 × 2 × 2 commands of 1 MB each, nested for_each / parallel / for_each.
#[tokio::test]
async fn nested_parents_refer_to_their_children_and_the_file_stays_linear() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let one_mb = "head -c 1000000 /dev/zero | tr '\\\\0' z";
    let yaml = format!(
        r#"name: nested
steps:
  - name: outer
    type: for_each
    items: [a, b]
    steps:
      - name: fan
        type: parallel
        branches:
          - name: x
            type: for_each
            items: [1, 2]
            steps:
              - name: cmd
                type: command
                command: "{one_mb}"
          - name: y
            type: for_each
            items: [1, 2]
            steps:
              - name: cmd
                type: command
                command: "{one_mb}"
"#
    );
    let out = svc
        .run(&set_of(&yaml), Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);

    let produced = 8 * 1_000_000usize;
    let text = factory.text(out.run_id);
    assert!(
        (text.len() as f64) < 1.2 * produced as f64,
        "transcript {} bytes for {produced} produced",
        text.len()
    );
    let events = decode_all(text.as_bytes());
    assert_well_formed(&events);
    let result_of = |path: &str, iteration: u64| {
        events
            .iter()
            .find(|e| {
                e.kind.known() == Some(EventType::StepCompleted)
                    && e.path == path
                    && e.iteration == iteration
            })
            .and_then(|e| e.step().unwrap().result.as_ref())
            .map(|r| r.to_value())
            .unwrap()
    };
    assert_eq!(result_of("outer", 0), json!({"iterations": 2}));
    assert_eq!(
        result_of("outer.fan", 1),
        json!({"branches": {"x": "succeeded", "y": "succeeded"}})
    );
    assert_eq!(result_of("outer.fan.x", 1), json!({"iterations": 2}));
}

#[tokio::test]
async fn templates_still_read_parallel_and_loop_outputs() {
    let (_d, ws) = workspace();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .build()
        .unwrap();
    let yaml = r#"name: t
outputs:
  fan: "{{steps.fan.output}}"
  each: "{{steps.each.output}}"
  x: "{{steps.x.output}}"
steps:
  - name: fan
    type: parallel
    branches:
      - name: x
        type: command
        command: "echo one"
      - name: y
        type: command
        command: "echo two"
  - name: each
    type: for_each
    items: [a, b]
    steps:
      - name: e
        type: command
        command: ["echo", "{{loop.item}}"]
"#;
    let out = svc
        .run(&set_of(yaml), Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    assert_eq!(out.outputs["fan"], json!({"x": "one", "y": "two"}));
    assert_eq!(out.outputs["each"], json!(["a", "b"]));
    assert_eq!(out.outputs["x"], json!("one"));
}
