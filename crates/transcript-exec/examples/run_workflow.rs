//! Runs a small workflow and prints its transcript and display lines.
//!
//! `cargo run -p transcript-exec --example run_workflow`
//!
//! The transcript goes to an in-memory recorder defined below, so the
//! example depends on nothing but the domain and this crate; a real runner
//! passes transcript-infra's `JsonlRecorderFactory` instead.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{
    Clock, EventDraft, ManualClock, PreEncoded, RecordError, Recorder, RecorderFactory, RunId, Seq,
    Subscription, Timestamp,
};
use transcript_exec::{
    CollectDisplay, CustomStepContext, ExecutionService, FnStep, Items, ParallelMode, Step,
    Workflow, WorkflowSet,
};

/// Prints each line as it is recorded.
struct PrintRecorder {
    run_id: RunId,
    parent: Option<RunId>,
    clock: Arc<dyn Clock>,
    seq: Mutex<Seq>,
}

#[async_trait]
impl Recorder for PrintRecorder {
    fn run_id(&self) -> RunId {
        self.run_id
    }
    fn parent_run_id(&self) -> Option<RunId> {
        self.parent
    }
    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        let pre = PreEncoded::new(self.run_id, self.parent, &draft)
            .map_err(|e| RecordError::Encode(e.to_string()))?;
        let mut seq = self.seq.lock().map_err(|_| RecordError::Closed)?;
        *seq += 1;
        let mut line = Vec::new();
        pre.write_line(*seq, self.clock.now(), &mut line);
        print!("{}", String::from_utf8_lossy(&line));
        Ok(*seq)
    }
    async fn subscribe(&self, _: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Err(RecordError::Closed)
    }
    async fn close(&self) -> Result<(), RecordError> {
        Ok(())
    }
}

struct PrintFactory(Arc<dyn Clock>);

#[async_trait]
impl RecorderFactory for PrintFactory {
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        Ok(Arc::new(PrintRecorder {
            run_id,
            parent: parent_run_id,
            clock: self.0.clone(),
            seq: Mutex::new(0),
        }))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = std::env::temp_dir();
    let start = Timestamp::parse("2026-06-08T08:00:00.000Z")?;
    let display = Arc::new(CollectDisplay::default());
    let service = ExecutionService::deterministic_builder(&workspace, start)
        .recorder_factory(Arc::new(PrintFactory(Arc::new(ManualClock::stepping(
            start, 5,
        )))))
        .display(display.clone())
        .custom_step(
            "shout",
            Arc::new(FnStep(|ctx: &CustomStepContext| {
                Ok(json!(
                    ctx.params["text"].as_str().unwrap_or("").to_uppercase()
                ))
            })),
        )?
        .build()?;

    let workflow = Workflow::new("example")
        .input("name", Some(json!("world")))
        .step(Step::command("greet", "echo hello \"$NAME\"").with_env("NAME", "{{inputs.name}}"))
        .step(Step::parallel(
            "fan",
            ParallelMode::AllSucceed,
            vec![
                Step::custom("loud", "shout", json!({"text": "{{steps.greet.output}}"})),
                Step::for_each(
                    "each",
                    Items::List(vec![json!("a"), json!("b")]),
                    vec![Step::command_argv(
                        "item",
                        ["echo", "{{loop.index}}:{{loop.item}}"],
                    )],
                ),
            ],
        ))
        .output("loud", "{{steps.loud.output}}");
    let outcome = service
        .run(
            &WorkflowSet::new("example", workflow),
            Map::new(),
            CancellationToken::new(),
        )
        .await?;
    println!();
    for event in display.events() {
        println!("{}", event.render());
    }
    println!("outputs: {}", serde_json::Value::Object(outcome.outputs));
    Ok(())
}
