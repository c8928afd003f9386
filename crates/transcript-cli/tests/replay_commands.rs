//! `transcript replay --commands live|record` on a workflow of command steps (no agent CLI
//! needed): live, the commands run again and a changed file shows (exit 1, the step and its
//! output named); record, they do not run (a marker file they append to stays as it was) and
//! get their recorded stdout and exit code, a failed one included (exit 0, equal: the
//! recorded run failed and so does the replay). A run
//! without `run.started` provenance needs `--workflow`; a masked secret input must be given.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::describe;

use std::path::Path;
use std::process::Output;

use tempfile::TempDir;

const WORKFLOW: &str = r#"name: commands
steps:
  - name: read
    type: command
    command: 'echo ran >> marker.txt; cat notes.txt'
  - name: each
    type: for_each
    items: [a, b]
    steps:
      - name: show
        type: command
        command: ["printf", "%s\n", "{{loop.item}}"]
  - name: both
    type: parallel
    branches:
      - name: left
        type: command
        command: "echo left"
      - name: right
        type: command
        command: "echo right"
  - name: broken
    type: command
    command: "echo broken >&2; exit 3"
"#;

fn transcript(storage: &Path, args: &[&str]) -> Output {
    common::bin()
        .arg("--storage")
        .arg(storage)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn recorded_commands_are_served_live_ones_run_again() {
    let dir = TempDir::new().unwrap();
    let (storage, work) = (dir.path().join("storage"), dir.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "first\n").unwrap();
    let wf = dir.path().join("commands.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let ws = work.to_str().unwrap();
    // The last step fails (exit 3): the run fails, and so does each replay, equally.
    let out = transcript(&storage, &["run", wf.to_str().unwrap(), "--workspace", ws]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let run_id = common::printed_run_id(&common::text(&out.stdout));
    let marker = || std::fs::read_to_string(work.join("marker.txt")).unwrap();
    assert_eq!(marker(), "ran\n");

    // Live and unchanged: equal; the command ran again.
    let out = transcript(&storage, &["replay", &run_id, "--workspace", ws]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(common::text(&out.stdout).contains("\nequal ("));
    assert_eq!(marker(), "ran\nran\n");

    // Live with the file changed: the step's output differs, named with both lines.
    std::fs::write(work.join("notes.txt"), "second\n").unwrap();
    let out = transcript(&storage, &["replay", &run_id, "--workspace", ws]);
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{why}");
    let stdout = common::text(&out.stdout);
    assert!(stdout.contains("read [command] read"), "{why}");
    assert!(
        stdout.contains("first") && stdout.contains("second"),
        "{why}"
    );

    // Recorded: nothing runs, the recorded outputs and exit codes are served: equal.
    let before = marker();
    let out = transcript(
        &storage,
        &["replay", &run_id, "--workspace", ws, "--commands", "record"],
    );
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{why}");
    assert!(common::text(&out.stdout).contains("\nequal ("), "{why}");
    assert_eq!(marker(), before, "a recorded command ran");
}

#[test]
fn replay_without_a_recorded_workflow_or_a_masked_input_is_a_usage_error() {
    let dir = TempDir::new().unwrap();
    let storage = dir.path().join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let id = "00000000-0000-4000-8000-0000000000aa";
    let started = |payload: &str| {
        format!(
            "{{\"seq\":1,\"run_id\":\"{id}\",\"type\":\"run.started\",\"path\":\"\",\
             \"iteration\":0,\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"payload\":{payload}}}\n"
        )
    };
    let file = storage.join(format!("{id}.jsonl"));
    std::fs::write(&file, started(r#"{"name":"w","kind":"workflow"}"#)).unwrap();
    let out = transcript(&storage, &["replay", id]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(common::text(&out.stderr).contains("give --workflow FILE"));

    std::fs::write(
        &file,
        started(r#"{"name":"w","kind":"workflow","inputs":{"token":"***"}}"#),
    )
    .unwrap();
    let wf = dir.path().join("w.yaml");
    std::fs::write(&wf, "name: w\ninputs:\n  - name: token\nsteps:\n  - name: s\n    type: command\n    command: 'true'\n").unwrap();
    let out = transcript(
        &storage,
        &["replay", id, "--workflow", wf.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        common::text(&out.stderr).contains("input 'token' was recorded masked"),
        "{}",
        describe(&out)
    );
    // A run that is not there: not found, exit 3 (as the exit-code table has it, #58).
    let out = transcript(
        &storage,
        &["replay", "00000000-0000-4000-8000-0000000000bb"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
}
