//! A runner of your own: record a run with `JsonlRecorder`, follow it live from seq 1, turn a
//! Claude Code `stream-json` into content blocks with a `Normalizer`, read the file back.
//! `cargo run -p custom-runner -- [storage-dir]`

use transcript_domain::{
    ContentBlock, EventDraft, Fidelity, MessagePayload, Payload, Recorder, Role, RunIdGenerator,
    StepPayload,
};
use transcript_infra::{JsonlRecorder, RandomRunIds, ReadItem, TranscriptReader, verify_file};
use transcript_providers::Provider;

/// What the agent printed (in a real runner: its stdout, fed as it arrives).
const CLAUDE_STREAM: &str = r#"{"type":"system","subtype":"init","session_id":"s","model":"claude-x"}
{"type":"assistant","message":{"id":"m1","model":"claude-x","role":"assistant","content":[{"type":"text","text":"Hello from the agent."}],"usage":{"input_tokens":12,"output_tokens":5}}}
{"type":"result","subtype":"success","is_error":false,"result":"Hello from the agent.","usage":{"input_tokens":12,"output_tokens":5}}
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let storage = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "storage/transcripts".into());
    let recorder = JsonlRecorder::builder(&storage, RandomRunIds.next_run_id()).open()?;

    // A live view from seq 1: it sees every event, after it is on disk.
    let mut live = recorder.subscribe(Some(1)).await?;
    let view = tokio::spawn(async move {
        while let Some(e) = live.next().await {
            println!("live {:>2} {} {}", e.seq, e.event_type(), e.path);
        }
    });

    let workflow = StepPayload::new("hello", "workflow");
    let step = StepPayload::new("greet", "agent");
    recorder
        .record(EventDraft::run_level(Payload::RunStarted(workflow.clone())))
        .await?;
    recorder
        .record(EventDraft::new(
            "greet",
            0,
            Payload::StepStarted(step.clone()),
        ))
        .await?;
    let prompt = ContentBlock::text(Fidelity::Router, "Say hello.");
    let user = MessagePayload::new(Role::User, vec![prompt]);
    recorder
        .record(EventDraft::new("greet", 0, Payload::MessageUser(user)))
        .await?;

    // The provider's output, normalized: assistant turns and tool calls as payloads.
    let mut normalizer = Provider::Claude.normalizer();
    let mut outputs = Vec::new();
    normalizer.feed(CLAUDE_STREAM.as_bytes(), &mut outputs);
    normalizer.finish(&mut outputs);
    for payload in outputs.iter().filter_map(|o| o.to_payload()) {
        recorder
            .record(EventDraft::new("greet", 0, payload))
            .await?;
    }

    recorder
        .record(EventDraft::new("greet", 0, Payload::StepCompleted(step)))
        .await?;
    recorder
        .record(EventDraft::run_level(Payload::RunCompleted(workflow)))
        .await?;
    recorder.close().await?;
    view.await?;

    for item in TranscriptReader::open(recorder.path())? {
        if let ReadItem::Event(e) = item? {
            println!("file {:>2} {}", e.event.seq, e.event.kind.as_str());
        }
    }
    let report = verify_file(recorder.path());
    println!(
        "{}: valid = {}",
        recorder.path().display(),
        report.is_valid()
    );
    Ok(())
}
