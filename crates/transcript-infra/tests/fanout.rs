//! Live fan-out and replay-then-live.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use tokio::sync::mpsc;
use transcript_domain::{EventDraft, Payload, RecordError, Recorder, StepPayload, Subscription};
use transcript_infra::JsonlRecorder;

fn rt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .unwrap()
}

/// SC-005: a subscriber consuming at 10% of the producer's rate over 10k
/// events: all 10k on disk, no deadlock, drops counted and equal to what
/// the subscriber missed.
#[test]
fn slow_subscriber_at_ten_percent_drops_exactly_what_it_misses() {
    const N: u64 = 10_000;
    let tmp = tempfile::tempdir().unwrap();
    let rec = Arc::new(builder(tmp.path(), run_id(1)).open().unwrap());
    rt(2).block_on(async {
        let mut sub = rec.subscribe(None).await.unwrap();
        // The producer grants the subscriber one read per 10 records.
        let (grant, mut granted) = mpsc::unbounded_channel::<()>();
        let consumer = tokio::spawn(async move {
            let mut got = Vec::new();
            while granted.recv().await.is_some() {
                got.push(sub.next().await.unwrap().seq);
            }
            // Producer done: drain what is buffered, until the recorder closes.
            while let Some(ev) = sub.next().await {
                got.push(ev.seq);
            }
            (got, sub.dropped())
        });
        for i in 0..N {
            rec.record(tool(i)).await.unwrap();
            if i % 10 == 9 {
                grant.send(()).unwrap();
            }
        }
        drop(grant);
        let stats = rec.fanout_stats();
        rec.close().await.unwrap();
        let (got, dropped) = consumer.await.unwrap();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "delivered in seq order"
        );
        assert_eq!(got.len() as u64 + dropped, N);
        assert!(dropped > 0);
        assert_eq!(stats.subscribers, 1);
        assert_eq!(stats.dropped_total, dropped);
        assert_eq!(stats.per_subscriber[0].dropped, dropped);
        // What it missed is exactly the set of seqs it did not get.
        let missed = (1..=N).filter(|s| got.binary_search(s).is_err()).count() as u64;
        assert_eq!(missed, dropped);
    });
    assert_eq!(seqs(rec.path()), (1..=N).collect::<Vec<_>>());
}

/// SC-006: what a subscriber receives re-encodes to the stored bytes.
#[tokio::test]
async fn subscribers_receive_exactly_the_stored_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(2))
        .parent_run_id(Some(run_id(3)))
        .open()
        .unwrap();
    let mut live = rec.subscribe(None).await.unwrap();
    for i in 0..50 {
        let draft = if i % 2 == 0 {
            tool(i)
        } else {
            EventDraft::new(
                "s.t",
                0,
                Payload::CallWorkflowStarted(StepPayload::new("s.t", "call_workflow")),
            )
            .with_child(run_id(4))
        };
        rec.record(draft).await.unwrap();
    }
    let mut replay = rec.subscribe(Some(1)).await.unwrap();
    rec.close().await.unwrap();
    let stored = std::fs::read_to_string(rec.path()).unwrap();
    for sub in [&mut live, &mut replay] {
        let mut text = String::new();
        while let Some(ev) = sub.next().await {
            text.push_str(&ev.to_line().unwrap());
        }
        assert_eq!(text, stored);
    }
}

/// Replay then live under concurrent records: 1..N exactly once, in order,
/// for subscribers joining at different points with tiny buffers (so they
/// fall behind and must re-read the file instead of dropping).
#[test]
fn replay_then_live_has_no_gap_and_no_duplicate_at_the_seam() {
    const PRODUCERS: u64 = 4;
    const PER: u64 = 2_500;
    const N: u64 = PRODUCERS * PER;
    let tmp = tempfile::tempdir().unwrap();
    let rec = Arc::new(
        builder(tmp.path(), run_id(5))
            .subscriber_buffer(4)
            .open()
            .unwrap(),
    );
    rt(3).block_on(async {
        // Producers report progress; subscribers join at chosen counts.
        let (progress, mut progressed) = mpsc::unbounded_channel::<u64>();
        let mut producers = Vec::new();
        for p in 0..PRODUCERS {
            let rec = Arc::clone(&rec);
            let progress = progress.clone();
            producers.push(tokio::spawn(async move {
                for i in 0..PER {
                    let seq = rec.record(tool(p * PER + i)).await.unwrap();
                    let _ = progress.send(seq);
                }
            }));
        }
        drop(progress);
        let mut consumers = Vec::new();
        let mut joins = [(1u64, 1u64), (500, 1), (3000, 2000), (6000, 5999)]
            .into_iter()
            .peekable();
        while let Some(seq) = progressed.recv().await {
            while let Some(&(at, from)) = joins.peek() {
                if seq < at {
                    break;
                }
                joins.next();
                let mut sub = rec.subscribe(Some(from)).await.unwrap();
                consumers.push(tokio::spawn(async move {
                    let mut expected = from;
                    while expected <= N {
                        let ev = sub.next().await.expect("subscription ended early");
                        assert_eq!(ev.seq, expected, "gap or duplicate at the seam");
                        expected += 1;
                        if expected % 7 == 0 {
                            // Consume slower than the producers now and then.
                            tokio::task::yield_now().await;
                        }
                    }
                    assert_eq!(sub.dropped(), 0);
                    from
                }));
            }
        }
        for p in producers {
            p.await.unwrap();
        }
        assert_eq!(consumers.len(), 4);
        for c in consumers {
            c.await.unwrap();
        }
        rec.close().await.unwrap();
    });
}

#[tokio::test]
async fn replay_rejects_seqs_that_do_not_exist_yet() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(6)).open().unwrap();
    rec.record(step("a")).await.unwrap();
    assert!(matches!(
        rec.subscribe(Some(0)).await,
        Err(RecordError::Replay { requested: 0, .. })
    ));
    assert!(matches!(
        rec.subscribe(Some(3)).await,
        Err(RecordError::Replay { requested: 3, .. })
    ));
    // The next seq is fine: pure live.
    let mut sub = rec.subscribe(Some(2)).await.unwrap();
    rec.record(step("b")).await.unwrap();
    assert_eq!(sub.next().await.unwrap().seq, 2);
    rec.close().await.unwrap();
    assert!(sub.next().await.is_none());
}

#[tokio::test]
async fn replay_of_a_resumed_file_reads_earlier_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(7);
    let rec = builder(tmp.path(), run).open().unwrap();
    for _ in 0..3 {
        rec.record(step("a")).await.unwrap();
    }
    rec.close().await.unwrap();
    let rec = builder(tmp.path(), run).resume().unwrap();
    let mut sub = rec.subscribe(Some(2)).await.unwrap();
    rec.record(step("b")).await.unwrap();
    rec.close().await.unwrap();
    let mut got = Vec::new();
    while let Some(ev) = sub.next().await {
        got.push(ev.seq);
    }
    assert_eq!(got, [2, 3, 4]);
}

#[tokio::test]
async fn subscriber_close_is_idempotent_and_removes_it_from_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(8))
        .subscriber_buffer(1)
        .open()
        .unwrap();
    let mut a = rec.subscribe_jsonl(None).unwrap();
    let mut b = rec.subscribe_jsonl(None).unwrap();
    rec.record(step("1")).await.unwrap();
    rec.record(step("2")).await.unwrap(); // dropped for both (buffer 1)
    assert_eq!(rec.fanout_stats().dropped_total, 2);
    a.close();
    a.close();
    assert!(a.next().await.is_none());
    rec.record(step("3")).await.unwrap();
    let stats = rec.fanout_stats();
    assert_eq!(stats.subscribers, 1);
    assert_eq!(stats.per_subscriber[0].id, b.id());
    // Drops of a closed subscriber still count in the total.
    assert_eq!(stats.dropped_total, 3);
    assert_eq!(b.next().await.unwrap().seq, 1);
    assert_eq!(b.dropped(), 2);
    rec.close().await.unwrap();
    assert!(b.next().await.is_none());
    b.close();
}

/// Concurrent close / subscribe / record: no panic, no hang; every record
/// either got a seq or `Closed`; the file is gapless; subscriptions end.
#[test]
fn close_races_with_records_and_subscribes() {
    for trial in 0..20u32 {
        let tmp = tempfile::tempdir().unwrap();
        let rec: Arc<JsonlRecorder> =
            Arc::new(builder(tmp.path(), run_id(100 + trial)).open().unwrap());
        let ok = rt(2).block_on(async {
            let barrier = Arc::new(tokio::sync::Barrier::new(7));
            let mut tasks = Vec::new();
            for p in 0..4u64 {
                let (rec, barrier) = (Arc::clone(&rec), Arc::clone(&barrier));
                tasks.push(tokio::spawn(async move {
                    barrier.wait().await;
                    let mut ok = 0u64;
                    for i in 0..200 {
                        match rec.record(tool(p * 1000 + i)).await {
                            Ok(_) => ok += 1,
                            Err(RecordError::Closed) => break,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    ok
                }));
            }
            for _ in 0..2 {
                let (rec, barrier) = (Arc::clone(&rec), Arc::clone(&barrier));
                tasks.push(tokio::spawn(async move {
                    barrier.wait().await;
                    let mut n = 0;
                    for from in [None, Some(1)] {
                        match rec.subscribe(from).await {
                            Ok(mut sub) => {
                                while sub.next().await.is_some() {
                                    n += 1;
                                }
                            }
                            Err(RecordError::Closed) | Err(RecordError::Replay { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                    let _ = n;
                    0
                }));
            }
            let closer = {
                let (rec, barrier) = (Arc::clone(&rec), Arc::clone(&barrier));
                tokio::spawn(async move {
                    barrier.wait().await;
                    tokio::task::yield_now().await;
                    let (a, b) = tokio::join!(rec.close(), rec.close());
                    a.unwrap();
                    b.unwrap();
                })
            };
            let mut ok = 0;
            for t in tasks {
                ok += t.await.unwrap();
            }
            closer.await.unwrap();
            rec.close().await.unwrap();
            ok
        });
        let s = seqs(rec.path());
        assert_eq!(s.len() as u64, ok, "trial {trial}");
        assert_eq!(s, (1..=ok).collect::<Vec<_>>());
    }
}

/// A replaying subscriber that has caught up switches to the live buffer;
/// when that overflows it re-reads the file; no gap, no duplicate, no drop.
#[test]
fn replaying_subscriber_goes_live_then_falls_back_to_the_file() {
    const BURSTS: u64 = 12;
    let tmp = tempfile::tempdir().unwrap();
    let rec = Arc::new(
        builder(tmp.path(), run_id(9))
            .subscriber_buffer(3)
            .open()
            .unwrap(),
    );
    rt(2).block_on(async {
        for i in 0..5 {
            rec.record(tool(i)).await.unwrap();
        }
        let mut sub = rec.subscribe_jsonl(Some(1)).unwrap();
        // Caught-up reports from the consumer, so bursts start when it is live.
        let (caught_up, mut is_caught_up) = mpsc::unbounded_channel::<u64>();
        let total = 5 + (1..=BURSTS).sum::<u64>() * 7;
        let consumer = tokio::spawn(async move {
            let mut expected = 1;
            let mut burst_end = 5;
            let mut burst = 0;
            while expected <= total {
                let ev = sub.next().await.unwrap();
                assert_eq!(ev.seq, expected);
                expected += 1;
                if ev.seq == burst_end {
                    caught_up.send(ev.seq).unwrap();
                    burst += 1;
                    burst_end += burst * 7;
                }
            }
            assert_eq!(sub.dropped(), 0);
            sub
        });
        for burst in 1..=BURSTS {
            is_caught_up.recv().await.unwrap();
            // Bursts of 7, 14, 21, ... against a buffer of 3.
            for i in 0..burst * 7 {
                rec.record(tool(1000 * burst + i)).await.unwrap();
                if i % 5 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }
        let mut sub = consumer.await.unwrap();
        rec.record(step("last")).await.unwrap();
        assert_eq!(sub.next().await.unwrap().seq, total + 1);
        rec.close().await.unwrap();
        assert!(sub.next().await.is_none());
        assert_eq!(rec.fanout_stats().dropped_total, 0);
    });
}

/// The gap path, step by step on one thread: a replaying subscriber in live
/// mode finds a live event beyond the next seq and fills the gap from the file.
#[tokio::test]
async fn replaying_subscriber_fills_a_live_gap_from_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(10))
        .subscriber_buffer(3)
        .open()
        .unwrap();
    rec.record(step("1")).await.unwrap();
    let mut sub = rec.subscribe_jsonl(Some(1)).unwrap();
    assert_eq!(sub.next().await.unwrap().seq, 1);
    // Poll once with nothing new: the file is exhausted, it parks on live.
    {
        let mut fut = std::pin::pin!(sub.next());
        let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx))).await;
        assert!(polled.is_pending());
    }
    for s in 2..=5 {
        rec.record(step(&s.to_string())).await.unwrap(); // 5 overflows the buffer
    }
    assert_eq!(sub.next().await.unwrap().seq, 2);
    rec.record(step("6")).await.unwrap(); // fits again: buffer is [3, 4, 6]
    let got: Vec<u64> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(sub.next().await.unwrap().seq);
        }
        v
    };
    assert_eq!(got, [3, 4, 5, 6]);
    rec.record(step("7")).await.unwrap();
    assert_eq!(sub.next().await.unwrap().seq, 7);
    assert_eq!(sub.dropped(), 0);
    rec.close().await.unwrap();
    assert!(sub.next().await.is_none());
}
