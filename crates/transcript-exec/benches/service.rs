//! Recording cost inside the ExecutionService (issue 8 benchmark;
//! `cargo bench -p transcript-exec --bench service`, run by `cargo xtask bench`).
//! Plain `main`, prints a table.
//!
//! A 10,000-step workflow of in-process `operation` steps (each: step.started,
//! tool.call, tool.result, step.completed) runs
//!   (a) with a JsonlRecorder (Durability::None) in the target directory,
//!   (b) with no recorder (the engine alone),
//! and (c) the exact drafts the service emitted are recorded standalone,
//! one `record().await` after another, into a fresh JsonlRecorder.
//! The per-event recording cost inside the service is (a - b) / events and
//! is compared with (c) / events (target ratio <= 1.5). Rounds interleave
//! the three cases; medians are reported.
//!
//! Template scope sharing (#22): the cost of a `for_each` of 2,000 trivial
//! iterations after a step whose output is 20 MB, against the same loop after
//! an empty output (engine only; each minus the same run without the loop). Every iteration copies the scope; the copies share
//! step values and loop frames, so the ratio stays near 1 (target <= 1.5;
//! deep copies made it ~70x).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{
    EventDraft, ManualClock, RecordError, Recorder, RecorderFactory, RunId, RunIdGenerator, Seq,
    SequentialRunIds, Subscription, Timestamp,
};
use transcript_exec::{
    ExecutionService, Items, Step, Tool, ToolContext, ToolError, ToolRouter, Workflow, WorkflowSet,
};
use transcript_infra::{Durability, JsonlRecorder, JsonlRecorderFactory};

const STEPS: usize = 10_000;
const ROUNDS: usize = 5;

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("bench-transcript-exec");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Echo;

#[async_trait]
impl Tool for Echo {
    async fn call(&self, _ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        Ok(input)
    }
}

/// Keeps the drafts the service emits.
struct Capture {
    run_id: RunId,
    drafts: Mutex<Vec<EventDraft>>,
}

#[async_trait]
impl Recorder for Capture {
    fn run_id(&self) -> RunId {
        self.run_id
    }
    fn parent_run_id(&self) -> Option<RunId> {
        None
    }
    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        let mut d = self.drafts.lock().unwrap();
        d.push(draft);
        Ok(d.len() as Seq)
    }
    async fn subscribe(&self, _: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Err(RecordError::Closed)
    }
    async fn close(&self) -> Result<(), RecordError> {
        Ok(())
    }
}

fn workflow() -> WorkflowSet {
    let mut wf = Workflow::new("bench");
    for i in 0..STEPS {
        wf = wf.step(Step::operation(
            format!("s{i}"),
            "echo",
            json!({"n": i, "text": "payload of a typical in-process tool call"}),
        ));
    }
    WorkflowSet::new("bench", wf)
}

fn service(ws: &Path, factory: Option<Arc<dyn RecorderFactory>>) -> ExecutionService {
    let mut router = ToolRouter::new();
    router.register("echo", Arc::new(Echo));
    let start = Timestamp::UNIX_EPOCH;
    let mut b = ExecutionService::builder(
        ws,
        Arc::new(ManualClock::new(start)),
        Arc::new(SequentialRunIds::new()),
    )
    .router(router);
    if let Some(f) = factory {
        b = b.recorder_factory(f);
    }
    b.build().unwrap()
}

/// Returns a string of `input.bytes` bytes.
struct Filler;

#[async_trait]
impl Tool for Filler {
    async fn call(&self, _ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let n = input["bytes"].as_u64().unwrap_or(0) as usize;
        Ok(Value::String("x".repeat(n)))
    }
}

/// A step with an output of `bytes`, then (with `iterations > 0`) a loop whose iterations
/// each copy the scope.
fn loop_after(bytes: usize, iterations: u64) -> WorkflowSet {
    let mut wf =
        Workflow::new("loop").step(Step::operation("big", "filler", json!({ "bytes": bytes })));
    if iterations > 0 {
        let items = Items::list((0..iterations).map(Value::from));
        let body = vec![Step::operation(
            "tick",
            "echo",
            json!({"i": "{{loop.index}}"}),
        )];
        wf = wf.step(Step::for_each("each", items, body));
    }
    WorkflowSet::new("loop", wf)
}

/// Engine-only service with the loop bench's tools.
fn loop_service(ws: &Path) -> ExecutionService {
    let mut router = ToolRouter::new();
    router.register("echo", Arc::new(Echo));
    router.register("filler", Arc::new(Filler));
    ExecutionService::builder(
        ws,
        Arc::new(ManualClock::new(Timestamp::UNIX_EPOCH)),
        Arc::new(SequentialRunIds::new()),
    )
    .router(router)
    .build()
    .unwrap()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = bench_dir();
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let set = workflow();

    // Capture the exact drafts once.
    let capture = Arc::new(Capture {
        run_id: SequentialRunIds::with_prefix(0xcafe).next_run_id(),
        drafts: Mutex::new(Vec::new()),
    });
    let out = rt.block_on(service(&ws, None).run_with_recorder(
        &set,
        Map::new(),
        capture.clone(),
        CancellationToken::new(),
    ));
    assert!(out.unwrap().succeeded());
    let drafts = capture.drafts.lock().unwrap().clone();
    let events = drafts.len();

    let (mut with, mut without, mut alone) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let storage = dir.join(format!("svc-{round}"));
        std::fs::create_dir_all(&storage).unwrap();
        let factory: Arc<dyn RecorderFactory> =
            Arc::new(JsonlRecorderFactory::new(&storage).with_durability(Durability::None));
        let svc = service(&ws, Some(factory));
        let t = Instant::now();
        let o = rt
            .block_on(svc.run(&set, Map::new(), CancellationToken::new()))
            .unwrap();
        with.push(t.elapsed());
        assert!(o.succeeded() && o.transcript_errors.is_empty());

        let svc = service(&ws, None);
        let t = Instant::now();
        let o = rt
            .block_on(svc.run(&set, Map::new(), CancellationToken::new()))
            .unwrap();
        without.push(t.elapsed());
        assert!(o.succeeded());

        let storage = dir.join(format!("alone-{round}"));
        std::fs::create_dir_all(&storage).unwrap();
        let copy = drafts.clone();
        let t = Instant::now();
        rt.block_on(async {
            let rec = JsonlRecorder::builder(&storage, RunId::from_bytes([7; 16]))
                .durability(Durability::None)
                .open()
                .unwrap();
            for d in copy {
                rec.record(d).await.unwrap();
            }
            rec.close().await.unwrap();
        });
        alone.push(t.elapsed());
    }
    let (w, n, a) = (median(with), median(without), median(alone));
    let per = |d: Duration| d.as_nanos() as f64 / events as f64;
    let inside = (per(w) - per(n)).max(0.0);
    let standalone = per(a);
    println!(
        "transcript-exec service benchmark: {STEPS} operation steps, {events} events, median of {ROUNDS}"
    );
    println!("{:<52} {:>12} {:>12}", "case", "total ms", "ns/event");
    println!(
        "{:<52} {:>12.1} {:>12.0}",
        "(a) service + JsonlRecorder",
        w.as_secs_f64() * 1e3,
        per(w)
    );
    println!(
        "{:<52} {:>12.1} {:>12.0}",
        "(b) service, no recorder (engine only)",
        n.as_secs_f64() * 1e3,
        per(n)
    );
    println!(
        "{:<52} {:>12.1} {:>12.0}",
        "(c) standalone record() of the same drafts",
        a.as_secs_f64() * 1e3,
        standalone
    );
    println!(
        "{:<52} {:>12} {:>12.0}",
        "recording cost inside the service (a-b)", "", inside
    );
    println!(
        "ratio inside/standalone = {:.2}x (target <= 1.50x)",
        inside / standalone
    );
    println!(
        "ratio whole service/standalone = {:.2}x (engine work included, for reference)",
        per(w) / standalone
    );

    // Scope sharing: the loop's own cost (the run minus the same run without the loop, so
    // making and bounding the 20 MB output is not counted) after a 20 MB output vs after an
    // empty one.
    let sets = [
        loop_after(20 << 20, 2000),
        loop_after(20 << 20, 0),
        loop_after(0, 2000),
        loop_after(0, 0),
    ];
    let svc = loop_service(&ws);
    let mut took: [Vec<Duration>; 4] = Default::default();
    for _ in 0..ROUNDS {
        for (set, out) in sets.iter().zip(took.iter_mut()) {
            let t = Instant::now();
            let o = rt
                .block_on(svc.run(set, Map::new(), CancellationToken::new()))
                .unwrap();
            out.push(t.elapsed());
            assert!(o.succeeded(), "{:?}", o.error);
        }
    }
    let [a, b, c, d] = took.map(|v| median(v).as_secs_f64() * 1e3);
    let (after_big, after_empty) = ((a - b).max(0.0), (c - d).max(1e-6));
    println!(
        "{:<52} {:>12.1}",
        "for_each x2000 after a 20 MB output (loop only)", after_big
    );
    println!(
        "{:<52} {:>12.1}",
        "for_each x2000 after an empty output (loop only)", after_empty
    );
    println!(
        "ratio after 20 MB/after empty = {:.2}x (target <= 1.50x: scope copies share outputs)",
        after_big / after_empty
    );
    let _ = std::fs::remove_dir_all(&dir);
}
