//! Replaying a run from Rust: a team's runner records a workflow whose HTTP agent talks to a
//! scripted model server, then runs it again with the recording as the model, through the
//! engine's `ModelEndpoints` port, and reads each agent execution's verdict.
//!
//! ```text
//! cargo run -p transcript-replay --example replay_run
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_domain::{DecodedEvent, RunId};
use transcript_exec::model_endpoint::{
    EndpointOutcome, EndpointSession, EndpointStart, ModelEndpoints,
};
use transcript_exec::{
    AgentSpec, ExecutionService, HttpAgentRunner, Step, StepKind, Workflow, WorkflowSet,
};
use transcript_infra::{
    JsonlRecorderFactory, RandomRunIds, ReadItem, SystemClock, TranscriptReader,
};
use transcript_replay::server::{ModelServer, Script, Turn, Usage};
use transcript_replay::{Matching, Recording, Replayer, StepKey, StepReplay, StepStart, Verdict};

/// The engine's port over a [`Replayer`]: one server per agent execution.
struct Replay {
    replayer: Replayer,
    verdicts: Arc<Mutex<Vec<Verdict>>>,
}

struct Session {
    step: StepReplay,
    verdicts: Arc<Mutex<Vec<Verdict>>>,
}

#[async_trait]
impl ModelEndpoints for Replay {
    async fn open(&self, start: EndpointStart) -> Result<Box<dyn EndpointSession>, String> {
        let key = StepKey {
            callers: start.callers,
            path: start.path,
            iteration: start.iteration,
        };
        let step = self
            .replayer
            .open(StepStart {
                key: &key,
                provider: &start.provider,
                prompt: &start.prompt,
                system_prompt: &start.system_prompt,
                dir: &start.config_dir,
            })
            .map_err(|e| e.to_string())?;
        Ok(Box::new(Session {
            step,
            verdicts: self.verdicts.clone(),
        }))
    }
}

#[async_trait]
impl EndpointSession for Session {
    fn env(&self) -> BTreeMap<String, String> {
        self.step.wiring().env.clone()
    }

    async fn finish(self: Box<Self>) -> EndpointOutcome {
        let verdict = self.step.finish();
        let outcome = EndpointOutcome {
            failure: verdict.failure(),
            warnings: verdict.warnings(),
        };
        self.verdicts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(verdict);
        outcome
    }
}

fn workflow() -> WorkflowSet {
    let ask = AgentSpec {
        provider: "openai".into(),
        prompt: "Say hello.".into(),
        ..AgentSpec::default()
    };
    WorkflowSet::new(
        "main",
        Workflow::new("hello").step(Step::new("ask", StepKind::Agent(ask))),
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
    let service = |endpoints: Option<Arc<dyn ModelEndpoints>>| {
        let mut b = ExecutionService::builder(&dir, Arc::new(SystemClock), Arc::new(RandomRunIds))
            .recorder_factory(Arc::new(JsonlRecorderFactory::new(&storage)));
        if let Some(e) = endpoints {
            b = b.model_endpoints(e);
        }
        b
    };

    // 1. Record: the HTTP agent against a scripted server.
    let server = ModelServer::start(Script::new([
        Turn::text("Hello from the recording.").with_usage(Usage::new(12, 5))
    ]))?;
    let recorder = service(None)
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
    let verdicts = Arc::new(Mutex::new(Vec::new()));
    let replay = Arc::new(Replay {
        replayer: Replayer::new(recording.tape, Matching::Strict),
        verdicts: verdicts.clone(),
    });
    let replayer = service(Some(replay))
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
    for verdict in verdicts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        println!("{verdict}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !replayed.succeeded() {
        return Err(format!("the replay failed: {:?}", replayed.error).into());
    }
    Ok(())
}
