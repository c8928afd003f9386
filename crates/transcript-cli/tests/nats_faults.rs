//! Faults through the binary on real servers (#44 item 5): quorum lost mid-run (two of three
//! nodes killed while a step runs): the run ends with exit 4 and never reports success; the
//! runner SIGKILLed mid-run: every acknowledged event is in the stream and the store and the
//! mirror show the run abandoned.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{bin, finish, text};
use transcript_nats::testing;

/// A workflow whose second step blocks until the test writes a line to `fifo`.
fn gate(dir: &Path) -> (PathBuf, PathBuf) {
    // In the workspace: a confined step (#56) opens nothing outside it.
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let fifo = dir.join("ws").join("gate.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let workflow = dir.join("gate.yaml");
    std::fs::write(
        &workflow,
        "name: gate\ninputs:\n  - name: fifo\nsteps:\n  - name: before\n    type: command\n    command: 'echo before'\n  - name: wait\n    type: command\n    command: 'read line < \"$FIFO\"; echo \"got $line\"'\n    env: { FIFO: \"{{inputs.fifo}}\" }\n  - name: after\n    type: command\n    command: 'echo after'\n",
    )
    .unwrap();
    (workflow, fifo)
}

fn start_run(
    storage: &str,
    workflow: &Path,
    fifo: &Path,
    dir: &Path,
    env: &[(&str, &str)],
) -> Child {
    let mut c = bin();
    c.args(["run", "--deterministic", "--storage", storage])
        .arg(workflow)
        .arg("--input")
        .arg(format!("fifo={}", fifo.display()))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

#[test]
fn quorum_lost_mid_run_ends_with_exit_4_and_never_reports_success() {
    let Some(mut nodes) = testing::cluster(3).expect("nats-server cluster") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (workflow, fifo) = gate(tmp.path());
    let storage = format!("{}/TRANSCRIPTS", testing::urls(&nodes));
    let env = [
        ("TRANSCRIPT_NATS_REPLICAS", "3"),
        ("TRANSCRIPT_NATS_ACK_TIMEOUT_MS", "500"),
        ("TRANSCRIPT_NATS_PUBLISH_ATTEMPTS", "2"),
    ];
    let child = start_run(&storage, &workflow, &fifo, tmp.path(), &env);
    // Opening the FIFO for writing returns once the step has opened it: the step runs now.
    let mut gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    nodes[0].kill();
    nodes[1].kill();
    gate.write_all(b"go\n").unwrap();
    drop(gate);
    let o = finish(child, Duration::from_secs(60), "the run");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(!err.contains("succeeded"), "{err}");
    assert!(err.contains("not acknowledged"), "{err}");
}

#[test]
fn a_sigkilled_runner_leaves_every_acknowledged_event_and_an_incomplete_mirror() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (workflow, fifo) = gate(tmp.path());
    let storage = server.url();
    let lease = [("TRANSCRIPT_NATS_LEASE_SECS", "1")];
    let mut child = start_run(&storage, &workflow, &fifo, tmp.path(), &lease);
    let gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    // The step is running: run.started and the first step's events were acknowledged, and the
    // second step's step.started before its command was spawned.
    child.kill().unwrap();
    let _ = child.wait();
    drop(gate);
    let mirror = tmp.path().join("mirror");
    let o = bin()
        .args(["mirror", &storage, "--to"])
        .arg(&mirror)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let run = "00000000-0000-4000-8000-000000000001";
    let lines = std::fs::read_to_string(mirror.join(format!("{run}.jsonl"))).unwrap();
    let types: Vec<String> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        types,
        [
            "run.started",
            "step.started",
            "step.completed",
            "step.started"
        ],
        "{lines}"
    );
    // The runner's lease lapses on the servers a second after its last renewal.
    common::await_status(&storage, run, "abandoned");
    for storage in [storage.as_str(), mirror.to_str().unwrap()] {
        let o = bin()
            .args(["list", "--json", "--storage", storage])
            .output()
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(list[0]["status"], "abandoned", "{storage}");
        assert_eq!(list[0]["events"], 4, "{storage}");
    }
}
