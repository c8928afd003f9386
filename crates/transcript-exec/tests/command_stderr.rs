//! A command step's standard error is recorded (#59 item 8, wire decision 21): beside
//! `stdout` in its `step.completed` result, bounded and cut with the same marker, absent
//! when the command wrote none.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventType, MAX_LINE_BYTES, ManualClock};
use transcript_exec::{ExecutionService, Workflow, WorkflowSet};
use transcript_infra::JsonlRecorderFactory;

use support::*;

/// Runs `command` as the one step of a workflow; the step's completed result and error.
async fn run_one(command: &str) -> (Value, Option<String>, Vec<u8>) {
    let (_d, ws) = workspace();
    let storage = tempfile::tempdir().unwrap();
    let factory = JsonlRecorderFactory::new(storage.path())
        .with_clock(Arc::new(ManualClock::stepping(ts0(), 1)));
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(Arc::new(factory))
        .build()
        .unwrap();
    let yaml = format!(
        "name: w\nsteps:\n  - name: c\n    type: command\n    command: {}\n",
        serde_json::to_string(command).unwrap()
    );
    let set = WorkflowSet::new("w.yaml", Workflow::from_yaml(&yaml, "w.yaml").unwrap());
    let out = svc
        .run(&set, Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert!(
        out.transcript_errors.is_empty(),
        "{:?}",
        out.transcript_errors
    );
    let bytes = std::fs::read(storage.path().join(format!("{}.jsonl", out.run_id))).unwrap();
    let events = decode_all(&bytes);
    assert_well_formed(&events);
    let done = events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::StepCompleted))
        .unwrap();
    let step = done.step().unwrap();
    let result = step.result.as_ref().unwrap().to_value();
    (result, step.error.clone(), bytes)
}

#[tokio::test]
async fn stdout_stderr_and_the_exit_code_are_all_recorded() {
    let (result, error, _) = run_one("echo out; echo err >&2; exit 3").await;
    assert_eq!(result["stdout"], "out\n", "{result}");
    assert_eq!(result["stderr"], "err\n", "{result}");
    assert_eq!(result["exit_code"], 3, "{result}");
    assert_eq!(error.as_deref(), Some("command exited with code 3: err"));
}

#[tokio::test]
async fn a_command_that_writes_no_stderr_records_none() {
    let (result, error, _) = run_one("echo only-out").await;
    assert_eq!(result["stdout"], "only-out\n");
    assert!(result.get("stderr").is_none(), "{result}");
    assert_eq!(error, None);
}

#[tokio::test]
async fn a_huge_stderr_is_cut_with_the_marker_like_stdout() {
    const FIVE_MB: usize = 5_000_000;
    // Both streams past the cap at once: each is cut, the line still fits.
    let (result, _, bytes) = run_one(&format!(
        "head -c {FIVE_MB} /dev/zero | tr '\\0' e >&2; head -c {FIVE_MB} /dev/zero | tr '\\0' o"
    ))
    .await;
    for line in bytes.split(|b| *b == b'\n') {
        assert!(line.len() <= MAX_LINE_BYTES, "line of {} bytes", line.len());
    }
    for (key, c) in [("stderr", b'e'), ("stdout", b'o')] {
        let text = result[key].as_str().unwrap();
        let sha: String = Sha256::digest(vec![c; FIVE_MB])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let marker = format!("…[truncated: {FIVE_MB} bytes, sha256 {sha}]");
        assert!(
            text.ends_with(&marker),
            "{key}: {}",
            &text[text.len() - 120..]
        );
        // stdout keeps the cap, stderr half of it: together they fit one result.
        let cap = if key == "stdout" { 1 << 20 } else { 1 << 19 };
        assert_eq!(text.len(), cap, "{key}");
        let kept = &text[..text.len() - marker.len()];
        assert!(kept.bytes().all(|b| b == c) && !kept.is_empty(), "{key}");
    }
    assert_eq!(result["exit_code"], 0);
}
