//! The runs index as a cache of the stream, against a real nats-server: a run the index has
//! not seen complete is rebuilt from its lines (every turn billed), the rebuilt entry is
//! written back without overwriting a live recorder's, and what the index knew of a run whose
//! first events the stream's limits removed is kept.
#![allow(clippy::unwrap_used)]

mod common;

use transcript_domain::{RecorderFactory, RunIdGenerator, SequentialRunIds};
use transcript_nats::{IndexStatus, NatsRecorderFactory, StreamOptions};

/// A lease no renewal comes near during a test: the tests release it themselves.
fn options() -> StreamOptions {
    StreamOptions {
        lease: std::time::Duration::from_secs(3600),
        ..StreamOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_not_seen_complete_is_rebuilt_from_the_stream_and_written_back() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), options()).await;
    let run = SequentialRunIds::with_prefix(0x4481).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let drafts = common::drafts(None);
    // Everything but run.completed: the runner died, or is still running.
    for d in &drafts[..drafts.len() - 1] {
        recorder.record(d.clone()).await.unwrap();
    }
    let indexed = store.run_entry(run).await.unwrap().unwrap();
    assert_eq!((indexed.status, indexed.events), (IndexStatus::Running, 1));
    assert!(indexed.turns.is_empty());
    // While its runner holds the lease, the index is the runner's to keep current.
    assert_eq!(store.runs().await.unwrap(), vec![indexed]);

    // The lease lapsed (the runner died, or lost the servers): the stream is read.
    store.release_lease(run).await.unwrap();
    let runs = store.runs().await.unwrap();
    assert_eq!(runs.len(), 1);
    let entry = &runs[0];
    assert_eq!(entry.status, IndexStatus::Abandoned);
    assert_eq!(entry.events, drafts.len() as u64 - 1);
    assert_eq!(entry.workflow.as_deref(), Some("fleet"));
    assert_eq!(entry.turns.len(), 1, "{entry:?}");
    assert_eq!(entry.turns[0].model, "claude-opus-4");
    // Written back as rebuilt (abandoned is read-time only).
    let stored = store.run_entry(run).await.unwrap().unwrap();
    assert_eq!(stored.status, IndexStatus::Running);
    assert_eq!((stored.events, &stored.turns), (entry.events, &entry.turns));

    // The recorder's own write at the end wins over the repair.
    recorder
        .record(drafts[drafts.len() - 1].clone())
        .await
        .unwrap();
    recorder.close().await.unwrap();
    let done = store.run_entry(run).await.unwrap().unwrap();
    assert_eq!(done.status, IndexStatus::Failed);
    assert_eq!(store.runs().await.unwrap(), vec![done]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_first_events_are_gone_keeps_what_the_index_knew() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), options()).await;
    let run = SequentialRunIds::with_prefix(0x4482).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let drafts = common::drafts(None);
    for d in &drafts[..3] {
        recorder.record(d.clone()).await.unwrap();
    }
    // run.started removed (as the stream's max_age or max_bytes removes the oldest events).
    let stream = store.jetstream().get_stream("TRANSCRIPTS").await.unwrap();
    assert!(stream.delete_message(1).await.unwrap());
    store.release_lease(run).await.unwrap();
    let runs = store.runs().await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].events, 3);
    assert_eq!(runs[0].workflow.as_deref(), Some("fleet"));
    assert_eq!(
        runs[0].started_at.unwrap().to_string(),
        "2026-01-02T03:04:05.678Z"
    );
    drop(recorder);
}
