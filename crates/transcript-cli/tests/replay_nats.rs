//! `transcript replay` on NATS storage (#49), against a real nats-server: a run recorded to the
//! fleet's store replays from it and the replay is recorded there too (naming the run it
//! replays, left out of `receipts --by`), equal while nothing changed, different (exit 1,
//! naming the step) once a file its command reads changed; a transcript file replays into
//! NATS as well.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::describe;

use std::path::Path;
use std::process::Output;

use transcript_nats::testing;

const WORKFLOW: &str = r#"name: fleet-replay
steps:
  - name: read
    type: command
    command: 'cat notes.txt'
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
"#;

fn transcript(storage: &str, work: &Path, args: &[&str]) -> Output {
    common::bin()
        .current_dir(work)
        .args(args)
        .args(["--storage", storage])
        .output()
        .unwrap()
}

/// The first line (`run.started`) of a run, read back through `mirror` (the store's bytes).
fn run_started(nats: &str, run_id: &str, work: &Path) -> serde_json::Value {
    let to = work.join(format!("mirror-{run_id}"));
    let out = common::bin()
        .args(["mirror", nats, "--to"])
        .arg(&to)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let text = std::fs::read_to_string(to.join(format!("{run_id}.jsonl"))).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

#[test]
fn a_run_on_nats_replays_from_nats_and_the_replay_is_recorded_there() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let nats = format!("{}/FLEET", server.url());
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "first\n").unwrap();
    std::fs::write(work.join("wf.yaml"), WORKFLOW).unwrap();
    let ws = work.to_str().unwrap();

    let out = transcript(&nats, &work, &["run", "wf.yaml", "--workspace", ws]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let recorded = common::printed_run_id(&common::text(&out.stdout));

    // Unchanged: equal, and the comparison names both runs by their place in the store.
    let out = transcript(&nats, &work, &["replay", &recorded[..8], "--workspace", ws]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = common::text(&out.stdout);
    assert!(stdout.contains("\nequal ("), "{}", describe(&out));
    assert!(
        stdout.contains(&format!("{nats}#{recorded}")),
        "{}",
        describe(&out)
    );
    let replay = common::printed_run_id(&stdout);
    assert_ne!(replay, recorded);
    assert!(
        stdout.contains(&format!("transcript: {nats}#{replay}")),
        "the replay is recorded to NATS: {}",
        describe(&out)
    );
    let started = run_started(&nats, &replay, dir.path());
    assert_eq!(started["payload"]["replay_of"], recorded.as_str());

    // Both runs are in the store; nothing was written beside the workspace.
    let list = transcript(&nats, &work, &["list", "--json"]);
    let listed = common::text(&list.stdout);
    assert!(
        listed.contains(&recorded) && listed.contains(&replay),
        "{listed}"
    );
    assert!(
        !work
            .join("storage")
            .join("transcripts")
            .join(format!("{replay}.jsonl"))
            .exists()
    );

    // A changed file: the replay differs, naming the step.
    std::fs::write(work.join("notes.txt"), "second\n").unwrap();
    let out = transcript(&nats, &work, &["replay", &recorded, "--workspace", ws]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stdout = common::text(&out.stdout);
    assert!(stdout.contains("read"), "{}", describe(&out));
    assert!(stdout.contains("second"), "{}", describe(&out));
}

#[test]
fn a_transcript_file_replays_into_nats() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let nats = format!("{}/FLEET", server.url());
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let files = dir.path().join("files");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "first\n").unwrap();
    std::fs::write(work.join("wf.yaml"), WORKFLOW).unwrap();
    let ws = work.to_str().unwrap();
    let out = transcript(
        files.to_str().unwrap(),
        &work,
        &["run", "wf.yaml", "--workspace", ws],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let recorded = common::printed_run_id(&common::text(&out.stdout));
    let file = files.join(format!("{recorded}.jsonl"));

    let out = transcript(
        &nats,
        &work,
        &["replay", file.to_str().unwrap(), "--workspace", ws],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = common::text(&out.stdout);
    assert!(stdout.contains("\nequal ("), "{}", describe(&out));
    assert!(
        stdout.contains(file.to_str().unwrap()),
        "{}",
        describe(&out)
    );
    let replay = common::printed_run_id(&stdout);
    let started = run_started(&nats, &replay, dir.path());
    assert_eq!(started["payload"]["replay_of"], recorded.as_str());
}
