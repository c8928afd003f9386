//! "Abandoned" is final (#59 item 3): a runner SIGSTOPped mid-step past its lease is listed
//! abandoned and a `tail -f` following it ends with exit 4; SIGCONTed, the runner's next write
//! is refused by the lease's revision (its renewal at the revision it last wrote finds the key
//! lapsed), it ends with exit 4 saying the run was abandoned, records nothing more, and the
//! run stays abandoned. A real nats-server, the lease shortened to one second.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{DEMO_RUN_ID, bin, finish, text};
use transcript_nats::testing;

/// A workflow whose second step blocks until the test writes a line to `fifo`.
fn gate(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let fifo = dir.join("ws").join("gate.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let workflow = dir.join("gate.yaml");
    std::fs::write(
        &workflow,
        "name: gate\ninputs:\n  - name: fifo\nsteps:\n  - name: before\n    type: command\n    command: 'echo before'\n  - name: wait\n    type: command\n    command: 'read line < \"$FIFO\"; echo \"got $line\"'\n    env: { FIFO: \"{{inputs.fifo}}\" }\n  - name: after\n    type: command\n    command: 'echo after'\n",
    )
    .unwrap();
    (workflow, fifo)
}

/// The run's lines in the stream, read with the library.
fn stored_events(url: &str) -> usize {
    let url = transcript_nats::StorageUrl::parse(url).unwrap();
    let run = transcript_domain::RunId::parse(DEMO_RUN_ID).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = transcript_nats::NatsStore::connect_existing(&url, Default::default())
                .await
                .unwrap();
            store.run_lines(run).await.unwrap().len()
        })
}

fn signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .args([name, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {name} {pid}");
}

#[test]
fn a_runner_stopped_past_its_lease_writes_nothing_more_and_its_run_stays_abandoned() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let (workflow, fifo) = gate(tmp.path());
    let runner = bin()
        .args(["run", "--deterministic", "--storage", &url])
        .arg(&workflow)
        .arg("--input")
        .arg(format!("fifo={}", fifo.display()))
        .arg("--workspace")
        .arg(tmp.path().join("ws"))
        .current_dir(tmp.path())
        .env("TRANSCRIPT_NATS_LEASE_SECS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Opening the FIFO for writing returns once the step has opened it: mid-step.
    let mut gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    common::await_status(&url, DEMO_RUN_ID, "running");
    let follower = bin()
        .current_dir(tmp.path())
        .args(["tail", "-f", DEMO_RUN_ID, "--storage", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    signal(runner.id(), "-STOP");
    common::await_status(&url, DEMO_RUN_ID, "abandoned");
    let tail = finish(follower, Duration::from_secs(60), "tail -f");
    assert_eq!(tail.status.code(), Some(4), "{}", text(&tail.stderr));
    assert!(text(&tail.stderr).contains("was abandoned"));
    let before = stored_events(&url);

    signal(runner.id(), "-CONT");
    // The step goes on and ends; the runner's next write is refused.
    std::io::Write::write_all(&mut gate, b"go\n").unwrap();
    drop(gate);
    let o = finish(runner, Duration::from_secs(60), "the resumed runner");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("was abandoned: its lease lapsed"), "{err}");
    assert_eq!(
        stored_events(&url),
        before,
        "the resumed runner wrote: {err}"
    );
    common::await_status(&url, DEMO_RUN_ID, "abandoned");
    let list = bin()
        .args(["list", "--status", "abandoned", "--storage", &url])
        .output()
        .unwrap();
    assert!(text(&list.stdout).contains(DEMO_RUN_ID));
}
