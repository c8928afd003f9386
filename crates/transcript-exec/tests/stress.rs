//! Many runs at once on one service, branches on real threads: every file
//! stays well formed and rebuilds to the executed tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::SequentialRunIds;
use transcript_exec::{
    CustomStepContext, ExecutionService, FnStep, Items, ParallelMode, Step, Workflow, WorkflowSet,
};

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_runs_with_concurrent_branches() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::builder(
        &ws,
        Arc::new(transcript_domain::ManualClock::new(ts0())),
        Arc::new(SequentialRunIds::with_prefix(0x5157)),
    )
    .recorder_factory(factory.clone())
    .custom_step(
        "spin",
        Arc::new(FnStep(|ctx: &CustomStepContext| {
            std::thread::yield_now();
            Ok(json!({"at": ctx.path, "i": ctx.iteration, "item": ctx.params["item"]}))
        })),
    )
    .unwrap()
    .build()
    .unwrap();
    let branch = |n: usize| {
        Step::for_each(
            format!("b{n}"),
            Items::list((0..4).map(|i| json!(i))),
            vec![
                Step::custom("s", "spin", json!({"item": "{{loop.item}}"})),
                Step::operation(
                    "w",
                    "write_file",
                    json!({"path": format!("f{n}.txt"), "content": "{{loop.index}}"}),
                ),
            ],
        )
    };
    let child = Workflow::new("child").step(Step::parallel(
        "p",
        ParallelMode::AllSucceed,
        (0..3).map(branch).collect(),
    ));
    let root = Workflow::new("root")
        .step(Step::parallel(
            "fan",
            ParallelMode::AllSucceed,
            (0..4).map(branch).collect(),
        ))
        .step(Step::call_workflow("sub", "child", BTreeMap::new()));
    let set = WorkflowSet::new("root", root).with("child", child);

    let mut handles = Vec::new();
    for _ in 0..12 {
        let svc = svc.clone();
        let set = set.clone();
        handles.push(tokio::spawn(async move {
            svc.run(&set, Map::new(), CancellationToken::new())
                .await
                .unwrap()
        }));
    }
    for h in handles {
        let out = h.await.unwrap();
        assert!(out.succeeded(), "{:?}", out.error);
        let events = factory.events(out.run_id);
        assert_well_formed(&events);
        // Every custom step saw its own iteration's item.
        for e in &events {
            if let Some(p) = e.step()
                && p.kind == "spin"
                && let Some(r) = &p.result
            {
                let v = r.to_value();
                assert_eq!(v["i"], json!(e.iteration));
                assert_eq!(v["item"], json!(e.iteration));
                assert_eq!(v["at"], json!(e.path));
            }
        }
        let tree = factory.tree(out.run_id);
        assert!(tree.all_problems().is_empty(), "{:?}", tree.all_problems());
        // 2 + 4 branches * (1 + 4 * 2) steps, plus the child's 1 + 3 * 9.
        assert_eq!(tree.walk().len(), 2 + 4 * 9 + 1 + 3 * 9);
    }
    assert_eq!(factory.runs.lock().unwrap().len(), 24);
}
