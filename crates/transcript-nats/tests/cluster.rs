//! Faults on a real 3-node cluster (replicas 3): a node killed mid-run, the stream leader
//! killed mid-run (the run completes, nothing lost, gapless); quorum lost (two of three down):
//! `record` fails within a bounded time and every later record of the run fails too.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use transcript_domain::{
    EventDraft, Payload, RecordError, RecorderFactory, RunId, RunIdGenerator, SequentialRunIds,
    StepPayload,
};
use transcript_nats::testing::{self, ServerNode};
use transcript_nats::{NatsRecorderFactory, NatsStore, StorageUrl, StreamOptions};

fn cluster() -> Option<Vec<ServerNode>> {
    testing::cluster(3).expect("nats-server cluster")
}

fn options() -> StreamOptions {
    StreamOptions {
        replicas: Some(3),
        ack_timeout: Duration::from_secs(2),
        publish_attempts: 5,
        ..StreamOptions::default()
    }
}

async fn connect(nodes: &[ServerNode], options: StreamOptions) -> NatsStore {
    let url = StorageUrl::parse(&testing::urls(nodes)).unwrap();
    // A fresh cluster may still be electing: JetStream answers once it has a meta leader.
    testing::connect_when_serving(&url, options, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("cluster never served JetStream: {e}"))
}

fn step(i: u64) -> EventDraft {
    EventDraft::new(
        "loop",
        i,
        Payload::StepStarted(StepPayload::new("loop", "command")),
    )
}

/// The stream leader's index in `nodes`.
async fn leader(store: &NatsStore, nodes: &[ServerNode]) -> usize {
    let info = store
        .jetstream()
        .get_stream("TRANSCRIPTS")
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    let name = info.cluster.unwrap().leader.unwrap();
    nodes.iter().position(|n| n.name == name).unwrap()
}

/// Records 60 events, killing `victim(store)` after the 20th; checks all 60 are stored, in
/// order, equal to what was acknowledged.
async fn run_through_a_kill(kill_leader: bool) {
    let Some(mut nodes) = cluster() else { return };
    let store = connect(&nodes, options()).await;
    let run: RunId = SequentialRunIds::with_prefix(0x4405).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    recorder
        .record(EventDraft::run_level(Payload::RunStarted(
            StepPayload::new("fleet", "workflow"),
        )))
        .await
        .unwrap();
    for i in 0..60 {
        if i == 20 {
            let leader = leader(&store, &nodes).await;
            let victim = if kill_leader {
                leader
            } else {
                (leader + 1) % 3
            };
            nodes[victim].kill();
        }
        assert_eq!(recorder.record(step(i)).await.unwrap(), i + 2);
    }
    recorder
        .record(EventDraft::run_level(Payload::RunCompleted(
            StepPayload::new("fleet", "workflow"),
        )))
        .await
        .unwrap();
    recorder.close().await.unwrap();
    let lines = store.run_lines(run).await.unwrap();
    assert_eq!(lines.len(), 62);
    for (i, line) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert_eq!(v["seq"], i as u64 + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_killed_mid_run_loses_nothing() {
    run_through_a_kill(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_leader_killed_mid_run_loses_nothing() {
    run_through_a_kill(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_lost_fails_record_within_a_bounded_time_and_for_good() {
    let Some(mut nodes) = cluster() else { return };
    let fast = StreamOptions {
        ack_timeout: Duration::from_millis(500),
        publish_attempts: 2,
        ..options()
    };
    let store = connect(&nodes, fast).await;
    let run = SequentialRunIds::with_prefix(0x4406).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    assert_eq!(recorder.record(step(0)).await.unwrap(), 1);
    let leader = leader(&store, &nodes).await;
    // Two of three down, the leader among them.
    nodes[leader].kill();
    nodes[(leader + 1) % 3].kill();
    let started = Instant::now();
    let failed = recorder.record(step(1)).await;
    let took = started.elapsed();
    assert!(
        matches!(failed, Err(RecordError::Storage { .. })),
        "{failed:?}"
    );
    let message = failed.unwrap_err().to_string();
    assert!(
        message.contains("outcome is unknown") || message.contains("not acknowledged"),
        "{message}"
    );
    // ack_timeout × attempts, plus the client's own request slack.
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The run cannot go on, even once a quorum is back: a lost event is never papered over.
    nodes[leader].restart().unwrap();
    assert!(recorder.record(step(2)).await.is_err());
}
