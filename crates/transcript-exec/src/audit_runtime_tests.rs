//! No audit I/O on a runtime worker (#30 item 8): the write of an audit
//! line is held at a gate (`hook`) that only another task of the same
//! single-threaded runtime releases. Were the write done on the worker,
//! that task could not run: the gate gives up and the test fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use transcript_domain::ManualClock;

use super::*;

/// How long the gate waits for its release before it gives up.
const GIVE_UP: Duration = Duration::from_secs(10);

fn record() -> AuditRecord {
    AuditRecord {
        ts: Timestamp::saturating_from_unix_millis(0),
        run_id: RunId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
        event: AuditEvent::RunStart,
        path: String::new(),
        iteration: 0,
        name: "w".into(),
        kind: "workflow".into(),
        status: None,
        error: None,
        child_run_id: None,
    }
}

#[test]
#[allow(clippy::unwrap_used)]
fn an_audit_line_is_written_off_the_runtime_worker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let entered = Arc::new(tokio::sync::Notify::new());
    let released = Arc::new(AtomicBool::new(false));
    let (release, gate) = std_mpsc::channel::<()>();
    let gate = Mutex::new(Some(gate));
    let (e, r) = (Arc::clone(&entered), Arc::clone(&released));
    hook::install(
        dir.path(),
        Arc::new(move || {
            let Some(gate) = gate.lock().unwrap().take() else {
                return;
            };
            e.notify_one();
            r.store(gate.recv_timeout(GIVE_UP).is_ok(), Ordering::SeqCst);
        }),
    );
    let observers = Observers {
        clock: Arc::new(ManualClock::new(Timestamp::saturating_from_unix_millis(0))),
        audit: Some(Arc::new(AuditTrail::lazy(&path))),
        display: None,
        mask: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let error = rt.block_on(async {
        let releaser = tokio::spawn(async move {
            entered.notified().await;
            let _ = release.send(());
        });
        let error = observers.audit(record()).await;
        releaser.await.unwrap();
        error
    });
    assert!(
        released.load(Ordering::SeqCst),
        "the audit write held the only runtime worker: the releasing task never ran"
    );
    assert_eq!(error, None);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
}
