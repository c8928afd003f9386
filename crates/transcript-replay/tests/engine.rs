//! A replay through the engine with our own HTTP agent (OpenAI Chat Completions): a run in
//! which the agent reads a file through the tools router is recorded against the scripted
//! server, the server is dropped, and the run is replayed with [`ReplayEndpoints`]: equal
//! (the same tool call, result and answer), and after the file changed the strict replay fails
//! the step at turn 2 naming the call and both texts, while fifo serves the recorded answer
//! and keeps the difference as a warning.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{DecodedEvent, RunId};
use transcript_exec::{
    AgentSpec, ExecutionService, HttpAgentRunner, RunOutcome, Step, StepKind, ToolRouter, Workflow,
    WorkflowSet,
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
        prompt: "Read notes.txt and answer.".into(),
        tools: vec!["read_file".into()],
        ..AgentSpec::default()
    };
    WorkflowSet::new(
        "main",
        Workflow::new("notes")
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

/// The runner: the recorded server's URL (dead in a replay), and the replay's ports.
async fn run(dir: &Path, url: &str, replay: Option<Arc<ReplayEndpoints>>) -> RunOutcome {
    let mut builder = ExecutionService::builder(dir, Arc::new(SystemClock), Arc::new(RandomRunIds))
        .recorder_factory(Arc::new(JsonlRecorderFactory::new(dir.join("runs"))))
        .router(ToolRouter::with_builtins())
        .agent_runner("openai", Arc::new(HttpAgentRunner::new(url)));
    if let Some(r) = replay {
        builder = builder.model_endpoints(r.clone()).recorded_commands(r);
    }
    builder
        .build()
        .unwrap()
        .run(&workflow(), Map::new(), CancellationToken::new())
        .await
        .unwrap()
}

/// The tool calls of the run's assistant turns (name and input) and the results the router
/// recorded for them (`tool.result`), in order.
fn tool_traffic(events: &[DecodedEvent]) -> Vec<String> {
    events
        .iter()
        .flat_map(|e| match &e.payload {
            transcript_domain::DecodedPayload::Message(m) if m.role == "assistant" => m
                .blocks
                .iter()
                .filter_map(|b| match &b.known()?.body {
                    transcript_domain::BlockBody::ToolUse {
                        tool_name,
                        tool_input,
                        ..
                    } => Some(format!("use {tool_name} {tool_input}")),
                    _ => None,
                })
                .collect(),
            transcript_domain::DecodedPayload::Tool(t) if !t.output.is_null() => {
                vec![format!("result {}", t.output)]
            }
            _ => Vec::new(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_agent_run_replays_equal_and_a_changed_file_fails_strict_and_warns_fifo() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "code 7-alpha\n").unwrap();
    let server = ModelServer::start(Script::new([
        Turn::tool_call("read_file", json!({"path": "notes.txt"})).with_usage(Usage::new(20, 4)),
        Turn::text("The code is 7-alpha.").with_usage(Usage::new(30, 5)),
    ]))
    .unwrap();
    let recorded = run(dir.path(), &server.openai_base_url(), None).await;
    assert!(recorded.succeeded(), "{:?}", recorded.error);
    assert_eq!(server.generation_requests().len(), 2);
    let dead = server.openai_base_url();
    drop(server);
    let storage = dir.path().join("runs");
    let recorded_events = events(&storage, recorded.run_id);
    let recording = Recording::read(&recorded_events, &mut |_| None).unwrap();
    let replay = |matching| {
        Some(Arc::new(ReplayEndpoints::new(Replayer::new(
            recording.tape.clone(),
            matching,
        ))))
    };

    let equal = run(dir.path(), &dead, replay(Matching::Strict)).await;
    assert!(equal.succeeded(), "{:?}", equal.error);
    assert_eq!(equal.outputs, recorded.outputs);
    let traffic = tool_traffic(&recorded_events);
    assert_eq!(traffic.len(), 2, "{traffic:?}");
    assert!(traffic[1].contains("code 7-alpha"), "{traffic:?}");
    assert_eq!(tool_traffic(&events(&storage, equal.run_id)), traffic);

    std::fs::write(dir.path().join("notes.txt"), "code 9-zulu\n").unwrap();
    let strict = run(dir.path(), &dead, replay(Matching::Strict)).await;
    let error = strict.error.clone().unwrap_or_default();
    assert!(!strict.succeeded());
    assert!(
        error.contains("replay: step ask: turn 2: the result of tool call"),
        "{error}"
    );
    assert!(
        error.contains("-code 7-alpha") && error.contains("+code 9-zulu"),
        "{error}"
    );

    let fifo = run(dir.path(), &dead, replay(Matching::Fifo)).await;
    assert!(fifo.succeeded(), "{:?}", fifo.error);
    assert_eq!(fifo.outputs, recorded.outputs);
    let completed = events(&storage, fifo.run_id)
        .into_iter()
        .find_map(|e| match (&e.payload, e.path.as_str()) {
            (transcript_domain::DecodedPayload::Step(s), "ask") if s.result.is_some() => {
                s.result.clone()
            }
            _ => None,
        })
        .unwrap();
    let result: Value = completed.to_value();
    assert!(
        result["warnings"]
            .to_string()
            .contains("turn 2: the result of tool call"),
        "{result}"
    );
}
