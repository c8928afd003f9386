//! A run's lease on NATS (#52 item 1), against a real nats-server: a live recorder renews its
//! lease (the run reads as running past many lease lengths), a recorder gone without a close
//! lets it lapse (the run reads as abandoned), and a closed run releases it at once (read as
//! completed, never abandoned).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use transcript_domain::{RecorderFactory, RunIdGenerator, SequentialRunIds};
use transcript_nats::{IndexStatus, NatsRecorderFactory, NatsStore, StreamOptions};

fn options() -> StreamOptions {
    StreamOptions {
        lease: Duration::from_secs(1),
        ..StreamOptions::default()
    }
}

async fn status(store: &NatsStore, run: transcript_domain::RunId) -> IndexStatus {
    let runs = store.runs().await.unwrap();
    runs.iter().find(|r| r.run_id == run).unwrap().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_run_is_running_and_one_whose_recorder_is_gone_is_abandoned() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), options()).await;
    let run = SequentialRunIds::with_prefix(0x5271).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let drafts = common::drafts(None);
    for d in &drafts[..3] {
        recorder.record(d.clone()).await.unwrap();
    }
    assert!(store.lease_held(run).await.unwrap());
    // Four lease lengths: only the recorder's renewals keep the key (the servers remove it a
    // lease after its last renewal).
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(store.lease_held(run).await.unwrap(), "renewed");
    assert_eq!(status(&store, run).await, IndexStatus::Running);

    // The recorder gone without a close (its process killed, as far as the store can tell):
    // nothing renews the lease, the servers remove it, and the run reads as abandoned.
    drop(recorder);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.lease_held(run).await.unwrap() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease never lapsed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status(&store, run).await, IndexStatus::Abandoned);
    // Read-time only: the index entry itself still says what the runner wrote.
    assert_eq!(
        store.run_entry(run).await.unwrap().unwrap().status,
        IndexStatus::Running
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_run_releases_its_lease_at_once_and_reads_as_completed() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), options()).await;
    let run = SequentialRunIds::with_prefix(0x5272).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, run, None, common::drafts(None)).await;
    assert!(!store.lease_held(run).await.unwrap());
    assert_eq!(status(&store, run).await, IndexStatus::Failed);

    // Closed before run.completed (the runner ended the run some other way): released too,
    // so the run reads as abandoned at once, not running.
    let other = SequentialRunIds::with_prefix(0x5273).next_run_id();
    let recorder = factory.create(other, None).await.unwrap();
    recorder
        .record(common::drafts(None)[0].clone())
        .await
        .unwrap();
    recorder.close().await.unwrap();
    assert!(!store.lease_held(other).await.unwrap());
    assert_eq!(status(&store, other).await, IndexStatus::Abandoned);
}

/// #52 item 4: the runner writes its index entry with each lease renewal (events, last event
/// time, usage so far), and a listing takes a running run whose lease is held from the index
/// alone: a message planted at the end of the run's subject, which a read of the stream would
/// take as the run's last (seq 999, run.completed), changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_is_listed_from_the_index_the_runner_keeps_current() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), options()).await;
    let run = SequentialRunIds::with_prefix(0x5274).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let drafts = common::drafts(None);
    let recorded = drafts.len() - 1;
    for d in &drafts[..recorded] {
        recorder.record(d.clone()).await.unwrap();
    }
    // The renewals (every third of a second) write the grown entry.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let entry = loop {
        let entry = store.run_entry(run).await.unwrap().unwrap();
        if entry.events == recorded as u64 {
            break entry;
        }
        assert!(tokio::time::Instant::now() < deadline, "{entry:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(entry.status, IndexStatus::Running);
    assert_eq!(
        entry.usage_by_model["claude-opus-4"].output_tokens,
        Some(400)
    );
    assert_eq!(
        entry.turns.len(),
        1,
        "the agent step completed: its turn is billed"
    );

    let planted = format!(
        "{{\"seq\":999,\"timestamp\":\"2026-01-02T03:04:06.000Z\",\"run_id\":\"{run}\",\
         \"type\":\"run.completed\",\"path\":\"\",\"iteration\":0,\"payload\":{{\"name\":\"x\",\
         \"kind\":\"workflow\"}}}}\n"
    );
    store
        .jetstream()
        .publish(
            transcript_nats::run_subject(&run),
            planted.into_bytes().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let listed = store.runs().await.unwrap();
    assert_eq!(listed, vec![entry], "read from the index only");
    drop(recorder);
}
