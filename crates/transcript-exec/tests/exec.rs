//! Integration tests of the ExecutionService through every non-agent kind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::tree::StepNode;
use transcript_domain::{DecodedEvent, DecodedPayload, EventType, Fidelity, SequentialRunIds};
use transcript_exec::{
    CustomStep, CustomStepContext, ExecNode, ExecutionService, ExternalPlugin, FnStep,
    ParallelMode, RegisterError, Status, Step, StepError, ToolRouter, Workflow, WorkflowSet,
};

use support::*;

fn stamp() -> Arc<dyn CustomStep> {
    Arc::new(FnStep(|ctx: &CustomStepContext| {
        Ok(json!({"stamped": ctx.params["label"], "path": ctx.path}))
    }))
}

async fn plugin_router() -> ToolRouter {
    let mut router = ToolRouter::with_builtins();
    let plugin = ExternalPlugin::start(
        &[
            "python3".to_owned(),
            fixtures()
                .join("plugins/text_plugin.py")
                .display()
                .to_string(),
        ],
        None,
    )
    .await
    .expect("plugin starts");
    router.register_plugin(Arc::new(plugin)).unwrap();
    router
}

async fn service(
    ws: &std::path::Path,
    factory: &Arc<MemoryFactory>,
    deterministic: bool,
) -> ExecutionService {
    ExecutionService::deterministic_builder(ws, ts0())
        .deterministic(deterministic)
        .recorder_factory(factory.clone())
        .router(plugin_router().await)
        .custom_step("stamp", stamp())
        .unwrap()
        .build()
        .unwrap()
}

fn steps_of<'a>(events: &'a [DecodedEvent], path: &str) -> Vec<&'a DecodedEvent> {
    events.iter().filter(|e| e.path == path).collect()
}

fn step_completed<'a>(
    events: &'a [DecodedEvent],
    path: &str,
) -> &'a transcript_domain::StepPayload {
    events
        .iter()
        .find(|e| e.path == path && e.kind.known() == Some(EventType::StepCompleted))
        .and_then(|e| e.step())
        .unwrap_or_else(|| panic!("no step.completed at {path}"))
}

async fn run(svc: &ExecutionService, set: &WorkflowSet) -> transcript_exec::RunOutcome {
    svc.run(set, Map::new(), CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn kinds_fixture_runs_every_non_agent_kind_and_tree_matches() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = service(&ws, &factory, true).await;
    let set = WorkflowSet::load(fixtures().join("workflows/kinds.yaml")).unwrap();
    let out = run(&svc, &set).await;
    assert_eq!(out.status, Status::Succeeded, "{:?}", out.error);
    assert_eq!(out.outputs["shout"], json!("HELLO WORLD"));
    assert!(out.transcript_errors.is_empty());

    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    // run.started / run.completed carry the workflow (decision 2).
    let first = events[0].step().unwrap();
    assert_eq!(
        (first.name.as_str(), first.kind.as_str()),
        ("kinds", "workflow")
    );
    let last = events.last().unwrap().step().unwrap();
    assert!(last.error.is_none());
    assert_eq!(
        last.result.as_ref().unwrap().to_value()["shout"],
        json!("HELLO WORLD")
    );
    // Command result: the resolved command, stdout and exit code.
    let greet = step_completed(&events, "greet");
    assert_eq!(
        greet.result.as_ref().unwrap().to_value(),
        json!({"command": "printf '%s world\\n' \"$GREETING\"", "env": {"GREETING": "hello"}, "stdout": "hello world\n", "exit_code": 0, "confined": true})
    );
    // Custom step: its serialized return value.
    assert_eq!(
        step_completed(&events, "stamp")
            .result
            .as_ref()
            .unwrap()
            .to_value(),
        json!({"stamped": "HELLO WORLD", "path": "stamp"})
    );
    // Terminal: success, later steps never start.
    assert_eq!(step_completed(&events, "done").kind, "terminal");
    assert!(steps_of(&events, "never").is_empty());
    // Nested loops inside a parallel branch: paths and iterations (decision 4).
    let cells: Vec<(String, u64)> = events
        .iter()
        .filter(|e| e.kind.known() == Some(EventType::StepStarted) && e.path == "fan.grid.row.cell")
        .map(|e| (e.path.clone(), e.iteration))
        .collect();
    assert_eq!(cells.len(), 4);
    assert_eq!(
        cells.iter().map(|c| c.1).collect::<Vec<_>>(),
        vec![0, 1, 0, 1]
    );
    let rows: Vec<u64> = events
        .iter()
        .filter(|e| e.kind.known() == Some(EventType::StepStarted) && e.path == "fan.grid.row")
        .map(|e| e.iteration)
        .collect();
    assert_eq!(rows, vec![0, 1]);
    // call_workflow: no step.* events, call_workflow.* with child_run_id (decision 12).
    let sub = steps_of(&events, "sub");
    assert_eq!(
        sub.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        ["step.call_workflow.started", "step.call_workflow.completed"]
    );
    let child_id = sub[0].child_run_id.expect("child_run_id");
    assert_eq!(sub[1].child_run_id, Some(child_id));
    let child_events = factory.events(child_id);
    assert_well_formed(&child_events);
    assert!(
        child_events
            .iter()
            .all(|e| e.parent_run_id == Some(out.run_id))
    );
    assert!(child_events.iter().all(|e| e.run_id == child_id));
    assert_eq!(child_events[0].seq, 1);

    // The tree rebuilt from the files equals the executed tree.
    let tree = factory.tree(out.run_id);
    assert!(tree.all_problems().is_empty(), "{:?}", tree.all_problems());
    assert_eq!(tree.outline(), exec_outline(&out));
    assert!(tree.outline().contains("sub#0 call_workflow sub succeeded\n  measure#0 command measure succeeded\n  deeper#0 call_workflow deeper succeeded\n    echo#0 command echo succeeded"));
}

#[tokio::test]
async fn deterministic_runs_are_byte_identical() {
    let set = WorkflowSet::load(fixtures().join("workflows/kinds.yaml")).unwrap();
    let mut files = Vec::new();
    for _ in 0..2 {
        let (_d, ws) = workspace();
        let factory = MemoryFactory::new();
        let svc = service(&ws, &factory, true).await;
        let out = run(&svc, &set).await;
        let mut all = String::new();
        for r in factory.runs.lock().unwrap().iter() {
            all.push_str(&String::from_utf8(r.bytes()).unwrap());
        }
        assert_eq!(out.status, Status::Succeeded);
        files.push(all);
    }
    assert_eq!(files[0], files[1]);
}

/// Sorted-children outline: equality of trees whose sibling order may vary.
fn canon_tree(nodes: &[StepNode]) -> Vec<String> {
    let mut v: Vec<String> = nodes
        .iter()
        .map(|n| {
            let mut s = format!("{}#{} {} {:?}", n.path, n.iteration, n.kind, n.status);
            for c in canon_tree(&n.children) {
                s.push_str(&format!(" [{c}]"));
            }
            if let Some(child) = &n.child {
                for c in canon_tree(&child.steps) {
                    s.push_str(&format!(" <{c}>"));
                }
            }
            s
        })
        .collect();
    v.sort();
    v
}

fn canon_exec(nodes: &[ExecNode]) -> Vec<String> {
    let mut v: Vec<String> = nodes
        .iter()
        .map(|n| {
            // One status vocabulary: the engine's word is the tree's, cancellation included.
            let status = format!("{:?}", n.status);
            let mut s = format!("{}#{} {} {status}", n.path, n.iteration, n.kind);
            for c in canon_exec(&n.children) {
                s.push_str(&format!(" [{c}]"));
            }
            if let Some(child) = &n.child {
                for c in canon_exec(&child.steps) {
                    s.push_str(&format!(" <{c}>"));
                }
            }
            s
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_branches_keep_loop_state_apart_and_tree_matches() {
    // Two branches each running nested loops concurrently on real threads.
    let body = |tag: &str| {
        Step::for_each(
            format!("outer_{tag}"),
            transcript_exec::Items::list(vec![json!("x"), json!("y"), json!("z")]),
            vec![Step::for_each(
                "inner",
                transcript_exec::Items::list(vec![json!(1), json!(2)]),
                vec![Step::custom(
                    "probe",
                    "probe",
                    json!({"item": "{{loop.item}}", "index": "{{loop.index}}", "tag": tag}),
                )],
            )],
        )
    };
    let wf = Workflow::new("conc").step(Step::parallel(
        "par",
        ParallelMode::AllSucceed,
        vec![body("a"), body("b"), body("c")],
    ));
    let set = WorkflowSet::new("conc", wf);
    for round in 0..5 {
        let (_d, ws) = workspace();
        let factory = MemoryFactory::new();
        let svc = ExecutionService::builder(
            &ws,
            Arc::new(transcript_domain::ManualClock::new(ts0())),
            Arc::new(SequentialRunIds::with_prefix(round)),
        )
        .recorder_factory(factory.clone())
        .custom_step(
            "probe",
            Arc::new(FnStep(|ctx: &CustomStepContext| {
                // The loop variables seen here must be this branch's own.
                let idx = ctx.params["index"].as_u64().unwrap();
                assert_eq!(idx, ctx.iteration);
                assert!(ctx.path.starts_with(&format!(
                    "par.outer_{}",
                    ctx.params["tag"].as_str().unwrap()
                )));
                std::thread::yield_now();
                Ok(ctx.params.clone())
            })),
        )
        .unwrap()
        .build()
        .unwrap();
        let out = run(&svc, &set).await;
        assert_eq!(out.status, Status::Succeeded, "{:?}", out.error);
        let events = factory.events(out.run_id);
        assert_well_formed(&events);
        // Each probe's result shows the item of its own iteration.
        for e in events.iter().filter(|e| {
            e.kind.known() == Some(EventType::StepCompleted) && e.path.ends_with(".probe")
        }) {
            let r = e.step().unwrap().result.as_ref().unwrap().to_value();
            assert_eq!(r["index"], json!(e.iteration));
            assert_eq!(r["item"], json!(e.iteration + 1));
        }
        let tree = factory.tree(out.run_id);
        assert!(tree.all_problems().is_empty());
        assert_eq!(canon_tree(&tree.steps), canon_exec(&out.steps));
        assert_eq!(tree.walk().len(), 1 + 3 * (1 + 3 * (1 + 2)));
    }
}

#[tokio::test]
async fn builtin_and_plugin_calls_emit_one_router_pair_each() {
    let (_d, ws) = workspace();
    std::fs::write(ws.join("in.txt"), "some words here").unwrap();
    let factory = MemoryFactory::new();
    let svc = service(&ws, &factory, true).await;
    let wf = Workflow::new("tools")
        .step(Step::operation(
            "read",
            "read_file",
            json!({"path": "in.txt"}),
        ))
        .step(Step::operation(
            "count",
            "word_count",
            json!({"text": "{{steps.read.output}}"}),
        ))
        .output("words", "{{steps.count.output}}");
    let out = run(&svc, &WorkflowSet::new("tools", wf)).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert_eq!(out.outputs["words"], json!({"words": 3}));
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    let tools: Vec<&DecodedEvent> = events.iter().filter(|e| e.tool().is_some()).collect();
    assert_eq!(tools.len(), 4);
    for (pair, (name, path)) in tools
        .chunks(2)
        .zip([("read_file", "read"), ("word_count", "count")])
    {
        let (call, result) = (pair[0].tool().unwrap(), pair[1].tool().unwrap());
        assert_eq!(pair[0].kind.known(), Some(EventType::ToolCall));
        assert_eq!(pair[1].kind.known(), Some(EventType::ToolResult));
        assert_eq!(call.call_id, result.call_id);
        assert_eq!((call.name.as_str(), result.name.as_str()), (name, name));
        assert_eq!(call.fidelity, Fidelity::Router);
        assert_eq!(result.fidelity, Fidelity::Router);
        // Decision 6.
        assert!(call.output.is_null());
        assert!(result.input.is_null());
        assert!(result.error.is_none());
        assert_eq!(pair[0].path, path);
        assert_eq!(pair[1].path, path);
    }
    assert_eq!(
        tools[0].tool().unwrap().input.to_value(),
        json!({"path": "in.txt"})
    );
    assert_eq!(
        tools[1].tool().unwrap().output.to_value(),
        json!("some words here")
    );
    assert_eq!(
        tools[3].tool().unwrap().output.to_value(),
        json!({"words": 3})
    );
    // The operation step's result is the tool output.
    assert_eq!(
        step_completed(&events, "count")
            .result
            .as_ref()
            .unwrap()
            .to_value(),
        json!({"words": 3})
    );
}

#[tokio::test]
async fn failing_tool_is_recorded_and_the_workflow_decides() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = service(&ws, &factory, true).await;
    // continue_on_error: the run goes on and later steps see the error.
    let wf = Workflow::new("tolerant")
        .step(
            Step::operation("boom", "fail", json!({"message": "disk on fire"})).continue_on_error(),
        )
        .step(Step::command("after", "echo \"saw: $ERR\"").with_env("ERR", "{{steps.boom.error}}"));
    let out = run(&svc, &WorkflowSet::new("t", wf)).await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    let result = events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::ToolResult))
        .unwrap()
        .tool()
        .unwrap();
    assert_eq!(result.error.as_deref(), Some("disk on fire"));
    assert_eq!(
        step_completed(&events, "boom").error.as_deref(),
        Some("disk on fire")
    );
    assert_eq!(
        step_completed(&events, "after")
            .result
            .as_ref()
            .unwrap()
            .to_value()["stdout"],
        json!("saw: disk on fire\n")
    );

    // Without it the run fails at that step.
    let wf = Workflow::new("strict")
        .step(Step::operation(
            "escape",
            "read_file",
            json!({"path": "../../etc/passwd"}),
        ))
        .step(Step::command("after", "echo unreachable"));
    let out = run(&svc, &WorkflowSet::new("s", wf)).await;
    assert_eq!(out.status, Status::Failed);
    assert_eq!(
        out.error.as_deref(),
        Some(
            "step 'escape' failed: path '../../etc/passwd' is outside the workspace or does not exist"
        )
    );
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert!(steps_of(&events, "after").is_empty());
    let last = events.last().unwrap().step().unwrap();
    assert_eq!(last.error, out.error);
    // Unknown tools are a missing reference, rejected before the run.
    let wf = Workflow::new("unknown").step(Step::for_each(
        "l",
        transcript_exec::Items::list(vec![json!(1)]),
        vec![Step::operation("x", "nope", json!({}))],
    ));
    let err = svc
        .run(
            &WorkflowSet::new("u.yaml", wf),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "u.yaml: step 'l.x': unknown tool 'nope' (not registered with the router)"
    );
}

#[tokio::test]
async fn command_failure_and_terminal_failure() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = service(&ws, &factory, true).await;
    let wf = Workflow::new("cmd").step(Step::command("bad", "echo out; echo oops >&2; exit 3"));
    let out = run(&svc, &WorkflowSet::new("c", wf)).await;
    assert_eq!(out.status, Status::Failed);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    let bad = step_completed(&events, "bad");
    assert_eq!(
        bad.error.as_deref(),
        Some("command exited with code 3: oops")
    );
    assert_eq!(
        bad.result.as_ref().unwrap().to_value(),
        json!({"command": "echo out; echo oops >&2; exit 3", "stdout": "out\n", "stderr": "oops\n", "exit_code": 3, "confined": true})
    );

    let wf = Workflow::new("term")
        .step(Step::for_each(
            "loop",
            transcript_exec::Items::list(vec![json!(1), json!(2)]),
            vec![Step::terminal("stop", false, "gave up at {{loop.item}}")],
        ))
        .step(Step::command("after", "echo no"));
    let out = run(&svc, &WorkflowSet::new("t", wf)).await;
    assert_eq!(out.status, Status::Failed);
    assert_eq!(out.error.as_deref(), Some("gave up at 1"));
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(
        step_completed(&events, "loop.stop")
            .result
            .as_ref()
            .unwrap()
            .to_value(),
        json!({"status": "failed", "message": "gave up at 1"})
    );
    assert!(steps_of(&events, "after").is_empty());
    assert_eq!(events.iter().filter(|e| e.path == "loop.stop").count(), 2);
}

#[tokio::test]
async fn parallel_modes_in_both_scheduling_modes() {
    for deterministic in [true, false] {
        let (_d, ws) = workspace();
        let factory = MemoryFactory::new();
        let svc = service(&ws, &factory, deterministic).await;
        let wf = Workflow::new("first")
            .step(Step::parallel(
                "race",
                ParallelMode::FirstSuccess,
                vec![
                    Step::command("broken", "exit 1"),
                    Step::command("works", "echo fine"),
                ],
            ))
            .step(Step::command_argv(
                "after",
                ["echo", "{{ steps.works.output | enum(fine) }}"],
            ));
        let out = run(&svc, &WorkflowSet::new("f", wf)).await;
        assert!(out.succeeded(), "{:?}", out.error);
        let events = factory.events(out.run_id);
        assert_well_formed(&events);
        // Concurrently, the winner may cancel the loser before it fails.
        let broken = step_completed(&events, "race.broken")
            .error
            .clone()
            .unwrap();
        assert!(
            broken == "command exited with code 1" || (!deterministic && broken == "cancelled"),
            "{broken}"
        );
        assert_eq!(
            step_completed(&events, "after")
                .result
                .as_ref()
                .unwrap()
                .to_value()["stdout"],
            json!("fine\n")
        );

        let wf = Workflow::new("all").step(Step::parallel(
            "both",
            ParallelMode::AllSucceed,
            vec![Step::command("ok", "true"), Step::command("ko", "exit 2")],
        ));
        let out = run(&svc, &WorkflowSet::new("a", wf)).await;
        assert_eq!(out.status, Status::Failed);
        assert_eq!(
            out.error.as_deref(),
            Some("step 'both' failed: branch 'ko': command exited with code 2")
        );
        let events = factory.events(out.run_id);
        assert_well_formed(&events);
        assert!(step_completed(&events, "both.ok").error.is_none());
    }
}

#[tokio::test]
async fn while_loop_and_limits() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = service(&ws, &factory, true).await;
    let wf = Workflow::new("w")
        .step(Step::while_loop(
            "count",
            "{{steps.n.output}} != 3",
            10,
            vec![Step::command("n", "echo $((N + 1))").with_env("N", "{{loop.index}}")],
        ))
        .output("iterations", "{{steps.count.output}}");
    let out = run(&svc, &WorkflowSet::new("w", wf)).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert_eq!(out.outputs["iterations"], json!("3"));
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(
        step_completed(&events, "count")
            .result
            .as_ref()
            .unwrap()
            .to_value(),
        json!({"iterations": 3})
    );
    let its: Vec<u64> = events
        .iter()
        .filter(|e| e.path == "count.n" && e.kind.known() == Some(EventType::StepStarted))
        .map(|e| e.iteration)
        .collect();
    assert_eq!(its, vec![0, 1, 2]);

    let wf = Workflow::new("forever").step(Step::while_loop(
        "spin",
        "yes",
        2,
        vec![Step::command("s", "true")],
    ));
    let out = run(&svc, &WorkflowSet::new("f", wf)).await;
    assert_eq!(
        out.error.as_deref(),
        Some("step 'spin' failed: condition still true after 2 iterations")
    );
    assert_well_formed(&factory.events(out.run_id));
}

#[tokio::test]
async fn custom_step_panic_is_caught_and_closed() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .custom_step(
            "explode",
            Arc::new(FnStep(
                |_: &CustomStepContext| -> Result<Value, StepError> { panic!("kaboom") },
            )),
        )
        .unwrap()
        .custom_step(
            "refuse",
            Arc::new(FnStep(|_: &CustomStepContext| Err("no thanks".into()))),
        )
        .unwrap()
        .build()
        .unwrap();
    let wf = Workflow::new("p").step(Step::parallel(
        "par",
        ParallelMode::AllSucceed,
        vec![
            Step::custom("a", "explode", Value::Null),
            Step::custom("b", "refuse", Value::Null),
        ],
    ));
    let out = run(&svc, &WorkflowSet::new("p", wf)).await;
    assert_eq!(out.status, Status::Failed);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(
        step_completed(&events, "par.a").error.as_deref(),
        Some("custom step 'explode' panicked: kaboom")
    );
    assert_eq!(step_completed(&events, "par.a").kind, "explode");
    assert_eq!(
        step_completed(&events, "par.b").error.as_deref(),
        Some("no thanks")
    );
}

#[tokio::test]
async fn timeout_closes_the_step_and_everything_inside() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = service(&ws, &factory, false).await;
    let wf = Workflow::new("slow").step(
        Step::parallel(
            "block",
            ParallelMode::AllSucceed,
            vec![
                Step::command("sleepy", "sleep 30"),
                Step::for_each(
                    "loop",
                    transcript_exec::Items::list(vec![json!(1)]),
                    vec![Step::command("sleepier", "sleep 30")],
                ),
            ],
        )
        .with_timeout(Duration::from_millis(200)),
    );
    let started = std::time::Instant::now();
    let out = run(&svc, &WorkflowSet::new("s", wf)).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the sleeps were killed"
    );
    assert_eq!(out.status, Status::Failed);
    assert_eq!(
        out.error.as_deref(),
        Some("step 'block' failed: timed out after 200ms")
    );
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(
        step_completed(&events, "block.sleepy").error.as_deref(),
        Some("cancelled")
    );
    assert_eq!(
        step_completed(&events, "block.loop.sleepier")
            .error
            .as_deref(),
        Some("cancelled")
    );
}

/// A custom step that reports it started, then waits for cancellation.
struct Gate {
    started: tokio::sync::mpsc::UnboundedSender<String>,
}

#[async_trait::async_trait]
impl CustomStep for Gate {
    async fn run(&self, ctx: CustomStepContext) -> Result<Value, StepError> {
        self.started.send(ctx.path.clone()).unwrap();
        ctx.cancel.cancelled().await;
        Err("gate saw cancellation".into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_mid_parallel_leaves_a_valid_file() {
    for deterministic in [false, true] {
        let (_d, ws) = workspace();
        let factory = MemoryFactory::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let svc = ExecutionService::deterministic_builder(&ws, ts0())
            .deterministic(deterministic)
            .recorder_factory(factory.clone())
            .custom_step("gate", Arc::new(Gate { started: tx }))
            .unwrap()
            .build()
            .unwrap();
        let wf = Workflow::new("cancel")
            .step(Step::command("before", "true"))
            .step(Step::parallel(
                "par",
                ParallelMode::AllSucceed,
                vec![
                    Step::custom("g1", "gate", Value::Null),
                    Step::for_each(
                        "loop",
                        transcript_exec::Items::list(vec![json!(1), json!(2)]),
                        vec![Step::custom("g2", "gate", Value::Null)],
                    ),
                    Step::command("quick", "true"),
                ],
            ))
            .step(Step::command("after", "true"));
        let set = WorkflowSet::new("c", wf);
        let cancel = CancellationToken::new();
        let handle = {
            let svc = svc.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { svc.run(&set, Map::new(), cancel).await })
        };
        // Wait until a gate is inside the block, then cancel.
        let first = rx.recv().await.unwrap();
        assert!(first.starts_with("par."));
        cancel.cancel();
        let out = handle.await.unwrap().unwrap();
        assert_eq!(out.status, Status::Cancelled);
        assert_eq!(out.error.as_deref(), Some("cancelled"));
        let events = factory.events(out.run_id);
        assert_well_formed(&events);
        assert_eq!(
            step_completed(&events, "par").error.as_deref(),
            Some("cancelled")
        );
        assert!(steps_of(&events, "after").is_empty());
        assert_eq!(
            events.last().unwrap().step().unwrap().error.as_deref(),
            Some("cancelled")
        );
        assert!(factory.recorder(out.run_id).unwrap().closed());
        let tree = factory.tree(out.run_id);
        assert!(tree.all_problems().is_empty());
        assert_eq!(canon_tree(&tree.steps), canon_exec(&out.steps));
    }
}

#[tokio::test]
async fn invalid_workflows_are_rejected_before_any_event() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = service(&ws, &factory, true).await;
    let set = WorkflowSet::load(fixtures().join("workflows/invalid_kind.yaml")).unwrap();
    let err = svc
        .run(&set, Map::new(), CancellationToken::new())
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.ends_with("invalid_kind.yaml: step 'loop.mystery': unknown step kind 'teleport' (not built in and not registered)"), "{msg}");
    let err = WorkflowSet::load(fixtures().join("workflows/cycle_a.yaml")).unwrap_err();
    assert!(err.reason.starts_with("call_workflow cycle: "), "{err}");
    assert!(err.reason.contains("cycle_b.yaml"), "{err}");
    let err = svc
        .run(
            &WorkflowSet::load(fixtures().join("workflows/kinds.yaml")).unwrap(),
            Map::from_iter([("nope".to_owned(), json!(1))]),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "workflow 'kinds': unknown input 'nope'");
    assert!(
        factory.runs.lock().unwrap().is_empty(),
        "nothing was recorded"
    );
}

#[tokio::test]
async fn sub_workflows_nest_three_levels_and_respect_the_depth_limit() {
    let leaf = Workflow::new("leaf")
        .declare(
            transcript_exec::InputDef::new("x", None)
                .typed(transcript_exec::InputType::Enum)
                .values(["a", "b"]),
        )
        .step(Step::command_argv("echo", ["echo", "leaf", "{{inputs.x}}"]))
        .output("said", "{{steps.echo.output}}");
    let mid = Workflow::new("mid")
        .input("x", None)
        .step(Step::call_workflow(
            "call_leaf",
            "leaf",
            BTreeMap::from([("x".to_owned(), json!("{{inputs.x}}"))]),
        ))
        .output("said", "{{steps.call_leaf.output}}");
    let top = Workflow::new("top")
        .step(Step::for_each(
            "each",
            transcript_exec::Items::list(vec![json!("a"), json!("b")]),
            vec![Step::call_workflow(
                "call_mid",
                "mid",
                BTreeMap::from([("x".to_owned(), json!("{{loop.item}}"))]),
            )],
        ))
        .output("all", "{{steps.each.output}}");
    let set = WorkflowSet::new("top", top)
        .with("mid", mid)
        .with("leaf", leaf);

    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let out = run(&svc, &set).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert_eq!(
        out.outputs["all"],
        json!([{"said": {"said": "leaf a"}}, {"said": {"said": "leaf b"}}])
    );
    assert_eq!(
        factory.runs.lock().unwrap().len(),
        5,
        "1 + 2 mid + 2 leaf files"
    );
    let tree = factory.tree(out.run_id);
    assert!(tree.all_problems().is_empty());
    assert_eq!(tree.outline(), exec_outline(&out));
    // Each child file: own seq from 1, parent linkage at every depth.
    let top_events = factory.events(out.run_id);
    for call in top_events
        .iter()
        .filter(|e| e.kind.known() == Some(EventType::CallWorkflowStarted))
    {
        let mid_id = call.child_run_id.unwrap();
        let mid_events = factory.events(mid_id);
        assert_well_formed(&mid_events);
        assert!(
            mid_events
                .iter()
                .all(|e| e.parent_run_id == Some(out.run_id))
        );
        let leaf_id = mid_events.iter().find_map(|e| e.child_run_id).unwrap();
        let leaf_events = factory.events(leaf_id);
        assert_well_formed(&leaf_events);
        assert!(leaf_events.iter().all(|e| e.parent_run_id == Some(mid_id)));
    }
    let completed = top_events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::CallWorkflowCompleted))
        .unwrap();
    assert_eq!(
        completed
            .step()
            .unwrap()
            .result
            .as_ref()
            .unwrap()
            .to_value(),
        json!({"said": {"said": "leaf a"}})
    );

    // Depth limit: top (0) -> mid (1) -> leaf (2) exceeds a limit of 1.
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .max_call_depth(1)
        .build()
        .unwrap();
    let out = run(&svc, &set).await;
    assert_eq!(out.status, Status::Failed);
    let err = out.error.unwrap();
    assert!(
        err.contains("call_workflow nesting limit of 1 exceeded (calling 'leaf' at depth 2)"),
        "{err}"
    );
    assert!(err.contains("workflow 'mid' failed"), "{err}");
    let tree = factory.tree(out.run_id);
    assert!(tree.all_problems().is_empty(), "{:?}", tree.all_problems());
    for r in factory.runs.lock().unwrap().iter() {
        assert_well_formed(&decode_all(&r.bytes()));
    }
}

#[tokio::test]
async fn failing_child_fails_the_parent_step_with_its_error() {
    let child = Workflow::new("child").step(Step::command("bad", "exit 7"));
    let parent =
        Workflow::new("parent").step(Step::call_workflow("call", "child", BTreeMap::new()));
    let set = WorkflowSet::new("parent", parent).with("child", child);
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let out = run(&svc, &set).await;
    assert_eq!(
        out.error.as_deref(),
        Some(
            "step 'call' failed: workflow 'child' failed: step 'bad' failed: command exited with code 7"
        )
    );
    let events = factory.events(out.run_id);
    let done = events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::CallWorkflowCompleted))
        .unwrap();
    assert_eq!(
        done.step().unwrap().error.as_deref(),
        Some("workflow 'child' failed: step 'bad' failed: command exited with code 7")
    );
    let child_events = factory.events(done.child_run_id.unwrap());
    assert_eq!(
        child_events
            .last()
            .unwrap()
            .step()
            .unwrap()
            .error
            .as_deref(),
        Some("step 'bad' failed: command exited with code 7")
    );
    match &events.last().unwrap().payload {
        DecodedPayload::Step(p) => assert_eq!(p.kind, "workflow"),
        other => panic!("{other:?}"),
    }
}

/// Runs kinds.yaml with audit + display, with or without a transcript.
async fn coexistence_run(
    with_recorder: bool,
) -> (Vec<u8>, Vec<String>, Option<Arc<MemoryFactory>>) {
    let (_d, ws) = workspace();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit_path = audit_dir.path().join("audit.jsonl");
    let display = Arc::new(transcript_exec::CollectDisplay::default());
    let factory = MemoryFactory::new();
    // Audit and display get their own stepping clock; the recorder has another.
    let mut builder = ExecutionService::deterministic_builder(&ws, ts0())
        .clock(Arc::new(transcript_domain::ManualClock::stepping(ts0(), 7)))
        .audit_file(&audit_path)
        .display(display.clone())
        .router(plugin_router().await)
        .custom_step("stamp", stamp())
        .unwrap();
    if with_recorder {
        builder = builder.recorder_factory(factory.clone());
    }
    let svc = builder.build().unwrap();
    let set = WorkflowSet::load(fixtures().join("workflows/kinds.yaml")).unwrap();
    let out = run(&svc, &set).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert!(out.audit_errors.is_empty());
    let lines = display.events().iter().map(|e| e.render()).collect();
    (
        std::fs::read(&audit_path).unwrap(),
        lines,
        with_recorder.then_some(factory),
    )
}

#[tokio::test]
async fn audit_and_display_are_identical_with_and_without_a_transcript() {
    let (audit_plain, display_plain, _) = coexistence_run(false).await;
    let (audit_rec, display_rec, factory) = coexistence_run(true).await;
    assert!(
        !factory.unwrap().runs.lock().unwrap().is_empty(),
        "transcripts were written"
    );
    assert_eq!(audit_plain, audit_rec, "audit.jsonl byte-identical");
    assert_eq!(display_plain, display_rec, "display events identical");
    // Paired start/end records: every step_start has a step_end.
    let text = String::from_utf8(audit_plain).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let starts = records
        .iter()
        .filter(|r| r["event"] == "step_start")
        .count();
    let ends = records.iter().filter(|r| r["event"] == "step_end").count();
    assert_eq!(starts, ends);
    assert!(starts > 20);
    assert_eq!(records[0]["event"], "run_start");
    assert_eq!(records[0]["ts"], "2026-06-08T08:00:00.000Z");
    assert_eq!(records[1]["ts"], "2026-06-08T08:00:00.007Z");
    assert!(records.iter().any(|r| r["child_run_id"].is_string()));
    assert_eq!(
        display_plain[0],
        "run kinds (00000000-0000-4000-8000-000000000001) started"
    );
    assert_eq!(display_plain[1], "  > greet[0] (command)");
    assert_eq!(display_plain[2], "  < greet[0] ok in 7ms");
}

/// `ServiceBuilder::tool` adds one tool beside the built-in ones (#34): a workflow calls both,
/// and the custom tool's call is recorded as a router-fidelity pair.
#[tokio::test]
async fn builder_tool_adds_a_tool_beside_the_builtins() {
    struct Shout;
    #[async_trait::async_trait]
    impl transcript_exec::Tool for Shout {
        async fn call(
            &self,
            _: &transcript_exec::ToolContext,
            input: Value,
        ) -> Result<Value, transcript_exec::ToolError> {
            Ok(json!(
                input["text"].as_str().unwrap_or_default().to_uppercase()
            ))
        }
    }
    let (_d, ws) = workspace();
    std::fs::write(ws.join("in.txt"), "hello").unwrap();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::builder(
        &ws,
        Arc::new(transcript_domain::ManualClock::new(ts0())),
        Arc::new(SequentialRunIds::default()),
    )
    .recorder_factory(factory.clone())
    .tool("shout", Arc::new(Shout))
    .build()
    .unwrap();
    let wf = Workflow::new("tools")
        .step(Step::operation(
            "read",
            "read_file",
            json!({"path": "in.txt"}),
        ))
        .step(Step::operation(
            "loud",
            "shout",
            json!({"text": "{{steps.read.output}}"}),
        ))
        .output("loud", "{{steps.loud.output}}");
    let out = run(&svc, &WorkflowSet::new("tools", wf)).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert_eq!(out.outputs["loud"], json!("HELLO"));
    let events = factory.events(out.run_id);
    let shout: Vec<_> = events
        .iter()
        .filter_map(|e| e.tool())
        .filter(|t| t.name == "shout")
        .collect();
    assert_eq!(shout.len(), 2, "one tool.call and one tool.result");
    assert_eq!(shout[0].call_id, shout[1].call_id);
    assert!(shout.iter().all(|t| t.fidelity == Fidelity::Router));
}

#[test]
fn custom_step_registration_errors_are_typed() {
    let (_d, ws) = workspace();
    let refused = |name: &str| match ExecutionService::deterministic_builder(&ws, ts0())
        .custom_step(
            name,
            Arc::new(FnStep(|_: &CustomStepContext| Ok(Value::Null))),
        ) {
        Err(e) => e,
        Ok(_) => panic!("'{name}' was accepted"),
    };
    let builtin = refused("command");
    assert_eq!(builtin, RegisterError::BuiltinKind("command".into()));
    assert_eq!(builtin.to_string(), "'command' is a built-in step kind");
    assert_eq!(refused(""), RegisterError::EmptyName);
}

/// A custom step's `?` on a failed tool call fails the step with the tool's error.
#[tokio::test]
async fn a_custom_step_fails_with_the_tool_error_it_propagates() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .custom_step("reader", Arc::new(Reader))
        .unwrap()
        .build()
        .unwrap();
    let wf = Workflow::new("t").step(Step::custom("r", "reader", json!({})));
    let out = svc
        .run(
            &WorkflowSet::new("t", wf),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let error = out.steps[0].error.clone().unwrap_or_default();
    assert!(error.contains("outside the workspace"), "{error}");
}

struct Reader;

#[async_trait::async_trait]
impl CustomStep for Reader {
    async fn run(&self, ctx: CustomStepContext) -> Result<Value, StepError> {
        let read = ctx
            .call_tool("read_file", json!({"path": "../../etc/passwd"}))
            .await?;
        Ok(read)
    }
}

#[test]
fn the_unknown_reference_error_names_workflow_dir_and_the_description_is_kept() {
    let err = match transcript_exec::Template::parse("{{nope}}") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("'nope' parsed"),
    };
    assert!(err.contains("workflow.dir"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.yaml");
    std::fs::write(
        &file,
        "name: w\ndescription: says what it is for\nsteps:\n  - name: a\n    type: command\n    command: \"true\"\n",
    )
    .unwrap();
    let set = WorkflowSet::load(&file).unwrap();
    let root = set.root().unwrap();
    assert_eq!(root.description.as_deref(), Some("says what it is for"));
}
