//! An import killed part way (#59 item 4), against a real nats-server: the runs it left
//! pending (`pending.<run>` in the runs index, their lease gone) are rolled back by the next
//! import before it stages anything: a new run is removed, an appended one cut back to what it
//! held before; a run whose lease is still held (an import publishing now) is left alone.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use transcript_domain::{
    EventDraft, Payload, PreEncoded, RunId, RunIdGenerator, SequentialRunIds, StepPayload,
    Timestamp,
};
use transcript_nats::{NatsStore, PENDING_PREFIX, PipelinedPublisher, StreamOptions};

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

async fn publish(store: &NatsStore, run: RunId, seqs: std::ops::RangeInclusive<u64>) {
    let mut publisher = PipelinedPublisher::new(store.clone(), 8);
    for seq in seqs {
        publisher.publish(run, seq, line(run, seq)).await.unwrap();
    }
    publisher.finish().await.unwrap();
}

/// What a killed import leaves: `run` marked pending after `after`.
async fn mark(store: &NatsStore, run: RunId, after: u64) {
    let bucket = store
        .jetstream()
        .get_key_value(format!("{}_RUNS", store.url().stream))
        .await
        .unwrap();
    bucket
        .put(format!("{PENDING_PREFIX}{run}"), after.to_string().into())
        .await
        .unwrap();
}

async fn last_seq(store: &NatsStore, run: RunId) -> Option<u64> {
    let (line, _) = store.last_message(run).await.unwrap()?;
    Some(transcript_domain::decode_line(&line).unwrap().event.seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_imports_runs_are_rolled_back_and_a_live_ones_left_alone() {
    let Some(server) = common::server() else {
        return;
    };
    let options = StreamOptions {
        lease: Duration::from_secs(1),
        ..StreamOptions::default()
    };
    let store = common::store(&server.url(), options).await;
    let ids = SequentialRunIds::with_prefix(0x9e4d);
    let (new, grown, kept, busy) = (
        ids.next_run_id(),
        ids.next_run_id(),
        ids.next_run_id(),
        ids.next_run_id(),
    );
    // A new run half published; a grown one with two lines of its own and three half
    // appended; one complete and not pending; one another import is publishing (its lease
    // renewed as long as the test runs).
    publish(&store, new, 1..=5).await;
    mark(&store, new, 0).await;
    publish(&store, grown, 1..=2).await;
    mark(&store, grown, 2).await;
    publish(&store, grown, 3..=5).await;
    publish(&store, kept, 1..=4).await;
    publish(&store, busy, 1..=3).await;
    mark(&store, busy, 0).await;
    store.renew_lease(busy).await.unwrap();
    let renewing = {
        let store = store.clone();
        tokio::spawn(async move {
            loop {
                store.renew_lease(busy).await.unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let mut recovered = transcript_nats::recover_pending(&store).await.unwrap();
    recovered.sort();
    renewing.abort();
    assert_eq!(recovered, vec![new, grown]);
    assert_eq!(last_seq(&store, new).await, None, "a new run is removed");
    assert_eq!(
        last_seq(&store, grown).await,
        Some(2),
        "an appended run is cut back"
    );
    assert_eq!(last_seq(&store, kept).await, Some(4));
    assert_eq!(
        last_seq(&store, busy).await,
        Some(3),
        "a live import's run is left"
    );
    // Nothing pending is left of the two; the busy one is still marked.
    let bucket = store
        .jetstream()
        .get_key_value(format!("{}_RUNS", store.url().stream))
        .await
        .unwrap();
    for (run, marked) in [(new, false), (grown, false), (busy, true)] {
        let key = format!("{PENDING_PREFIX}{run}");
        assert_eq!(bucket.get(key).await.unwrap().is_some(), marked, "{run}");
    }
}
