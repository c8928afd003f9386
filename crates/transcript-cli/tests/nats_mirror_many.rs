//! `mirror` of a fleet's stream (#44): many runs interleaved (runners started and stopped
//! over days) are mirrored with a bounded number of open files, not one per run of the pass.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{bin, text};
use transcript_domain::{
    EventDraft, ManualClock, Payload, RecorderFactory, RunIdGenerator, SequentialRunIds,
    StepPayload, Timestamp,
};
use transcript_nats::{NatsRecorderFactory, NatsStore, StorageUrl, testing};

/// Runs in the stream: far more than the descriptors the mirror is given.
const RUNS: usize = 300;

/// Records `RUNS` runs of two events each, interleaved (every run starts, then every run
/// completes), as a fleet's runners do.
fn record_fleet(url: &str) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = NatsStore::connect(&StorageUrl::parse(url).unwrap(), Default::default())
                .await
                .unwrap();
            let clock = Arc::new(ManualClock::new(Timestamp::UNIX_EPOCH));
            let factory = NatsRecorderFactory::new(store, clock);
            let ids = SequentialRunIds::with_prefix(0x4477);
            let mut recorders = Vec::new();
            for _ in 0..RUNS {
                let recorder = factory.create(ids.next_run_id(), None).await.unwrap();
                recorder
                    .record(EventDraft::run_level(Payload::RunStarted(
                        StepPayload::new("fleet", "workflow"),
                    )))
                    .await
                    .unwrap();
                recorders.push(recorder);
            }
            for recorder in recorders {
                recorder
                    .record(EventDraft::run_level(Payload::RunCompleted(
                        StepPayload::new("fleet", "workflow"),
                    )))
                    .await
                    .unwrap();
                recorder.close().await.unwrap();
            }
        });
}

#[test]
fn mirror_of_many_runs_holds_a_bounded_number_of_files_open() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    record_fleet(&url);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mirror");
    // 128 descriptors: the runtime, the connection and a bounded set of run files fit.
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 128 && exec \"$0\" mirror \"$1\" --to \"$2\"")
        .arg(bin().get_program())
        .arg(&url)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(&format!("mirrored {RUNS} runs")),
        "{}",
        text(&o.stdout)
    );
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files, RUNS);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let lines = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert_eq!(lines.lines().count(), 2, "{lines}");
        let last = lines.lines().last().unwrap();
        assert!(last.contains("\"type\":\"run.completed\""), "{lines}");
    }
}
