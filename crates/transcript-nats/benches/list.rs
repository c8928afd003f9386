//! Listing runs while many are running (#52 item 4), `cargo bench -p transcript-nats --bench
//! list` (run by `cargo xtask bench`). Plain `main`, prints one line.
//!
//! Two nats-servers (a subject belongs to one stream per server): 200 completed runs, and 200 runs of which 100 are running
//! (their lease held, their runs-index entry as a live runner keeps it) with 10,000 events
//! each in the stream. [`NatsStore::runs`] (what `transcript list` reads) is timed on both in
//! interleaved rounds; the ratio is the median of each round's. A running run's entry is what
//! `list` shows while its lease is held, so no stream message is read for it. Target: ≤ 2×.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use transcript_domain::{Fidelity, Payload, PreEncoded, RunId, RunIdGenerator, Timestamp};
use transcript_nats::testing;
use transcript_nats::{
    DEFAULT_WINDOW, IndexStatus, NatsStore, PipelinedPublisher, RunEntry, StorageUrl, StreamOptions,
};

const ROUNDS: usize = 5;
const RUNS: usize = 200;
const RUNNING: usize = 100;
const RUNNING_EVENTS: u64 = 10_000;
const COMPLETED_EVENTS: u64 = 10;
const TARGET: f64 = 2.0;

fn line(run: RunId) -> Bytes {
    let input =
        transcript_domain::RawJson::from_value(&serde_json::json!({"command": "ls"})).unwrap();
    let draft = transcript_domain::EventDraft::new(
        "agent",
        0,
        Payload::ToolCall(transcript_domain::ToolPayload::call(
            "shell",
            "call-1",
            input,
            Fidelity::Router,
        )),
    );
    let mut out = Vec::new();
    PreEncoded::new(run, None, &draft)
        .unwrap()
        .write_line(1, Timestamp::UNIX_EPOCH, &mut out);
    Bytes::from(out)
}

/// A store of `RUNS` runs, the first `running` of them running with `RUNNING_EVENTS` events;
/// returns the running ones (their leases to renew).
async fn fill(url: &str, running: usize) -> (NatsStore, Vec<RunId>) {
    let store = NatsStore::connect(&StorageUrl::parse(url).unwrap(), StreamOptions::default())
        .await
        .unwrap();
    let mut publisher = PipelinedPublisher::new(store.clone(), DEFAULT_WINDOW);
    let mut live = Vec::new();
    for i in 0..RUNS {
        let run = transcript_infra::RandomRunIds.next_run_id();
        let events = if i < running {
            RUNNING_EVENTS
        } else {
            COMPLETED_EVENTS
        };
        let line = line(run);
        for seq in 1..=events {
            publisher.publish(run, seq, line.clone()).await.unwrap();
        }
        let mut entry = RunEntry::new(run, None);
        entry.workflow = Some("bench".to_owned());
        entry.started_at = Some(Timestamp::UNIX_EPOCH);
        entry.ended_at = Some(Timestamp::UNIX_EPOCH);
        entry.events = events;
        entry.status = if i < running {
            live.push(run);
            IndexStatus::Running
        } else {
            IndexStatus::Succeeded
        };
        store.put_run(&entry).await.unwrap();
    }
    publisher.finish().await.unwrap();
    (store, live)
}

async fn time_list(store: &NatsStore, leases: &[RunId]) -> Duration {
    for run in leases {
        store.renew_lease(*run).await.unwrap();
    }
    let started = Instant::now();
    let runs = store.runs().await.unwrap();
    let took = started.elapsed();
    assert_eq!(runs.len(), RUNS);
    let running = runs
        .iter()
        .filter(|r| r.status == IndexStatus::Running)
        .count();
    assert_eq!(running, leases.len());
    took
}

fn main() {
    let (Some(server), Some(other)) = (testing::single().unwrap(), testing::single().unwrap())
    else {
        println!("skipped: nats-server not found (set TRANSCRIPT_NATS_SERVER)");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ok = runtime.block_on(async {
        let (done, _) = fill(&format!("{}/DONE", server.url()), 0).await;
        let (live, leases) = fill(&format!("{}/LIVE", other.url()), RUNNING).await;
        let (mut ratios, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let completed = time_list(&done, &[]).await;
            let running = time_list(&live, &leases).await;
            a.push(completed.as_secs_f64());
            b.push(running.as_secs_f64());
            ratios.push(running.as_secs_f64() / completed.as_secs_f64());
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let ratio = median(ratios);
        let ok = ratio <= TARGET;
        println!(
            "list     200 runs, 100 running x {RUNNING_EVENTS} events: {:.1} ms | 200 completed: {:.1} ms | running/completed {ratio:.2}x (target <= {TARGET}: {})",
            median(b) * 1e3,
            median(a) * 1e3,
            if ok { "ok" } else { "MISS" }
        );
        ok
    });
    drop((server, other));
    if !ok {
        std::process::exit(1);
    }
}
