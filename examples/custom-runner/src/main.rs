//! The runner a team would copy: an `ExecutionService` recording every run (the root and each
//! `call_workflow` child) to `<storage>/<run_id>.jsonl` through a `JsonlRecorderFactory`, a live
//! view of every run through the public `TapFactory`, a custom tool, a custom step kind and an
//! HTTP agent; then the step tree, usage and cost (one request, one bill), and `verify`.
//!
//! `OPENAI_BASE_URL=... OPENAI_API_KEY=... cargo run -p custom-runner -- [storage] [workspace]`
//! (any Chat Completions server; the test points it at a scripted one).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::Usage;
use transcript_exec::{
    AgentSpec, CustomStepContext, ExecutionService, FnStep, HttpAgentRunner, Step, StepKind, Tool,
    ToolContext, ToolError, Workflow, WorkflowSet,
};
use transcript_infra::{
    JsonlRecorderFactory, RandomRunIds, SystemClock, TapFactory, load_run_tree, verify_run,
};
use transcript_providers::Pricing;

/// A custom tool: counts the words of `text`. Operation steps and agents call it through the
/// router, which records its `tool.call` / `tool.result` pair at `router` fidelity.
struct WordCount;

#[async_trait]
impl Tool for WordCount {
    async fn call(&self, _: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let text = input["text"].as_str().unwrap_or_default();
        Ok(json!({ "words": text.split_whitespace().count() }))
    }
}

fn workflows() -> WorkflowSet {
    let ask = AgentSpec {
        provider: "openai".into(),
        prompt: "Summarise: {{steps.greet.output}}".into(),
        model: Some("gpt-4o-mini".into()),
        ..AgentSpec::default()
    };
    let main = Workflow::new("custom-runner")
        // A command step's output is its stdout without the trailing newline.
        .step(Step::command("greet", "echo hello from the runner"))
        .step(Step::operation(
            "count",
            "word_count",
            json!({ "text": "{{steps.greet.output}}" }),
        ))
        .step(Step::custom(
            "shout",
            "shout",
            json!({ "text": "{{steps.greet.output}}" }),
        ))
        .step(Step::new("ask", StepKind::Agent(ask)))
        .step(Step::call_workflow("sub", "child", Default::default()))
        .output("loud", "{{steps.shout.output}}");
    let child = Workflow::new("child").step(Step::command("inner", "echo from the child run"));
    WorkflowSet::new("main", main).with("child", child)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // First, before any thread: this program is the network namespace helper its bounded
    // steps start through (`PROGRAM __netns …`, #57).
    transcript_exec::sandbox::net::serve_as_helper();
    tokio::runtime::Runtime::new()?.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let storage = args.next().unwrap_or_else(|| "storage/transcripts".into());
    let workspace = args.next().unwrap_or_else(|| ".".into());

    // Every run the service opens, child runs included, reaches this view from seq 1.
    let tap = Arc::new(TapFactory::new(
        Arc::new(JsonlRecorderFactory::new(&storage)),
        Box::new(|mut run| {
            Some(tokio::spawn(async move {
                while let Some(e) = run.next().await {
                    let kind = e.event_type().as_str();
                    println!("live {} {} {kind} {}", e.run_id, e.seq, e.path);
                }
            }))
        }),
    ));
    let shout = |ctx: &CustomStepContext| {
        Ok(json!(
            ctx.params["text"].as_str().unwrap_or("").to_uppercase()
        ))
    };
    let service =
        ExecutionService::builder(&workspace, Arc::new(SystemClock), Arc::new(RandomRunIds))
            .recorder_factory(tap.clone())
            .tool("word_count", Arc::new(WordCount))
            .custom_step("shout", Arc::new(FnStep(shout)))?
            .agent_runner("openai", Arc::new(HttpAgentRunner::from_env()))
            .build()?;

    let outcome = service
        .run(&workflows(), Map::new(), CancellationToken::new())
        .await?;
    tap.drain("the live view").await?;
    println!("run_id: {} status: {:?}", outcome.run_id, outcome.status);

    // The tree, usage and cost, from the files alone.
    let loaded = load_run_tree(&storage, outcome.run_id)?;
    let table = Pricing::embedded();
    let price = |model: &str, u: &Usage| table.cost(model, u).map(|c| c.usd);
    print!("{}", loaded.tree.outline());
    for (depth, step) in loaded.tree.walk() {
        let bill = step.bill(Some(&price));
        if bill.billed_turns > 0 {
            let cost = bill.cost_usd().map_or("—".into(), |c| format!("${c:.6}"));
            println!(
                "usage {:depth$}{} {} {cost}",
                "",
                step.path,
                json!(bill.usage)
            );
        }
    }
    let total = loaded.tree.bill(Some(&price));
    println!("total {}", json!(total.usage));
    let report = verify_run(&storage, outcome.run_id);
    println!("valid = {}", report.is_valid());
    if !outcome.succeeded() || !report.is_valid() {
        return Err(format!("run {}: {:?}", outcome.run_id, outcome.error).into());
    }
    Ok(())
}
