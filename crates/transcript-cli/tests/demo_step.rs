//! The binary's own `stamp` step (`src/demo.rs`), run through the built `transcript` binary: its
//! result, its refusal of a missing label, and the demo run it takes part in, which must equal the
//! exec crate's golden files byte for byte but for the timestamps (the binary's deterministic
//! clock starts elsewhere). The exec tests register a copy of `stamp` to write those goldens;
//! this pins that copy to the binary's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{DEMO_RUN_ID, bin, demo_command, repo, text};
use serde_json::Value;

/// Runs `workflow` (YAML text) deterministically; returns the exit code, stderr and the root
/// transcript's events.
fn run_workflow(dir: &Path, workflow: &str) -> (Option<i32>, String, Vec<Value>) {
    let file = dir.join("wf.yaml");
    std::fs::write(&file, workflow).unwrap();
    let storage = dir.join("transcripts");
    let out = bin()
        .args(["run", "--deterministic", "--color", "never", "--storage"])
        .arg(&storage)
        .arg("--workspace")
        .arg(dir.join("workspace"))
        .arg(&file)
        .output()
        .unwrap();
    let transcript = storage.join(format!("{DEMO_RUN_ID}.jsonl"));
    let events = std::fs::read_to_string(&transcript)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", transcript.display(), text(&out.stderr)))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code(), text(&out.stderr), events)
}

fn completed<'a>(events: &'a [Value], name: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "step.completed" && e["payload"]["name"] == name)
        .unwrap_or_else(|| panic!("no step.completed for {name}: {events:?}"))
}

#[test]
fn the_binary_stamp_step_returns_label_hash_index() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, events) = run_workflow(
        dir.path(),
        "name: stamps\nsteps:\n  - name: mark\n    type: stamp\n    with: { label: tick, index: \"7\" }\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    let done = completed(&events, "mark");
    assert_eq!(done["payload"]["kind"], "stamp");
    assert_eq!(done["payload"]["result"], "tick#7");
}

#[test]
fn the_binary_stamp_step_fails_without_a_label() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, events) = run_workflow(
        dir.path(),
        "name: stamps\nsteps:\n  - name: mark\n    type: stamp\n    with: { index: \"7\" }\n",
    );
    assert_eq!(code, Some(1), "a failed step fails the run: {stderr}");
    let done = completed(&events, "mark");
    let error = done["payload"]["error"].to_string();
    assert!(error.contains("stamp needs a 'label'"), "{done}");
    assert!(done["payload"].get("result").is_none(), "{done}");
}

#[test]
fn the_binary_demo_run_equals_the_golden_files() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("transcripts");
    let out = demo_command(&storage, &dir.path().join("workspace"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let golden = repo().join("fixtures/golden/demo-run");
    let mut names: Vec<String> = std::fs::read_dir(&golden)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "audit.jsonl")
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    for name in names {
        let want = without_timestamps(&std::fs::read_to_string(golden.join(&name)).unwrap());
        let got = without_timestamps(&std::fs::read_to_string(storage.join(&name)).unwrap());
        assert_eq!(got.len(), want.len(), "{name}: line count");
        for (got, want) in got.iter().zip(&want) {
            assert_eq!(got, want, "{name} differs from the golden file");
        }
    }
}

/// The lines of a transcript with each `"timestamp":"…"` value blanked, the rest byte for byte.
fn without_timestamps(text: &str) -> Vec<String> {
    const KEY: &str = "\"timestamp\":\"";
    text.lines()
        .map(|line| {
            let start = line.find(KEY).expect("every event has a timestamp") + KEY.len();
            let end = start + line[start..].find('"').unwrap();
            format!("{}{}", &line[..start], &line[end..])
        })
        .collect()
}
