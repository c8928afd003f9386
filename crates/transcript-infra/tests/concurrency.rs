//! Concurrency stress: real threads, many producers, one file.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use transcript_domain::{Recorder, Timestamp};
use transcript_infra::{Durability, JsonlRecorder, SystemClock, verify_file};

/// Issue 3: 8 producers x 100k events on a multi-thread runtime: the file is
/// exactly seq 1..=800000 in order, timestamps non-decreasing.
#[test]
fn eight_producers_times_100k_give_exactly_seq_1_to_800000_in_order() {
    const PRODUCERS: u64 = 8;
    const PER: u64 = 100_000;
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    let rec = Arc::new(
        JsonlRecorder::builder(tmp.path(), run)
            .clock(Arc::new(SystemClock))
            .open()
            .unwrap(),
    );
    rt.block_on(async {
        let barrier = Arc::new(tokio::sync::Barrier::new(PRODUCERS as usize));
        let mut tasks = Vec::new();
        for p in 0..PRODUCERS {
            let rec = Arc::clone(&rec);
            let barrier = Arc::clone(&barrier);
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let mut last = 0;
                for i in 0..PER {
                    let seq = rec.record(tool(p * PER + i)).await.unwrap();
                    // Each producer sees its own seqs increase.
                    assert!(seq > last);
                    last = seq;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        rec.close().await.unwrap();
    });
    let bytes = std::fs::read(rec.path()).unwrap();
    let mut expected = 1u64;
    let mut last_ts = Timestamp::MIN;
    let mut seen_inputs = vec![false; (PRODUCERS * PER) as usize];
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let text = std::str::from_utf8(line).unwrap();
        let seq: u64 = text[7..text.find(',').unwrap()].parse().unwrap();
        assert_eq!(seq, expected);
        expected += 1;
        let ts_at = text.find("\"timestamp\":\"").unwrap() + 13;
        let ts = Timestamp::parse(&text[ts_at..ts_at + 24]).unwrap();
        assert!(ts >= last_ts, "timestamp went backwards at seq {seq}");
        last_ts = ts;
        let id_at = text.find("\"call_id\":\"call-").unwrap() + 16;
        let id_end = id_at + text[id_at..].find('"').unwrap();
        let id: usize = text[id_at..id_end].parse().unwrap();
        assert!(!seen_inputs[id], "event {id} written twice");
        seen_inputs[id] = true;
    }
    assert_eq!(expected - 1, PRODUCERS * PER);
    assert!(seen_inputs.iter().all(|s| *s));
    let report = verify_file(rec.path());
    assert!(report.is_valid(), "{report:#?}");
}

/// Group commit under `Always` with many producers: gapless, in order, and
/// the producers share batches, so syncs (one per batch under `Always`).
/// The writer thread is held in its first clock read until every producer
/// has queued its first record: those queued behind the first batch must
/// form one batch, not 31.
#[test]
fn many_producers_under_always_share_syncs_and_stay_gapless() {
    const PRODUCERS: u64 = 32;
    const PER: u64 = 20;
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (clock, entered, release) = HeldClock::new();
    let rec = Arc::new(
        builder(tmp.path(), run_id(2))
            .clock(clock)
            .durability(Durability::Always)
            .open()
            .unwrap(),
    );
    rt.block_on(async {
        let (queued_tx, mut queued) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for p in 0..PRODUCERS {
            let rec = Arc::clone(&rec);
            let queued_tx = queued_tx.clone();
            tasks.push(tokio::spawn(async move {
                let mut first = Box::pin(rec.record(tool(p * 100)));
                let early = futures_poll_once(first.as_mut()).await;
                queued_tx.send(()).unwrap();
                match early {
                    std::task::Poll::Ready(seq) => seq.unwrap(),
                    std::task::Poll::Pending => first.await.unwrap(),
                };
                for i in 1..PER {
                    rec.record(tool(p * 100 + i)).await.unwrap();
                }
            }));
        }
        entered.notified().await;
        for _ in 0..PRODUCERS {
            queued.recv().await.unwrap();
        }
        release.send(()).unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        rec.close().await.unwrap();
    });
    let total = PRODUCERS * PER;
    assert_eq!(seqs(rec.path()), (1..=total).collect::<Vec<_>>());
    let report = verify_file(rec.path());
    assert!(report.is_valid(), "{report:#?}");
    // The first batch, then at most one more for all first records: every
    // other record may be alone, but those 32 shared at most two syncs.
    let stats = rec.write_stats();
    assert_eq!(stats.entries, total);
    assert!(
        stats.batches <= total - PRODUCERS + 2,
        "producers did not share batches: {stats:?}"
    );
}

/// A clock whose first read blocks until released (or gives up after a
/// while, so a broken test fails instead of hanging).
struct HeldClock {
    first: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    entered: Arc<tokio::sync::Notify>,
}

impl HeldClock {
    fn new() -> (
        Arc<Self>,
        Arc<tokio::sync::Notify>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel();
        let entered = Arc::new(tokio::sync::Notify::new());
        let clock = Arc::new(Self {
            first: std::sync::Mutex::new(Some(rx)),
            entered: Arc::clone(&entered),
        });
        (clock, entered, tx)
    }
}

impl transcript_domain::Clock for HeldClock {
    fn now(&self) -> Timestamp {
        if let Some(gate) = self.first.lock().unwrap().take() {
            self.entered.notify_one();
            let _ = gate.recv_timeout(std::time::Duration::from_secs(10));
        }
        SystemClock.now()
    }
}

/// Cancelled callers: a dropped record future never stalls the recorder,
/// and a record that was polled once (so queued) is written anyway.
#[test]
fn dropped_record_futures_never_stall_the_recorder() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let rec = Arc::new(builder(tmp.path(), run_id(3)).open().unwrap());
    rt.block_on(async {
        let mut tasks = Vec::new();
        for p in 0..8u64 {
            let rec = Arc::clone(&rec);
            tasks.push(tokio::spawn(async move {
                let mut ok = 0u64;
                for i in 0..2000u64 {
                    let fut = rec.record(tool(p * 10_000 + i));
                    if i % 3 == 0 {
                        // Poll once, then drop: queued (or leading) and abandoned.
                        let mut fut = Box::pin(fut);
                        let _ = futures_poll_once(fut.as_mut()).await;
                        drop(fut);
                    } else {
                        fut.await.unwrap();
                        ok += 1;
                    }
                }
                ok
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        rec.close().await.unwrap();
    });
    // Every record that was polled at least once was queued, so written.
    let s = seqs(rec.path());
    assert_eq!(s, (1..=s.len() as u64).collect::<Vec<_>>());
    assert_eq!(s.len(), 8 * 2000);
    let report = verify_file(rec.path());
    assert!(report.is_valid(), "{report:#?}");
}

async fn futures_poll_once<F: std::future::Future + ?Sized>(
    fut: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    let mut fut = Some(fut);
    std::future::poll_fn(move |cx| {
        let f = fut.take().unwrap();
        std::task::Poll::Ready(f.poll(cx))
    })
    .await
}
