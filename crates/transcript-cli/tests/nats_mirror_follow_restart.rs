//! `mirror --follow` rides through a graceful server restart (#44): it says so on stderr and goes on
//! from its durable consumer's ack floor, so runs recorded after the restart are mirrored too.
//! Before, it ended with exit 4 ("fetching: … Server Shutdown") at the restart.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bin, text};
use transcript_domain::{
    EventDraft, ManualClock, Payload, RecorderFactory, RunId, StepPayload, Timestamp,
};
use transcript_nats::{NatsRecorderFactory, NatsStore, StorageUrl, testing};

/// Records run `id` (two events) on `url`.
fn record(url: &str, id: RunId) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = NatsStore::connect(&StorageUrl::parse(url).unwrap(), Default::default())
                .await
                .unwrap();
            let clock = Arc::new(ManualClock::new(Timestamp::UNIX_EPOCH));
            let recorder = NatsRecorderFactory::new(store, clock)
                .create(id, None)
                .await
                .unwrap();
            let p = || StepPayload::new("fleet", "workflow");
            recorder
                .record(EventDraft::run_level(Payload::RunStarted(p())))
                .await
                .unwrap();
            recorder
                .record(EventDraft::run_level(Payload::RunCompleted(p())))
                .await
                .unwrap();
            recorder.close().await.unwrap();
        });
}

/// Waits (at most 30 s) until `dir` holds run `id`'s two lines; false past that.
fn mirrored(dir: &Path, id: RunId) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let lines = std::fs::read_to_string(dir.join(id.file_name())).unwrap_or_default();
        if lines.lines().count() == 2 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn mirror_follow_goes_on_after_a_server_restart() {
    let Some(mut server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let (first, second) = (RunId::from_bytes([1; 16]), RunId::from_bytes([2; 16]));
    record(&url, first);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mirror");
    let mut mirror = bin()
        .args(["mirror", &url, "--follow", "--to"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(mirrored(&dir, first));
    // A graceful restart (SIGTERM, as a service manager stops it): the server tells its
    // clients it shuts down.
    let pid = server.pid().unwrap().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(term.success());
    common::wait_until_exited(&pid, Duration::from_secs(30));
    server.restart().unwrap();
    record(&url, second);
    let went_on = mirrored(&dir, second);
    let exited = mirror.try_wait().unwrap();
    let _ = mirror.kill();
    let o = mirror.wait_with_output().unwrap();
    assert!(
        went_on && exited.is_none(),
        "{exited:?}: {}",
        text(&o.stderr)
    );
}
