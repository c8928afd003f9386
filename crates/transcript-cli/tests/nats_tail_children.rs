//! `tail -f` on NATS ends as on files (#44) when the run names a child run that never
//! recorded an event (a `call_workflow` step that failed before its child's transcript
//! opened): once the root's `run.completed` is in, a child with no event is not waited for,
//! since nothing will ever complete it. Before, the NATS follower waited for it forever.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{bin, text};
use transcript_domain::{
    EventDraft, ManualClock, Payload, RecorderFactory, RunIdGenerator, SequentialRunIds,
    StepPayload, Timestamp,
};
use transcript_nats::{NatsRecorderFactory, NatsStore, StorageUrl, testing};

/// Records a root run whose `call_workflow` step named `child` and failed before the child
/// recorded anything; returns the root's id.
fn record_root(url: &str) -> (String, String) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = NatsStore::connect(&StorageUrl::parse(url).unwrap(), Default::default())
                .await
                .unwrap();
            let clock = Arc::new(ManualClock::new(Timestamp::UNIX_EPOCH));
            let ids = SequentialRunIds::with_prefix(0x4490);
            let (root, child) = (ids.next_run_id(), ids.next_run_id());
            let recorder = NatsRecorderFactory::new(store, clock)
                .create(root, None)
                .await
                .unwrap();
            let call = |p| EventDraft::new("sub", 0, p).with_child(child);
            let error = "cannot open the transcript of the child run";
            for draft in [
                EventDraft::run_level(Payload::RunStarted(StepPayload::new("top", "workflow"))),
                call(Payload::CallWorkflowStarted(StepPayload::new(
                    "sub",
                    "call_workflow",
                ))),
                call(Payload::CallWorkflowCompleted(
                    StepPayload::new("sub", "call_workflow").with_error(error),
                )),
                EventDraft::run_level(Payload::RunCompleted(
                    StepPayload::new("top", "workflow").with_error(error),
                )),
            ] {
                recorder.record(draft).await.unwrap();
            }
            recorder.close().await.unwrap();
            (root.to_string(), child.to_string())
        })
}

/// `tail -f run --storage storage`, at most `limit` (killed past it, which fails the test).
fn tail_f(run: &str, storage: &str, limit: Duration) -> std::process::Output {
    let child = bin()
        .args(["tail", "-f", run, "--storage", storage])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let late = rx.recv().unwrap().unwrap();
            panic!(
                "tail -f on {storage} did not end within {limit:?}: {}",
                text(&late.stderr)
            );
        }
    }
}

#[test]
fn tail_f_does_not_wait_for_a_child_run_that_never_recorded() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let (root, child) = record_root(&url);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mirror");
    let o = bin()
        .args(["mirror", &url, "--to"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let on_files = tail_f(&root, dir.to_str().unwrap(), Duration::from_secs(20));
    assert_eq!(
        on_files.status.code(),
        Some(1),
        "{}",
        text(&on_files.stderr)
    );
    let on_nats = tail_f(&root, &url, Duration::from_secs(20));
    assert_eq!(on_nats.status.code(), Some(1), "{}", text(&on_nats.stderr));
    assert_eq!(text(&on_nats.stdout), text(&on_files.stdout));
    assert!(
        !text(&on_nats.stderr).contains(&child),
        "{}",
        text(&on_nats.stderr)
    );
}
