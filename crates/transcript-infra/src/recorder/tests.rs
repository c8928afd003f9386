//! The recorder with a fault-injecting sink: failed and short writes,
//! failed truncates, failed and blocking syncs.

use std::io;
use std::sync::Mutex;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use transcript_domain::{
    EventDraft, ManualClock, Payload, RecordError, Recorder, RunIdGenerator, SequentialRunIds,
    StepPayload, Timestamp,
};

use super::*;
use crate::sink::{FileSink, Sink};

/// Failures to inject, consumed as they trigger.
#[derive(Default)]
struct Faults {
    /// Next write: write only this many bytes, then fail the call after.
    short_then_enospc: Option<usize>,
    /// Fail the next N writes outright.
    fail_writes: u32,
    /// Fail the next N syncs.
    fail_syncs: u32,
    /// Fail the next N truncates.
    fail_truncates: u32,
    pending_enospc: bool,
    /// Syncs attempted (failed ones included).
    syncs: u64,
    /// Told about every sync and whether it worked.
    on_sync: Option<std_mpsc::Sender<bool>>,
    /// The next sync tells `entered` it started, then blocks until
    /// `release` receives (or fails after a generous timeout, so a test
    /// that cannot release it fails instead of hanging).
    gate: Option<(Arc<tokio::sync::Notify>, std_mpsc::Receiver<()>)>,
}

struct FaultySink {
    inner: FileSink,
    faults: Arc<Mutex<Faults>>,
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(28)
}

impl Sink for FaultySink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut f = self.faults.lock().unwrap();
        if f.pending_enospc {
            f.pending_enospc = false;
            return Err(enospc());
        }
        if f.fail_writes > 0 {
            f.fail_writes -= 1;
            return Err(enospc());
        }
        if let Some(n) = f.short_then_enospc.take() {
            f.pending_enospc = true;
            return self.inner.write(&buf[..n.min(buf.len())]);
        }
        self.inner.write(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let gate = self.faults.lock().unwrap().gate.take();
        if let Some((entered, release)) = gate {
            entered.notify_one();
            release
                .recv_timeout(Duration::from_secs(60))
                .map_err(|_| io::Error::other("nobody released the blocked sync"))?;
        }
        let mut f = self.faults.lock().unwrap();
        f.syncs += 1;
        let result = if f.fail_syncs > 0 {
            f.fail_syncs -= 1;
            Err(io::Error::other("injected EIO"))
        } else {
            self.inner.sync_data()
        };
        if let Some(tx) = &f.on_sync {
            let _ = tx.send(result.is_ok());
        }
        result
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut f = self.faults.lock().unwrap();
        if f.fail_truncates > 0 {
            f.fail_truncates -= 1;
            return Err(io::Error::other("injected truncate failure"));
        }
        self.inner.truncate(len)
    }
}

fn open_faulty(
    dir: &std::path::Path,
    durability: Durability,
) -> (JsonlRecorder, Arc<Mutex<Faults>>) {
    let faults = Arc::new(Mutex::new(Faults::default()));
    let f2 = Arc::clone(&faults);
    let rec = JsonlRecorder::builder(dir, SequentialRunIds::new().next_run_id())
        .clock(Arc::new(ManualClock::stepping(Timestamp::UNIX_EPOCH, 1)))
        .durability(durability)
        .open_with(OpenMode::New, move |inner| {
            Box::new(FaultySink { inner, faults: f2 })
        })
        .unwrap();
    (rec, faults)
}

fn draft(name: &str) -> EventDraft {
    EventDraft::new(
        name,
        0,
        Payload::StepStarted(StepPayload::new(name, "agent")),
    )
}

fn file_seqs(rec: &JsonlRecorder) -> Vec<u64> {
    crate::reader::TranscriptReader::open(rec.path())
        .unwrap()
        .map(|item| match item.unwrap() {
            crate::ReadItem::Event(e) => e.event.seq,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn short_write_then_disk_full_is_cut_back_and_seq_stays_gapless() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::None);
    assert_eq!(rec.record(draft("a")).await.unwrap(), 1);
    let acked = rec.acknowledged_len();
    faults.lock().unwrap().short_then_enospc = Some(10);
    let err = rec.record(draft("b")).await.unwrap_err();
    assert!(
        matches!(&err, RecordError::Storage { source: Some(e), .. } if e.raw_os_error() == Some(28)),
        "{err:?}"
    );
    // The OS cause reaches whoever prints the error (issue 17).
    assert!(
        err.to_string()
            .ends_with("write failed: No space left on device (os error 28)"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(rec.path()).unwrap().len(), acked);
    assert_eq!(rec.record(draft("c")).await.unwrap(), 2);
    rec.close().await.unwrap();
    assert_eq!(file_seqs(&rec), [1, 2]);
}

#[tokio::test]
async fn failed_write_and_failed_cut_back_are_repaired_before_the_next_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::None);
    rec.record(draft("a")).await.unwrap();
    {
        let mut f = faults.lock().unwrap();
        f.short_then_enospc = Some(5);
        f.fail_truncates = 1;
    }
    assert!(rec.record(draft("b")).await.is_err());
    // The partial line is still there: the repair is pending.
    assert!(std::fs::metadata(rec.path()).unwrap().len() > rec.acknowledged_len());
    // The repair fails once more: the record fails, nothing is written.
    faults.lock().unwrap().fail_truncates = 1;
    let err = rec.record(draft("c")).await.unwrap_err();
    assert!(
        err.to_string()
            .ends_with("cannot cut a failed write back to the last acknowledged line: injected truncate failure"),
        "{err}"
    );
    // Now it succeeds, at seq 2.
    assert_eq!(rec.record(draft("d")).await.unwrap(), 2);
    rec.close().await.unwrap();
    assert_eq!(file_seqs(&rec), [1, 2]);
}

#[tokio::test]
async fn failed_sync_under_always_is_not_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::Always);
    rec.record(draft("a")).await.unwrap();
    let mut sub = rec.subscribe_jsonl(None).unwrap();
    faults.lock().unwrap().fail_syncs = 1;
    let err = rec.record(draft("b")).await.unwrap_err();
    assert!(
        err.to_string().ends_with("fdatasync failed: injected EIO"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(rec.path()).unwrap().len(),
        rec.acknowledged_len()
    );
    assert_eq!(rec.record(draft("c")).await.unwrap(), 2);
    rec.close().await.unwrap();
    assert_eq!(file_seqs(&rec), [1, 2]);
    // The subscriber saw only the acknowledged event.
    let ev = transcript_domain::Subscription::next(&mut sub)
        .await
        .unwrap();
    assert_eq!((ev.seq, ev.path.as_str()), (2, "c"));
    assert!(
        transcript_domain::Subscription::next(&mut sub)
            .await
            .is_none()
    );
}

/// A write failure fails every record of its batch, not only the first:
/// three records are queued while the writer thread is held in the sync of
/// the record before them, so they form one batch, and its write fails.
#[test]
fn a_failed_batch_fails_every_record_in_it_and_consumes_no_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::Always);
    let entered = Arc::new(tokio::sync::Notify::new());
    let (release, gate) = std_mpsc::channel();
    faults.lock().unwrap().gate = Some((Arc::clone(&entered), gate));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut first = Box::pin(rec.record(draft("a")));
        assert!(poll_once(first.as_mut()).await.is_pending());
        // The writer thread is inside the sync of "a".
        entered.notified().await;
        let mut batch = Vec::new();
        for name in ["b", "c", "d"] {
            let mut fut = Box::pin(rec.record(draft(name)));
            assert!(poll_once(fut.as_mut()).await.is_pending());
            batch.push(fut);
        }
        faults.lock().unwrap().fail_writes = 1;
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), 1);
        for fut in batch {
            let err = fut.await.unwrap_err();
            assert!(err.to_string().ends_with("(os error 28)"), "{err}");
        }
        // One batch for "a", one for the three: it really was one batch.
        let stats = rec.write_stats();
        assert_eq!((stats.batches, stats.entries), (2, 4), "{stats:?}");
        assert_eq!(rec.record(draft("e")).await.unwrap(), 2);
        rec.close().await.unwrap();
    });
    assert_eq!(file_seqs(&rec), [1, 2]);
}

/// Polls `fut` once: a record polled once is queued.
async fn poll_once<F: std::future::Future + ?Sized>(
    fut: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    let mut fut = Some(fut);
    std::future::poll_fn(move |cx| std::task::Poll::Ready(fut.take().unwrap().poll(cx))).await
}

#[tokio::test]
async fn close_reports_a_failed_final_sync_and_still_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::None);
    rec.record(draft("a")).await.unwrap();
    faults.lock().unwrap().fail_syncs = 1;
    assert!(rec.close().await.is_err());
    assert!(matches!(
        rec.record(draft("b")).await,
        Err(RecordError::Closed)
    ));
    rec.close().await.unwrap();
}

/// The Interval policy syncs in the background: the sink counts syncs
/// before close (close's own sync comes after).
#[tokio::test]
async fn interval_policy_flushes_in_the_background_and_stops_on_close() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::Interval(Duration::from_millis(5)));
    let (tx, synced) = std_mpsc::channel();
    faults.lock().unwrap().on_sync = Some(tx);
    for i in 0..10 {
        assert_eq!(rec.record(draft("a")).await.unwrap(), i + 1);
    }
    assert!(synced.recv_timeout(Duration::from_secs(60)).unwrap());
    assert!(faults.lock().unwrap().syncs >= 1);
    rec.close().await.unwrap();
    // The descriptor is gone: the run can be reopened.
    let again = JsonlRecorder::builder(tmp.path(), rec.run_id())
        .resume()
        .unwrap();
    assert_eq!(again.next_seq(), 11);
}

/// Item 11: a failed background sync is retried, counted, and reported on
/// the next record (which is not written); then recording goes on.
#[tokio::test]
async fn a_failed_interval_sync_fails_the_next_record_and_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::Interval(Duration::ZERO));
    let (tx, synced) = std_mpsc::channel();
    {
        let mut f = faults.lock().unwrap();
        f.on_sync = Some(tx);
        f.fail_syncs = 1;
    }
    rec.record(draft("a")).await.unwrap();
    // The first background sync fails, the retry succeeds.
    assert!(!synced.recv_timeout(Duration::from_secs(60)).unwrap());
    assert!(synced.recv_timeout(Duration::from_secs(60)).unwrap());
    assert_eq!(rec.write_stats().sync_failures, 1);
    // Clean data: no further syncs until something new is written.
    assert!(synced.try_recv().is_err());
    let err = rec.record(draft("b")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("earlier background fdatasync failed"),
        "{err}"
    );
    assert_eq!(rec.record(draft("c")).await.unwrap(), 2);
    assert!(synced.recv_timeout(Duration::from_secs(60)).unwrap());
    rec.close().await.unwrap();
    assert_eq!(file_seqs(&rec), [1, 2]);
    assert_eq!(
        faults.lock().unwrap().syncs,
        4,
        "2 background, 1 retry, 1 at close"
    );
}

/// Under `Always` the sync runs on the writer thread: a current-thread
/// runtime keeps running other tasks while it blocks. The sync only
/// completes once another task on that same runtime has run; if the sync
/// blocked the runtime, it would time out and the record would fail.
#[test]
fn a_blocked_sync_under_always_does_not_block_a_current_thread_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::Always);
    let entered = Arc::new(tokio::sync::Notify::new());
    let (release, gate) = std_mpsc::channel();
    faults.lock().unwrap().gate = Some((Arc::clone(&entered), gate));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let seq = rt.block_on(async {
        let other = tokio::spawn(async move {
            entered.notified().await;
            release.send(()).unwrap();
        });
        let seq = rec.record(draft("a")).await;
        other.await.unwrap();
        seq
    });
    assert_eq!(seq.unwrap(), 1);
    rt.block_on(rec.close()).unwrap();
    assert_eq!(file_seqs(&rec), [1]);
}

/// Closing never blocks the runtime either: it awaits the writer thread.
#[test]
fn close_under_a_blocked_sync_lets_the_runtime_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, faults) = open_faulty(tmp.path(), Durability::None);
    let entered = Arc::new(tokio::sync::Notify::new());
    let (release, gate) = std_mpsc::channel();
    faults.lock().unwrap().gate = Some((Arc::clone(&entered), gate));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        rec.record(draft("a")).await.unwrap();
        let other = tokio::spawn(async move {
            entered.notified().await;
            release.send(()).unwrap();
        });
        rec.close().await.unwrap();
        other.await.unwrap();
    });
    assert!(matches!(
        rt.block_on(rec.record(draft("b"))),
        Err(RecordError::Closed)
    ));
}

#[tokio::test]
async fn subscribers_and_the_file_agree_on_a_non_canonical_draft() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = JsonlRecorder::builder(tmp.path(), SequentialRunIds::new().next_run_id())
        .open()
        .unwrap();
    let mut sub = rec.subscribe_jsonl(None).unwrap();
    let mut step = StepPayload::new("s", "agent");
    step.error = Some(String::new());
    rec.record(EventDraft::new("s", 0, Payload::StepCompleted(step)))
        .await
        .unwrap();
    let live = sub.next().await.unwrap();
    assert_eq!(live.payload.as_step().unwrap().error, None);
    let text = std::fs::read_to_string(rec.path()).unwrap();
    assert!(!text.contains("\"error\""), "{text}");
    let stored = transcript_domain::decode_str(&text)
        .unwrap()
        .event
        .to_event()
        .unwrap();
    assert_eq!(stored, *live);
    rec.close().await.unwrap();
}
