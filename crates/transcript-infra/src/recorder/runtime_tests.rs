//! No file I/O on a runtime worker: the blocking file calls of opening a
//! run and of a replaying subscription are held at a gate (`iohook`) that
//! only another task of the same single-worker runtime releases. If the
//! call ran on the worker, that task could not run: the gate times out and
//! the test fails.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use transcript_domain::{
    EventDraft, Payload, Recorder, RecorderFactory, RunIdGenerator, SequentialRunIds, StepPayload,
};

use super::*;
use crate::JsonlRecorderFactory;
use crate::iohook::{self, Site};

/// How long a gate waits for its release before it gives up (then the
/// test fails: nobody could release it).
const GIVE_UP: Duration = Duration::from_secs(10);

/// Holds the first blocking call at `site` under `dir` until released.
struct Gate {
    entered: Arc<tokio::sync::Notify>,
    release: std_mpsc::Sender<()>,
    released: Arc<AtomicBool>,
    passed: Arc<AtomicBool>,
}

impl Gate {
    fn at(dir: &std::path::Path, site: Site) -> Self {
        let entered = Arc::new(tokio::sync::Notify::new());
        let (release, gate) = std_mpsc::channel();
        let gate = Mutex::new(Some(gate));
        let released = Arc::new(AtomicBool::new(false));
        let passed = Arc::new(AtomicBool::new(false));
        let (e, r, p) = (
            Arc::clone(&entered),
            Arc::clone(&released),
            Arc::clone(&passed),
        );
        iohook::install(
            dir,
            Arc::new(move |at| {
                if at != site {
                    return;
                }
                let Some(gate) = gate.lock().unwrap().take() else {
                    return;
                };
                e.notify_one();
                r.store(gate.recv_timeout(GIVE_UP).is_ok(), Ordering::SeqCst);
                p.store(true, Ordering::SeqCst);
            }),
        );
        Self {
            entered,
            release,
            released,
            passed,
        }
    }

    /// A task that releases the gate once a call is held at it.
    fn releaser(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (entered, release) = (Arc::clone(&self.entered), self.release.clone());
        async move {
            entered.notified().await;
            // Fails only when the gate gave up: the assertion names that.
            let _ = release.send(());
        }
    }

    /// The held call went on because another task released it (not
    /// because the gate gave up).
    fn released_by_another_task(&self) -> bool {
        self.passed.load(Ordering::SeqCst) && self.released.load(Ordering::SeqCst)
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn step(name: &str) -> EventDraft {
    EventDraft::new(
        name,
        0,
        Payload::StepStarted(StepPayload::new(name, "agent")),
    )
}

/// Item 6: `RecorderFactory::create` (mkdir, open, flock, fchmod, the
/// resume scan, the directory sync) runs off the caller's worker.
#[test]
fn create_opens_the_run_off_the_runtime_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let gate = Gate::at(tmp.path(), Site::Open);
    let factory =
        JsonlRecorderFactory::new(tmp.path().join("runs")).with_durability(Durability::Always);
    let run = SequentialRunIds::new().next_run_id();
    let rt = current_thread();
    let rec = rt.block_on(async {
        let other = tokio::spawn(gate.releaser());
        let rec = factory.create(run, None).await.unwrap();
        other.await.unwrap();
        rec
    });
    assert!(
        gate.released_by_another_task(),
        "the open blocked the worker"
    );
    assert_eq!(rt.block_on(rec.record(step("a"))).unwrap(), 1);
    rt.block_on(rec.close()).unwrap();
}

/// Item 7: a replaying subscription opens and reads the file off the
/// worker that polls it.
#[test]
fn a_replaying_subscription_reads_the_file_off_the_runtime_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = current_thread();
    let rec = JsonlRecorder::builder(tmp.path(), SequentialRunIds::new().next_run_id())
        .open()
        .unwrap();
    for name in ["a", "b"] {
        rt.block_on(rec.record(step(name))).unwrap();
    }
    let gate = Gate::at(tmp.path(), Site::Replay);
    let seqs = rt.block_on(async {
        let other = tokio::spawn(gate.releaser());
        let mut sub = Recorder::subscribe(&rec, Some(1)).await.unwrap();
        let first = sub.next().await.unwrap().seq;
        other.await.unwrap();
        let second = sub.next().await.unwrap().seq;
        rec.close().await.unwrap();
        (first, second, sub.next().await.map(|e| e.seq))
    });
    assert!(
        gate.released_by_another_task(),
        "the replay blocked the worker"
    );
    assert_eq!(seqs, (1, 2, None));
}

/// Item 7: a replaying subscription whose file access is slow does not
/// hold up recording (before, `subscribe(Some(_))` opened the file under
/// the lock every commit takes).
#[test]
fn a_slow_replay_does_not_stall_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = current_thread();
    let rec = JsonlRecorder::builder(tmp.path(), SequentialRunIds::new().next_run_id())
        .open()
        .unwrap();
    rt.block_on(rec.record(step("a"))).unwrap();
    let gate = Gate::at(tmp.path(), Site::Replay);
    let entered = Arc::clone(&gate.entered);
    let release = gate.release.clone();
    let subscriber = {
        let rec = rec.clone();
        std::thread::spawn(move || {
            current_thread().block_on(async {
                let mut sub = Recorder::subscribe(&rec, Some(1)).await.unwrap();
                let mut seqs = Vec::new();
                while let Some(ev) = sub.next().await {
                    seqs.push(ev.seq);
                }
                seqs
            })
        })
    };
    rt.block_on(async {
        entered.notified().await;
        // The replay is held at its file access: recording goes on.
        assert_eq!(rec.record(step("b")).await.unwrap(), 2);
        let _ = release.send(());
        assert_eq!(rec.record(step("c")).await.unwrap(), 3);
        rec.close().await.unwrap();
    });
    assert_eq!(subscriber.join().unwrap(), [1, 2, 3]);
    assert!(
        gate.released_by_another_task(),
        "recording waited for the replay"
    );
}
