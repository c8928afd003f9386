//! Records a small run with a live subscriber, then reads and verifies it.
//!
//! `cargo run -p transcript-infra --example record_and_read [storage-dir]`

use std::sync::Arc;

use transcript_domain::{EventDraft, Payload, RawJson, Recorder, RunIdGenerator, StepPayload};
use transcript_infra::{
    Durability, JsonlRecorder, RandomRunIds, ReadItem, TranscriptReader, verify_file,
};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let storage = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("transcript-example"));
    let run = RandomRunIds.next_run_id();
    let recorder = Arc::new(
        JsonlRecorder::builder(&storage, run)
            .durability(Durability::Always)
            .open()?,
    );

    // A live subscriber, e.g. a progress display.
    let mut live = recorder.subscribe(None).await?;
    let printer = tokio::spawn(async move {
        while let Some(event) = live.next().await {
            println!("live  seq {:>2} {}", event.seq, event.event_type());
        }
    });

    let step = |name: &str| StepPayload::new(name, "command");
    recorder
        .record(EventDraft::run_level(Payload::RunStarted(
            StepPayload::new("example", "workflow"),
        )))
        .await?;
    recorder
        .record(EventDraft::new(
            "build",
            0,
            Payload::StepStarted(step("build")),
        ))
        .await?;
    recorder
        .record(EventDraft::new(
            "build",
            0,
            Payload::StepCompleted(step("build").with_result(RawJson::from_value(&"ok")?)),
        ))
        .await?;
    recorder
        .record(EventDraft::run_level(Payload::RunCompleted(
            StepPayload::new("example", "workflow"),
        )))
        .await?;
    recorder.close().await?;
    printer.await?;

    // Read it back, tolerant of anything a crash or another writer left.
    for item in TranscriptReader::open(recorder.path())? {
        match item {
            Ok(ReadItem::Event(e)) => {
                println!("file  seq {:>2} {}", e.event.seq, e.event.kind.as_str())
            }
            Ok(ReadItem::Warning(w)) => println!("warning: {w}"),
            Err(e) => println!("error: {e}"),
        }
    }
    let report = verify_file(recorder.path());
    println!(
        "{}: {} events, valid = {}",
        recorder.path().display(),
        report.events,
        report.is_valid()
    );
    Ok(())
}
