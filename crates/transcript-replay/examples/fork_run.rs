//! What if, from Rust (#61): a team's runner records a two-step workflow (`plan`, then
//! `answer`) whose HTTP agent talks to a scripted model server, then forks the recording at
//! `answer` and runs three trials: `plan` is served from the recording by
//! [`ForkEndpoints`] (the live server never sees it), `answer` runs live against a second
//! server whose answers differ per trial. Each trial names the recording and the fork step in
//! its `run.started` (`replay_of`, `forked_at`); transcript-compare says where each diverged and
//! sums them up.
//!
//! ```text
//! cargo run -p transcript-replay --example fork_run
//! ```

use std::path::Path;
use std::sync::Arc;

use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_compare::trials::{Trial, TrialsReport};
use transcript_compare::{DiffOptions, RunRecord, diff};
use transcript_domain::{DecodedEvent, RunId};
use transcript_exec::{
    AgentSpec, ExecutionService, HttpAgentRunner, Step, StepKind, Workflow, WorkflowSet,
};
use transcript_infra::{
    JsonlRecorderFactory, RandomRunIds, ReadItem, SystemClock, TranscriptReader,
};
use transcript_replay::fork::{ForkEndpoints, ForkPoint};
use transcript_replay::server::{ModelServer, Script, Turn, Usage};
use transcript_replay::{Matching, Recording, Replayer};

fn workflow() -> WorkflowSet {
    let agent = |prompt: &str| {
        StepKind::Agent(AgentSpec {
            provider: "openai".into(),
            model: Some("gpt-4o-mini".into()),
            prompt: prompt.into(),
            ..AgentSpec::default()
        })
    };
    WorkflowSet::new(
        "main",
        Workflow::new("whatif")
            .step(Step::new("plan", agent("Make a plan.")))
            .step(Step::new("answer", agent("Answer the question.")))
            .output("answer", "{{steps.answer.output}}"),
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
    let dir = std::env::temp_dir().join(format!("fork-example-{}", std::process::id()));
    let storage = dir.join("transcripts");
    std::fs::create_dir_all(&storage)?;
    let service = || {
        ExecutionService::builder(&dir, Arc::new(SystemClock), Arc::new(RandomRunIds))
            .recorder_factory(Arc::new(JsonlRecorderFactory::new(&storage)))
    };

    // 1. Record: both steps against a scripted server.
    let server = ModelServer::start(Script::new([
        Turn::text("The plan: look it up.").with_usage(Usage::new(40_000, 600)),
        Turn::text("42").with_usage(Usage::new(60_000, 1)),
    ]))?;
    let recorded = service()
        .agent_runner(
            "openai",
            Arc::new(HttpAgentRunner::new(server.openai_base_url())),
        )
        .build()?
        .run(&workflow(), Map::new(), CancellationToken::new())
        .await?;
    drop(server);
    println!("recorded run {}: {:?}", recorded.run_id, recorded.status);
    let tape = events(&storage, recorded.run_id);
    let recording = Recording::read(&tape, &mut |child| Some(events(&storage, child)))?;
    // Priced with the embedded LiteLLM table, as `receipts` prices.
    let table = transcript_providers::Pricing::embedded();
    let price =
        |model: &str, usage: &transcript_domain::Usage| table.cost(model, usage).map(|c| c.usd);
    let record = |run: RunId| {
        RunRecord::build(
            &events(&storage, run),
            &mut |c| Some(events(&storage, c)),
            Some(&price),
        )
    };
    let recorded_record = record(recorded.run_id);

    // 2. Fork at `answer`: three trials, the live server answering each differently.
    let fork = ForkPoint::find(&tape, "answer")?;
    let live = ModelServer::start(Script::new(
        [("42", 1), ("forty-two", 3), ("42", 1)]
            .map(|(a, out)| Turn::text(a).with_usage(Usage::new(60_000, out))),
    ))?;
    let is_live = |chain: &[(String, u64)]| fork.prefix().side(chain);
    let mut trials = Vec::new();
    for _ in 0..3 {
        let replayer = Replayer::new(recording.tape.clone(), Matching::Strict);
        let endpoints = Arc::new(ForkEndpoints::new(replayer, fork.clone()));
        let trial = service()
            .model_endpoints(endpoints)
            // The live steps use the agent's own configuration: the live server.
            .agent_runner(
                "openai",
                Arc::new(HttpAgentRunner::new(live.openai_base_url())),
            )
            .replay_of(recorded.run_id)
            .forked_at("answer")
            .build()?
            .run(&workflow(), Map::new(), CancellationToken::new())
            .await?;
        let trial = record(trial.run_id);
        let doc = diff(&recorded_record, &trial, &DiffOptions::default());
        trials.push(Trial::judge(&trial, &doc, None, &is_live));
    }
    // `plan` came from the recording: the live server saw `answer` only, once per trial.
    let seen = live.generation_requests().len();
    println!("the live server answered {seen} requests (one per trial)");
    let report = TrialsReport::new(&recorded_record, "answer", trials, &is_live);
    print!("{}", report.render_text());
    let _ = std::fs::remove_dir_all(&dir);
    if seen != 3 {
        return Err(format!("the live server saw {seen} requests, not 3").into());
    }
    Ok(())
}
