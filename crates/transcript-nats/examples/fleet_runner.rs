//! A fleet runner: records `RUNS` concurrent runs of a fixed workflow-like sequence of events
//! (deterministic clock and run ids), to NATS or, for comparison, to files.
//!
//! ```text
//! cargo run -p transcript-nats --example fleet_runner -- nats://127.0.0.1:4222 1 50 20
//! cargo run -p transcript-nats --example fleet_runner -- storage/transcripts 1 50 20
//! ```
//!
//! Arguments: storage (a `nats://` URL or a directory), the run-id prefix (keeps runners
//! apart), runs, steps per run. `TRANSCRIPT_NATS_REPLICAS` sets the stream's replicas when it
//! is created. Prints the run ids, one a line.

use std::sync::Arc;

use transcript_domain::{
    ContentBlock, EventDraft, Fidelity, ManualClock, MessagePayload, Payload, RawJson,
    RecorderFactory, Role, RunIdGenerator, SequentialRunIds, StepPayload, Timestamp, ToolPayload,
    Usage,
};
use transcript_nats::{NatsRecorderFactory, NatsStore, StorageUrl, StreamOptions};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The events of one run: started, `steps` agent steps (prompt, reply with usage, a tool call
/// and its result), completed.
fn drafts(steps: u64) -> Vec<EventDraft> {
    let mut out = vec![EventDraft::run_level(Payload::RunStarted(
        StepPayload::new("fleet", "workflow"),
    ))];
    for i in 0..steps {
        let path = format!("steps.s{i}");
        let mut reply = MessagePayload::new(
            Role::Assistant,
            vec![ContentBlock::text(
                Fidelity::AgentEmitted,
                format!("done {i} ✓"),
            )],
        );
        reply.model = Some("model-a".to_owned());
        reply.usage = Some(Usage {
            input_tokens: Some(100 + i),
            output_tokens: Some(7),
            ..Usage::default()
        });
        let input =
            RawJson::from_value(&serde_json::json!({ "i": i })).unwrap_or_else(|_| RawJson::null());
        out.extend([
            EventDraft::new(
                &path,
                i,
                Payload::StepStarted(StepPayload::new("s", "agent")),
            ),
            EventDraft::new(
                &path,
                i,
                Payload::MessageUser(MessagePayload::new(
                    Role::User,
                    vec![ContentBlock::text(
                        Fidelity::AgentEmitted,
                        format!("do {i}"),
                    )],
                )),
            ),
            EventDraft::new(&path, i, Payload::MessageAssistant(reply)),
            EventDraft::new(
                &path,
                i,
                Payload::ToolCall(ToolPayload::call(
                    "t",
                    format!("c{i}"),
                    input,
                    Fidelity::Router,
                )),
            ),
            EventDraft::new(
                &path,
                i,
                Payload::ToolResult(ToolPayload::result(
                    "t",
                    format!("c{i}"),
                    RawJson::string("ok"),
                    None,
                    Fidelity::Router,
                )),
            ),
            EventDraft::new(
                &path,
                i,
                Payload::StepCompleted(StepPayload::new("s", "agent")),
            ),
        ]);
    }
    out.push(EventDraft::run_level(Payload::RunCompleted(
        StepPayload::new("fleet", "workflow"),
    )));
    out
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::stepping(Timestamp::UNIX_EPOCH, 3))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [storage, prefix, runs, steps] = args.as_slice() else {
        return Err("usage: fleet_runner <nats-url|dir> <prefix> <runs> <steps>".into());
    };
    let ids = SequentialRunIds::with_prefix(prefix.parse()?);
    let (runs, steps): (usize, u64) = (runs.parse()?, steps.parse()?);
    let store = if StorageUrl::is_nats(storage) {
        let mut options = StreamOptions::default();
        if let Ok(r) = std::env::var("TRANSCRIPT_NATS_REPLICAS") {
            options.replicas = Some(r.parse()?);
        }
        Some(NatsStore::connect(&StorageUrl::parse(storage)?, options).await?)
    } else {
        None
    };
    let mut tasks = Vec::new();
    for _ in 0..runs {
        let run = ids.next_run_id();
        // One clock per run, as each run of the comparison gets: byte-stable goldens.
        let factory: Arc<dyn RecorderFactory> = match &store {
            Some(store) => Arc::new(NatsRecorderFactory::new(store.clone(), clock())),
            None => {
                Arc::new(transcript_infra::JsonlRecorderFactory::new(storage).with_clock(clock()))
            }
        };
        tasks.push(tokio::spawn(async move {
            let recorder = factory.create(run, None).await?;
            for draft in drafts(steps) {
                recorder.record(draft).await?;
            }
            recorder.close().await?;
            Ok::<_, transcript_domain::RecordError>(run)
        }));
    }
    for task in tasks {
        println!("{}", task.await??);
    }
    Ok(())
}
