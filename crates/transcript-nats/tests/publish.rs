//! The import publisher (#52 item 3) against a real nats-server: runs published interleaved
//! with a window of acks in flight are stored gapless and in seq order, each byte for byte;
//! a run's events continue after what the stream holds of it (an append); an event that does
//! not follow the run's last stored one (a gap, another writer) is refused naming the run,
//! and everything acknowledged before stays.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::Bytes;
use transcript_domain::{
    EventDraft, Payload, PreEncoded, RunId, RunIdGenerator, SequentialRunIds, StepPayload,
    Timestamp,
};
use transcript_nats::{PipelinedPublisher, StreamOptions};

/// Event `seq` of `run`: a transcript line, as an import writes it.
fn line(run: RunId, seq: u64) -> Bytes {
    let draft = EventDraft::new(
        "agent",
        0,
        Payload::StepStarted(StepPayload::new(format!("step {seq}"), "agent")),
    );
    let mut out = Vec::new();
    PreEncoded::new(run, None, &draft)
        .unwrap()
        .write_line(seq, Timestamp::UNIX_EPOCH, &mut out);
    Bytes::from(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_runs_are_stored_gapless_in_order_and_appends_continue_them() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let ids = SequentialRunIds::with_prefix(0x5075);
    let runs: Vec<RunId> = (0..3).map(|_| ids.next_run_id()).collect();
    // A window of 7: many more events than acks in flight.
    let mut publisher = PipelinedPublisher::new(store.clone(), 7);
    for seq in 1..=300 {
        for run in &runs {
            publisher.publish(*run, seq, line(*run, seq)).await.unwrap();
        }
    }
    let done = publisher.finish().await.unwrap();
    assert_eq!(done.events, 900);
    // A second import appends to the first run.
    let mut publisher = PipelinedPublisher::new(store.clone(), 7);
    for seq in 301..=350 {
        publisher
            .publish(runs[0], seq, line(runs[0], seq))
            .await
            .unwrap();
    }
    publisher.finish().await.unwrap();
    for (run, last) in runs.iter().zip([350, 300, 300]) {
        let stored = store.run_lines(*run).await.unwrap();
        let expected: Vec<Bytes> = (1..=last).map(|seq| line(*run, seq)).collect();
        assert_eq!(stored, expected, "run {run}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_that_does_not_follow_the_stored_run_is_refused_naming_it() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let run = SequentialRunIds::with_prefix(0x6170).next_run_id();
    let mut publisher = PipelinedPublisher::new(store.clone(), 4);
    for seq in 1..=20 {
        publisher.publish(run, seq, line(run, seq)).await.unwrap();
    }
    publisher.finish().await.unwrap();
    // A publisher that would leave a gap (event 22 after 20), and one that would write the
    // run's events again from 1 (a second writer): both refused, naming the run.
    for first in [22, 1] {
        let mut publisher = PipelinedPublisher::new(store.clone(), 4);
        let e = publisher
            .publish(run, first, line(run, first))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(&run.to_string()), "{e}");
        assert!(e.contains("next event is 21"), "{e}");
        assert_eq!(publisher.acknowledged().events, 0);
    }
    let stored = store.run_lines(run).await.unwrap();
    assert_eq!(
        stored.len(),
        20,
        "nothing acknowledged is lost, nothing added"
    );
}
