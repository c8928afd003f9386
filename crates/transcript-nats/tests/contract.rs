//! The NATS recorder against a real nats-server: the same drafts with a ManualClock give the
//! file recorder's bytes; ack = stored; a second writer is refused; retried publishes are
//! stored once; subscriptions replay then go live; the runs index follows the run.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use async_nats::jetstream::message::PublishMessage;
use transcript_domain::{
    EventDraft, Payload, RecordError, RecorderFactory, RunId, RunIdGenerator, SequentialRunIds,
    StepPayload,
};
use transcript_nats::{IndexStatus, NatsRecorderFactory, StreamOptions, run_subject};

fn ids() -> (RunId, RunId) {
    let g = SequentialRunIds::with_prefix(0x44);
    (g.next_run_id(), g.next_run_id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_are_byte_identical_to_the_file_recorder() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let (root, child) = ids();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let seqs = common::record_all(&factory, root, None, common::drafts(Some(child))).await;
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    // A child run on its own clock, as the file recorder's child gets.
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, child, Some(root), common::drafts(None)).await;

    for (run, parent, drafts) in [
        (root, None, common::drafts(Some(child))),
        (child, Some(root), common::drafts(None)),
    ] {
        let expected = common::file_bytes(run, parent, drafts).await;
        let stored: Vec<u8> = store.run_lines(run).await.unwrap().concat();
        assert_eq!(
            String::from_utf8(stored).unwrap(),
            String::from_utf8(expected).unwrap(),
            "run {run}"
        );
    }
    // jq's view of the stream (outside our decoder): each message is one JSON line.
    let lines = store.run_lines(child).await.unwrap();
    for (i, line) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert_eq!(v["seq"], i as u64 + 1);
        assert_eq!(v["parent_run_id"], root.to_string());
        assert!(line.ends_with(b"\n"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_of_a_run_is_refused() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let (run, _) = ids();
    let a = NatsRecorderFactory::new(store.clone(), common::clock());
    let b = NatsRecorderFactory::new(store.clone(), common::clock());
    // Both open before either writes (both see an empty subject): the run's lease, taken
    // only where no key exists, refuses the second at once.
    let first = a.create(run, None).await.unwrap();
    let second = b.create(run, None).await;
    assert!(
        matches!(&second, Err(RecordError::Locked { path }) if path.contains("lease")),
        "{:?}",
        second.err()
    );
    let started = || EventDraft::run_level(Payload::RunStarted(StepPayload::new("w", "workflow")));
    assert_eq!(first.record(started()).await.unwrap(), 1);
    assert_eq!(
        first
            .record(EventDraft::new(
                "s",
                0,
                Payload::StepStarted(StepPayload::new("s", "command"))
            ))
            .await
            .unwrap(),
        2
    );
    // A writer opened after events exist is refused at once.
    let late = a.create(run, None).await;
    assert!(
        matches!(late, Err(RecordError::Locked { .. })),
        "{:?}",
        late.err()
    );
    assert_eq!(store.run_lines(run).await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_publish_is_stored_once_and_order_is_enforced() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let (run, _) = ids();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, run, None, common::drafts(None)).await;
    let lines = store.run_lines(run).await.unwrap();
    let js = store.jetstream();
    // The retry of event 1 (same Nats-Msg-Id, same bytes): acknowledged as a duplicate.
    let ack = js
        .send_publish(
            run_subject(&run),
            PublishMessage::build()
                .payload(lines[0].clone())
                .message_id(format!("{run}:1")),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(ack.duplicate);
    // A publish expecting an older last subject sequence (a gap or reorder): refused.
    let refused = js
        .send_publish(
            run_subject(&run),
            PublishMessage::build()
                .payload(lines[1].clone())
                .message_id(format!("{run}:99"))
                .expected_last_subject_sequence(1),
        )
        .await
        .unwrap()
        .await;
    assert!(refused.is_err());
    assert_eq!(store.run_lines(run).await.unwrap(), lines);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_replay_then_go_live_and_end_at_close() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let (run, _) = ids();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let drafts = common::drafts(None);
    let (head, tail) = drafts.split_at(3);
    for d in head {
        recorder.record(d.clone()).await.unwrap();
    }
    let mut replay = recorder.subscribe(Some(2)).await.unwrap();
    let mut live = recorder.subscribe(None).await.unwrap();
    assert!(matches!(
        recorder.subscribe(Some(0)).await,
        Err(RecordError::Replay { .. })
    ));
    assert!(matches!(
        recorder.subscribe(Some(5)).await,
        Err(RecordError::Replay { .. })
    ));
    for d in tail {
        recorder.record(d.clone()).await.unwrap();
    }
    recorder.close().await.unwrap();
    let mut got = Vec::new();
    while let Some(e) = replay.next().await {
        got.push(e.seq);
    }
    assert_eq!(got, (2..=drafts.len() as u64).collect::<Vec<_>>());
    let mut got = Vec::new();
    while let Some(e) = live.next().await {
        got.push(e.seq);
    }
    assert_eq!(got, (4..=drafts.len() as u64).collect::<Vec<_>>());
    assert!(matches!(
        recorder.record(drafts[0].clone()).await,
        Err(RecordError::Closed)
    ));
    recorder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_index_follows_the_run() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let (root, child) = ids();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(root, None).await.unwrap();
    let drafts = common::drafts(Some(child));
    recorder.record(drafts[0].clone()).await.unwrap();
    let entry = store.run_entry(root).await.unwrap().unwrap();
    assert_eq!(entry.status, IndexStatus::Running);
    assert_eq!(entry.workflow.as_deref(), Some("fleet"));
    for d in &drafts[1..] {
        recorder.record(d.clone()).await.unwrap();
    }
    recorder.close().await.unwrap();
    let child_factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&child_factory, child, Some(root), common::drafts(None)).await;
    let entry = store.run_entry(root).await.unwrap().unwrap();
    assert_eq!(entry.status, IndexStatus::Failed);
    assert_eq!(entry.events, drafts.len() as u64);
    assert_eq!(
        entry.started_at.unwrap().to_string(),
        "2026-01-02T03:04:05.678Z"
    );
    let usage = &entry.usage_by_model["claude-opus-4"];
    assert_eq!(usage.output_tokens, Some(400));
    assert_eq!(usage.cost_usd, Some(0.25));
    let runs = store.runs().await.unwrap();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter()
            .any(|r| r.run_id == child && r.parent_run_id == Some(root))
    );
    let _ = Arc::new(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_starting_together_on_a_fresh_server_all_connect() {
    let Some(server) = common::server() else {
        return;
    };
    let url = transcript_nats::StorageUrl::parse(&server.url()).unwrap();
    // Sixteen runners race to create the stream and the runs-index bucket.
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                transcript_nats::NatsStore::connect(&url, StreamOptions::default())
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
}
