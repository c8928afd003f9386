//! The writer's lease on files (#52 item 1): a live recorder's run reads as held, a closed or
//! dropped one as free, probing takes nothing, and `close` returns only once the run is free,
//! even while other threads spawn processes (a child forked at the instant of the close holds
//! a copy of the descriptor until it execs).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use transcript_domain::{RecordError, Recorder};
use transcript_infra::writer_holds;

#[tokio::test]
async fn a_live_recorder_holds_its_lease_and_probing_it_takes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(0x5201);
    let recorder = builder(tmp.path(), run).open().unwrap();
    recorder.record(step("a")).await.unwrap();
    let path = recorder.path().to_path_buf();
    for _ in 0..100 {
        assert!(writer_holds(&path).unwrap());
    }
    // The probes took nothing: the writer goes on, a second writer is still refused.
    assert!(matches!(
        builder(tmp.path(), run).resume(),
        Err(RecordError::Locked { .. })
    ));
    recorder.record(step("b")).await.unwrap();
    recorder.close().await.unwrap();
    assert!(!writer_holds(&path).unwrap(), "closed: the run is free");

    // A recorder dropped without a close releases it too (once its thread has ended: an
    // open of the run in this process waits for that).
    let again = builder(tmp.path(), run).resume().unwrap();
    assert!(writer_holds(&path).unwrap());
    drop(again);
    let third = builder(tmp.path(), run).resume().unwrap();
    third.close().await.unwrap();
    assert!(!writer_holds(&path).unwrap());

    // A probe never creates or blocks on what is not a transcript.
    assert!(writer_holds(&tmp.path().join("missing.jsonl")).is_err());
}

/// Another thread spawns processes without pause while runs are opened, closed and opened
/// again: each `close` must leave the run free at once. Before the lease was unlocked
/// explicitly, a child forked during the close kept the `flock` until its exec, and the next
/// open of the run failed with `Locked` (seen once under load in
/// `recorder.rs::a_second_recorder_on_the_same_run_is_locked_out_and_writes_nothing`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_frees_the_run_while_other_threads_spawn_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spawners: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::process::Command::new("true").status();
                }
            })
        })
        .collect();
    let mut failures = Vec::new();
    for i in 0..300u32 {
        let run = run_id(0x5202_0000 + i);
        let first = builder(tmp.path(), run).open().unwrap();
        first.record(step("a")).await.unwrap();
        first.close().await.unwrap();
        if writer_holds(first.path()).unwrap() {
            failures.push(format!("{i}: held after close"));
        }
        match builder(tmp.path(), run).resume() {
            Ok(again) => again.close().await.unwrap(),
            Err(e) => failures.push(format!("{i}: {e}")),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in spawners {
        s.join().unwrap();
    }
    assert!(failures.is_empty(), "{failures:?}");
}
