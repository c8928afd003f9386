//! `run.started` records where a run came from (wire decision 16): the workflow file as
//! loaded (its path as given and the sha256 of its bytes), the inputs with secret ones
//! `"***"`, and, for a replay, the run it replays; child runs carry their own file and inputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventType, RunId};
use transcript_exec::{ExecutionService, WorkflowSet};

use support::*;

#[tokio::test]
async fn run_started_names_the_file_its_hash_the_inputs_masked_and_the_replayed_run() {
    let (dir, ws) = workspace();
    let root = dir.path().join("root.yaml");
    let child = dir.path().join("child.yaml");
    let root_text = "name: root\ninputs:\n  - name: token\n    secret: true\n  - name: n\n    type: integer\nsteps:\n  - name: call\n    type: call_workflow\n    workflow: child.yaml\n    inputs: { key: \"{{inputs.token}}\", n: \"{{inputs.n}}\" }\n";
    let child_text = "name: child\ninputs:\n  - name: key\n    secret: true\n  - name: n\n    type: integer\nsteps:\n  - name: s\n    type: command\n    command: [\"true\", \"{{inputs.n}}\"]\n";
    std::fs::write(&root, root_text).unwrap();
    std::fs::write(&child, child_text).unwrap();
    let factory = MemoryFactory::new();
    let replayed = RunId::parse("11111111-2222-4333-8444-555555555555").unwrap();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .replay_of(replayed)
        .build()
        .unwrap();
    let set = WorkflowSet::load(&root).unwrap();
    let mut inputs = Map::new();
    inputs.insert("token".into(), json!("s3cr3t-value"));
    inputs.insert("n".into(), json!("7"));
    let out = svc
        .run(&set, inputs, CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    let started = |id: RunId| {
        let events = factory.events(id);
        let first = events.first().unwrap();
        assert_eq!(first.kind.known(), Some(EventType::RunStarted));
        first.step().unwrap().clone()
    };
    let hex = |text: &str| -> String {
        Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let r = started(out.run_id);
    let source = r.workflow.unwrap();
    assert_eq!(source.path, root.display().to_string());
    assert_eq!(source.sha256, hex(root_text));
    // The integer input is recorded as its shape writes it; the secret never.
    assert_eq!(
        r.inputs.unwrap().to_value(),
        json!({"token": "***", "n": 7})
    );
    assert_eq!(r.replay_of.as_deref(), Some(replayed.to_string().as_str()));
    let child_id = factory
        .events(out.run_id)
        .iter()
        .find_map(|e| e.child_run_id)
        .expect("the call names its child run");
    let c = started(child_id);
    assert_eq!(c.workflow.unwrap().sha256, hex(child_text));
    assert_eq!(c.inputs.unwrap().to_value(), json!({"key": "***", "n": 7}));
    // A child is not the replay: only the root names the replayed run.
    assert_eq!(c.replay_of, None);
    let all: Vec<Value> = factory
        .events(out.run_id)
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert!(!format!("{all:?}").contains("s3cr3t-value"), "{all:?}");
}
