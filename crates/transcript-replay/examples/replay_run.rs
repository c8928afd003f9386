//! Replaying a run from Rust: a team's runner records a workflow whose HTTP agent talks to a
//! scripted model server, then runs it again with the recording as the model: the
//! [`ReplayEndpoints`] registered on the engine's replay ports give each agent execution its
//! own server playing its recorded turns, and fail a step that diverges.
//!
//! ```text
//! cargo run -p transcript-replay --example replay_run
//! ```

use std::path::Path;
use std::sync::Arc;

use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_domain::{DecodedEvent, RunId};
use transcript_exec::{
    AgentSpec, ExecutionService, HttpAgentRunner, Step, StepKind, Workflow, WorkflowSet,
};
use transcript_infra::{
    JsonlRecorderFactory, RandomRunIds, ReadItem, SystemClock, TranscriptReader,
};
use transcript_replay::engine::ReplayEndpoints;
use transcript_replay::server::{ModelServer, Script, Turn, Usage};
use transcript_replay::{Matching, Recording, Replayer};

fn workflow() -> WorkflowSet {
    let ask = AgentSpec {
        provider: "openai".into(),
        prompt: "Say hello.".into(),
        ..AgentSpec::default()
    };
    WorkflowSet::new(
        "main",
        Workflow::new("hello")
            .step(Step::new("ask", StepKind::Agent(ask)))
            .output("answer", "{{steps.ask.output}}"),
    )
}

fn events(storage: &Path, run: RunId) -> Vec<DecodedEvent> {
    TranscriptReader::open(storage.join(run.file_name()))
        .into_iter()
        .flatten()
        .filter_map(|item| match item {
            Ok(ReadItem::Event(e)) => Some(e.event),
            _ => None,
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("replay-example-{}", std::process::id()));
    let storage = dir.join("transcripts");
    std::fs::create_dir_all(&storage)?;
    let service = || {
        ExecutionService::builder(&dir, Arc::new(SystemClock), Arc::new(RandomRunIds))
            .recorder_factory(Arc::new(JsonlRecorderFactory::new(&storage)))
    };

    // 1. Record: the HTTP agent against a scripted server.
    let server = ModelServer::start(Script::new([
        Turn::text("Hello from the recording.").with_usage(Usage::new(12, 5))
    ]))?;
    let recorder = service()
        .agent_runner(
            "openai",
            Arc::new(HttpAgentRunner::new(server.openai_base_url())),
        )
        .build()?;
    let recorded = recorder
        .run(&workflow(), Map::new(), CancellationToken::new())
        .await?;
    drop(server);
    println!("recorded run {}: {:?}", recorded.run_id, recorded.status);

    // 2. Replay: the recording is the model; the server above is gone.
    let recording = Recording::read(&events(&storage, recorded.run_id), &mut |child| {
        Some(events(&storage, child))
    })?;
    let replay = Arc::new(ReplayEndpoints::new(Replayer::new(
        recording.tape,
        Matching::Strict,
    )));
    // The step's own endpoint is a dead port: the replay's wiring points the agent elsewhere.
    let replayer = service()
        .model_endpoints(replay.clone())
        .recorded_commands(replay)
        .agent_runner(
            "openai",
            Arc::new(HttpAgentRunner::new("http://127.0.0.1:9/v1")),
        )
        .replay_of(recorded.run_id)
        .build()?;
    let replayed = replayer
        .run(&workflow(), Map::new(), CancellationToken::new())
        .await?;
    println!("replayed run {}: {:?}", replayed.run_id, replayed.status);
    // The recorded answer, served again.
    println!("answer: {}", replayed.outputs["answer"]);
    if replayed.outputs != recorded.outputs {
        return Err("the replay answered otherwise".into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !replayed.succeeded() {
        return Err(format!("the replay failed: {:?}", replayed.error).into());
    }
    Ok(())
}
