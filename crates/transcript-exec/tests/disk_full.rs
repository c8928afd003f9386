//! A transcript that cannot be written stops the run (#17 item 1): the
//! first failed record cancels it, it ends failed with the OS cause,
//! `run.completed` is still attempted, child failures are reported too, and
//! the outcome never says success.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_domain::{
    EventDraft, EventType, RecordError, Recorder, RecorderFactory, RunId, Seq, Subscription,
};
use transcript_exec::{ExecutionService, Status, Workflow, WorkflowSet};

use support::*;

/// Accepts `budget` records, then fails every one with ENOSPC; keeps the
/// type of every event it was asked to record.
struct FullDisk {
    inner: MemoryRecorder,
    budget: usize,
    seen: AtomicUsize,
    attempted: Mutex<Vec<EventType>>,
}

#[async_trait]
impl Recorder for FullDisk {
    fn run_id(&self) -> RunId {
        self.inner.run_id()
    }
    fn parent_run_id(&self) -> Option<RunId> {
        self.inner.parent_run_id()
    }
    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        self.attempted
            .lock()
            .unwrap()
            .push(draft.payload.event_type());
        if self.seen.fetch_add(1, Ordering::SeqCst) >= self.budget {
            return Err(RecordError::Storage {
                path: "st/x.jsonl".into(),
                message: "write failed".into(),
                source: Some(std::io::Error::from_raw_os_error(28)),
            });
        }
        self.inner.record(draft).await
    }
    async fn subscribe(&self, from: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        self.inner.subscribe(from).await
    }
    async fn close(&self) -> Result<(), RecordError> {
        self.inner.close().await
    }
}

/// Root runs get `root_budget` records, child runs `child_budget`;
/// `refuse_children` makes opening a child transcript fail.
struct FullDiskFactory {
    root_budget: usize,
    child_budget: usize,
    refuse_children: bool,
    runs: Mutex<HashMap<RunId, Arc<FullDisk>>>,
}

impl FullDiskFactory {
    fn new(root_budget: usize, child_budget: usize) -> Arc<Self> {
        Arc::new(Self {
            root_budget,
            child_budget,
            refuse_children: false,
            runs: Mutex::default(),
        })
    }
    fn run(&self, id: RunId) -> Arc<FullDisk> {
        self.runs.lock().unwrap()[&id].clone()
    }
}

#[async_trait]
impl RecorderFactory for FullDiskFactory {
    async fn create(
        &self,
        run_id: RunId,
        parent: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        if parent.is_some() && self.refuse_children {
            return Err(RecordError::Storage {
                path: "st".into(),
                message: "cannot create".into(),
                source: Some(std::io::Error::from_raw_os_error(28)),
            });
        }
        let r = Arc::new(FullDisk {
            inner: MemoryRecorder::new(
                run_id,
                parent,
                Arc::new(transcript_domain::ManualClock::stepping(ts0(), 1)),
            ),
            budget: if parent.is_some() {
                self.child_budget
            } else {
                self.root_budget
            },
            seen: AtomicUsize::new(0),
            attempted: Mutex::default(),
        });
        self.runs.lock().unwrap().insert(run_id, r.clone());
        Ok(r)
    }
}

const ENOSPC: &str = "No space left on device (os error 28)";

fn three_steps() -> WorkflowSet {
    let yaml = "name: w\nsteps:\n  - name: a\n    type: command\n    command: echo a\n  - name: b\n    type: command\n    command: echo b\n  - name: c\n    type: command\n    command: echo c\n";
    WorkflowSet::new("w.yaml", Workflow::from_yaml(yaml, "w.yaml").unwrap())
}

fn with_child() -> WorkflowSet {
    let parent = "name: p\nsteps:\n  - name: call\n    type: call_workflow\n    workflow: c.yaml\n  - name: after\n    type: command\n    command: echo after\n";
    let child = "name: c\nsteps:\n  - name: x\n    type: command\n    command: echo x\n  - name: y\n    type: command\n    command: echo y\n";
    WorkflowSet::new("p.yaml", Workflow::from_yaml(parent, "p.yaml").unwrap())
        .with("c.yaml", Workflow::from_yaml(child, "c.yaml").unwrap())
}

#[tokio::test]
async fn the_first_failed_record_stops_the_run_and_it_never_reports_success() {
    let (_d, ws) = workspace();
    // run.started, a started, a completed, then the disk is full.
    let factory = FullDiskFactory::new(3, usize::MAX);
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let out = svc
        .run(&three_steps(), Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.status, Status::Failed);
    assert!(!out.succeeded());
    let error = out.error.clone().unwrap();
    assert!(error.starts_with("transcript write failed: "), "{error}");
    assert!(error.contains(ENOSPC), "{error}");
    assert!(out.outputs.is_empty());
    // Step b's start failed: the run stopped there, c never started.
    let ran: Vec<&str> = out.steps.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(ran, ["a", "b"]);
    assert_eq!(out.steps[1].status, Status::Cancelled);
    assert!(!out.transcript_errors.is_empty());
    assert!(out.transcript_errors.iter().all(|e| e.contains(ENOSPC)));
    // run.completed was attempted, last.
    let rec = factory.run(out.run_id);
    let attempted = rec.attempted.lock().unwrap().clone();
    assert_eq!(attempted.last(), Some(&EventType::RunCompleted));
    // What is on disk is valid (the acknowledged prefix).
    let events = decode_all(&rec.inner.bytes());
    assert_eq!(events.len(), 3);
}

#[tokio::test]
async fn a_child_runs_failure_fails_the_parent_step_and_is_reported() {
    let (_d, ws) = workspace();
    let factory = FullDiskFactory::new(usize::MAX, 2);
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let out = svc
        .run(&with_child(), Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.status, Status::Failed);
    let call = &out.steps[0];
    assert_eq!(call.status, Status::Failed);
    assert!(
        call.error
            .as_deref()
            .unwrap()
            .contains("transcript write failed"),
        "{:?}",
        call.error
    );
    let child = call.child.as_ref().unwrap();
    assert_eq!(child.status, Status::Failed);
    assert!(!child.transcript_errors.is_empty());
    let prefix = format!("child run {}: transcript write failed", child.run_id);
    assert!(
        out.transcript_errors.iter().any(|e| e.starts_with(&prefix)),
        "{:?}",
        out.transcript_errors
    );
    // The parent's own file is complete.
    let parent = decode_all(&factory.run(out.run_id).inner.bytes());
    assert_well_formed(&parent);
    assert_eq!(
        factory.run(child.run_id).attempted.lock().unwrap().last(),
        Some(&EventType::RunCompleted)
    );
}

#[tokio::test]
async fn a_child_transcript_that_cannot_be_opened_fails_the_step() {
    let (_d, ws) = workspace();
    let factory = Arc::new(FullDiskFactory {
        root_budget: usize::MAX,
        child_budget: usize::MAX,
        refuse_children: true,
        runs: Mutex::default(),
    });
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let out = svc
        .run(&with_child(), Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.status, Status::Failed);
    let error = out.steps[0].error.clone().unwrap();
    assert!(
        error.contains("cannot open the transcript of child run"),
        "{error}"
    );
    assert!(error.contains(ENOSPC), "{error}");
    assert_eq!(out.steps.len(), 1, "the run stops at the failed step");
    assert_eq!(out.transcript_errors.len(), 1);
}
