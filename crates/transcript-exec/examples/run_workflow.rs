//! Runs a small workflow into JSONL transcripts and prints each line live
//! as it is recorded, then the display lines.
//!
//! `cargo run -p transcript-exec --example run_workflow`
//!
//! The transcripts go to a temporary directory through transcript-infra's
//! `JsonlRecorderFactory`, wrapped in its `TapFactory` for the live view of
//! every run it opens. `examples/custom-runner` is the whole runner a team
//! would copy (a custom tool, an agent, child runs, the tree, usage, verify).

use std::sync::Arc;

use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::Timestamp;
use transcript_exec::{
    CollectDisplay, CustomStepContext, ExecutionService, FnStep, Items, ParallelMode, Step,
    Workflow, WorkflowSet,
};
use transcript_infra::{JsonlRecorderFactory, TapFactory};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // First, before any thread: this program is the network namespace helper its bounded
    // steps start through (`PROGRAM __netns …`, #57).
    transcript_exec::sandbox::net::serve_as_helper();
    tokio::runtime::Runtime::new()?.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let (workspace, storage) = (dir.path().join("ws"), dir.path().join("transcripts"));
    std::fs::create_dir_all(&workspace)?;
    // Every run the factory opens is handed to this consumer from seq 1.
    let tap = Arc::new(TapFactory::new(
        Arc::new(JsonlRecorderFactory::new(&storage)),
        Box::new(|mut subscription| {
            Some(tokio::spawn(async move {
                while let Some(event) = subscription.next().await {
                    let (seq, kind) = (event.seq, event.event_type().as_str());
                    println!("{} #{seq} {kind} {}", event.run_id, event.path);
                }
            }))
        }),
    ));
    let start = Timestamp::parse("2026-06-08T08:00:00.000Z")?;
    let display = Arc::new(CollectDisplay::default());
    let service = ExecutionService::deterministic_builder(&workspace, start)
        .recorder_factory(tap.clone())
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
                    Items::list(vec![json!("a"), json!("b")]),
                    vec![Step::command_argv(
                        "item",
                        ["echo", "{{loop.index}}", "{{loop.item}}"],
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
    tap.drain("the live view").await?;
    let files = std::fs::read_dir(&storage)?.count();
    println!("{files} transcript file(s) written (removed with the temporary directory)");
    for event in display.events() {
        println!("{}", event.render());
    }
    println!("outputs: {}", serde_json::Value::Object(outcome.outputs));
    Ok(())
}
