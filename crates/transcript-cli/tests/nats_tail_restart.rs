//! `tail -f` on NATS rides through a server restart (#44): the run it follows goes on (its
//! publishes are retried within their budget), and so do the follower and the runner's own
//! live view, from the event after the last one each printed. Before, their consumers were
//! gone with the restart: `tail -f` ended with "consumer not found" while the run was still
//! going, and the runner's live view silently stopped showing events.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{DEMO_RUN_ID, bin, finish, text};
use transcript_nats::testing;

#[test]
fn tail_f_follows_a_run_through_a_server_restart() {
    let Some(mut server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    // In the workspace: a confined step (#56) opens nothing outside it.
    std::fs::create_dir_all(tmp.path().join("ws")).unwrap();
    let fifo = tmp.path().join("ws").join("gate.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let workflow = tmp.path().join("gate.yaml");
    std::fs::write(
        &workflow,
        "name: gate\ninputs:\n  - name: fifo\nsteps:\n  - name: before\n    type: command\n    command: 'echo before'\n  - name: wait\n    type: command\n    command: 'read line < \"$FIFO\"'\n    env: { FIFO: \"{{inputs.fifo}}\" }\n  - name: after\n    type: command\n    command: 'echo after'\n",
    )
    .unwrap();
    let run = bin()
        .args(["run", "--deterministic", "--storage", &url])
        .arg(&workflow)
        .arg("--input")
        .arg(format!("fifo={}", fifo.display()))
        .arg("--workspace")
        .arg(tmp.path().join("ws"))
        .current_dir(tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The second step runs once it has opened the FIFO.
    let mut gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let mut tail = bin()
        .args(["tail", "-f", DEMO_RUN_ID, "--storage", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Every event so far was printed: the follower is live.
    let mut out = BufReader::new(tail.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("wait [command]") {
        assert!(out.read_line(&mut seen).unwrap() > 0, "{seen}");
    }
    server.restart().unwrap();
    gate.write_all(b"go\n").unwrap();
    drop(gate);
    let released = std::time::Instant::now();
    let o = finish(run, Duration::from_secs(60), "the run");
    // Its live view went on at once after the reconnect, not after the client library's own
    // consumer checks (about 15 s): the run ends soon after its last step.
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "the run took {took:?} after its gate"
    );
    let progress = text(&o.stderr);
    assert!(o.status.success(), "{progress}");
    // The runner's own live view (its subscription to the run) went on too: every event.
    for event in ["after [command]", "run.completed"] {
        assert!(progress.contains(event), "{event}: {progress}");
    }
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        rest
    });
    let followed = finish(tail, Duration::from_secs(60), "tail -f");
    let printed = seen + &rest.join().unwrap();
    assert!(
        followed.status.success(),
        "{:?}: {}",
        followed.status,
        text(&followed.stderr)
    );
    let replay = bin()
        .args(["tail", DEMO_RUN_ID, "--storage", &url])
        .output()
        .unwrap();
    assert_eq!(printed, text(&replay.stdout));
    assert!(
        printed.lines().last().unwrap().contains("run.completed"),
        "{printed}"
    );
}
