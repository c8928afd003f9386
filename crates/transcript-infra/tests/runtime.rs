//! The recorder and the async runtime: dropping never blocks a worker, the
//! record queue is bounded, and a panic on the writer thread reaches every
//! caller. The writer thread is held inside a test `Clock` (it reads the
//! clock once per batch) that only the test releases.
#![allow(clippy::unwrap_used)]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use common::*;
use transcript_domain::{
    Clock, EventDraft, Fidelity, Payload, RawJson, RecordError, Recorder, Timestamp, ToolPayload,
};
use transcript_infra::{JsonlRecorder, JsonlRecorderFactory};

/// How long a held clock waits for its release before it gives up (then
/// the test fails: nobody could release it).
const GIVE_UP: Duration = Duration::from_secs(10);

/// A clock whose `hold_at`-th read (1-based) blocks until released, and
/// whose `panic_at`-th read panics (after the hold, if both).
struct TestClock {
    reads: AtomicU64,
    hold_at: u64,
    panic_at: u64,
    entered: tokio::sync::Notify,
    release: Mutex<Option<std_mpsc::Receiver<()>>>,
    released: AtomicBool,
}

impl TestClock {
    fn new(hold_at: u64, panic_at: u64) -> (Arc<Self>, std_mpsc::Sender<()>) {
        let (tx, rx) = std_mpsc::channel();
        let clock = Arc::new(Self {
            reads: AtomicU64::new(0),
            hold_at,
            panic_at,
            entered: tokio::sync::Notify::new(),
            release: Mutex::new(Some(rx)),
            released: AtomicBool::new(false),
        });
        (clock, tx)
    }

    /// Released by the test, not given up.
    fn released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        let n = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.hold_at {
            let gate = self.release.lock().unwrap().take().unwrap();
            self.entered.notify_one();
            self.released
                .store(gate.recv_timeout(GIVE_UP).is_ok(), Ordering::SeqCst);
        }
        if n == self.panic_at {
            panic!("clock exploded");
        }
        Timestamp::saturating_from_unix_millis(1_780_000_000_000 + n as i64)
    }
}

/// Polls `fut` once: a record polled once is queued (or waits for room).
async fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    let mut fut = Some(fut);
    std::future::poll_fn(move |cx| Poll::Ready(fut.take().unwrap().poll(cx))).await
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Item 8: dropping the last handle while the writer thread is busy does
/// not block the worker that drops it (before, `Drop` joined the thread);
/// the file is still released, and a new open of the run in this process
/// waits for that instead of failing as locked.
#[test]
fn dropping_the_last_handle_never_blocks_the_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(1);
    let (clock, release) = TestClock::new(1, 0);
    let rec = JsonlRecorder::builder(tmp.path(), run)
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .open()
        .unwrap();
    let rt = current_thread();
    rt.block_on(async {
        let mut queued = Box::pin(rec.record(step("a")));
        assert!(poll_once(queued.as_mut()).await.is_pending());
        // The writer thread holds "a" inside the clock.
        clock.entered.notified().await;
        let releaser = tokio::spawn(async move { release.send(()).unwrap() });
        drop(queued);
        drop(rec);
        releaser.await.unwrap();
    });
    // The queued record was written and the file released (this open
    // waits for the release).
    let again = JsonlRecorderFactory::new(tmp.path())
        .with_clock(common::clock())
        .resume(run, None)
        .unwrap();
    assert!(clock.released(), "dropping the recorder blocked the worker");
    assert_eq!(again.next_seq(), 2);
    rt.block_on(again.close()).unwrap();
    assert_eq!(seqs(again.path()), [1]);
}

/// A tool call whose encoded line is a little over `size` bytes.
fn big(i: u64, size: usize) -> EventDraft {
    EventDraft::new(
        "agent",
        0,
        Payload::ToolCall(ToolPayload::call(
            "bash",
            format!("call-{i}"),
            RawJson::from_value(&serde_json::json!({"pad": "x".repeat(size)})).unwrap(),
            Fidelity::Router,
        )),
    )
}

/// Item 9: the record queue is bounded. While the writer thread is stuck,
/// records are queued until the bound; the next one waits for room (and is
/// not queued: a caller that gives up on it leaves nothing behind), and one
/// that keeps waiting is written once there is room.
#[test]
fn the_record_queue_is_bounded_and_a_record_waiting_for_room_is_not_queued() {
    const SIZE: usize = 4000;
    let tmp = tempfile::tempdir().unwrap();
    let (clock, release) = TestClock::new(1, 0);
    let rec = JsonlRecorder::builder(tmp.path(), run_id(2))
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        // Room for three records (each a little over SIZE bytes), not four.
        .max_queued_bytes(3 * SIZE + SIZE / 2)
        .open()
        .unwrap();
    let rt = current_thread();
    rt.block_on(async {
        let mut first = Box::pin(rec.record(big(1, SIZE)));
        assert!(poll_once(first.as_mut()).await.is_pending());
        clock.entered.notified().await;
        // The writer holds record 1; two more fit.
        let mut queued = Vec::new();
        for i in 2..=3 {
            let mut fut = Box::pin(rec.record(big(i, SIZE)));
            assert!(poll_once(fut.as_mut()).await.is_pending());
            queued.push(fut);
        }
        // The fourth waits for room; its caller gives up on it.
        let mut given_up = Box::pin(rec.record(big(4, SIZE)));
        assert!(poll_once(given_up.as_mut()).await.is_pending());
        drop(given_up);
        // The fifth waits for room and gets it once the writer goes on.
        let waiting = tokio::spawn({
            let rec = rec.clone();
            async move { rec.record(big(5, SIZE)).await }
        });
        tokio::task::yield_now().await;
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), 1);
        for (fut, seq) in queued.into_iter().zip(2..) {
            assert_eq!(fut.await.unwrap(), seq);
        }
        assert_eq!(waiting.await.unwrap().unwrap(), 4);
        rec.close().await.unwrap();
    });
    assert!(clock.released());
    let ids: Vec<String> = lines(rec.path())
        .iter()
        .map(|l| {
            let at = l.find("\"call_id\":\"").unwrap() + 11;
            l[at..at + l[at..].find('"').unwrap()].to_owned()
        })
        .collect();
    assert_eq!(ids, ["call-1", "call-2", "call-3", "call-5"]);
}

fn is_panic_error<T>(result: &Result<T, RecordError>) -> bool {
    match result {
        Err(e @ RecordError::Storage { .. }) => {
            let text = e.to_string();
            text.contains("writer thread panicked") && text.contains("clock exploded")
        }
        _ => false,
    }
}

/// Item 10: a panic on the writer thread (here in a user `Clock`) is an
/// error naming it for every record in flight and every later call, not
/// `Closed`; subscribers see the end.
#[test]
fn a_writer_thread_panic_reaches_every_pending_and_later_call_and_ends_subscribers() {
    let tmp = tempfile::tempdir().unwrap();
    let (clock, release) = TestClock::new(2, 2);
    let rec = JsonlRecorder::builder(tmp.path(), run_id(3))
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .open()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut live = rec.subscribe(None).await.unwrap();
        assert_eq!(rec.record(step("a")).await.unwrap(), 1);
        let mut replaying = rec.subscribe(Some(1)).await.unwrap();
        // Record "b" holds the writer in the clock; "c" and "d" are queued
        // behind it when the clock panics.
        let mut pending = vec![Box::pin(rec.record(step("b")))];
        assert!(poll_once(pending[0].as_mut()).await.is_pending());
        clock.entered.notified().await;
        for name in ["c", "d"] {
            let mut fut = Box::pin(rec.record(step(name)));
            assert!(poll_once(fut.as_mut()).await.is_pending());
            pending.push(fut);
        }
        release.send(()).unwrap();
        for fut in pending {
            let result = fut.await;
            assert!(is_panic_error(&result), "{result:?}");
        }
        let later = rec.record(step("e")).await;
        assert!(is_panic_error(&later), "{later:?}");
        let subscribe = rec.subscribe(None).await.map(|_| ());
        assert!(is_panic_error(&subscribe), "{subscribe:?}");
        let close = rec.close().await;
        assert!(is_panic_error(&close), "{close:?}");
        // Subscribers get what was written, then the end.
        for sub in [&mut live, &mut replaying] {
            let seqs = tokio::time::timeout(GIVE_UP, async {
                let mut seqs = Vec::new();
                while let Some(ev) = sub.next().await {
                    seqs.push(ev.seq);
                }
                seqs
            })
            .await
            .expect("a subscriber never saw the end");
            assert_eq!(seqs, [1]);
        }
    });
    assert!(clock.released());
    assert_eq!(seqs(rec.path()), [1]);
}
