//! The tools router on its own, plugin protocol failures, and the service's
//! error paths (bad inputs, failing recorder, panicking tools, stubborn steps).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{
    EventDraft, EventType, RecordError, Recorder, RecorderFactory, RunId, Seq, Subscription,
};
use transcript_exec::{
    CallScope, CustomStep, CustomStepContext, DisplayEvent, Emitter, ExecError, ExecutionService,
    ExternalPlugin, Plugin, Status, Step, Tool, ToolContext, ToolError, ToolRouter, Workflow,
    WorkflowSet,
};

use support::*;

fn scope(factory_rec: &Arc<MemoryRecorder>, ws: &std::path::Path) -> CallScope {
    CallScope::new(
        Emitter::new(Some(factory_rec.clone() as Arc<dyn Recorder>)),
        "step",
        3,
        ws.to_path_buf(),
        CancellationToken::new(),
    )
}

fn recorder() -> Arc<MemoryRecorder> {
    Arc::new(MemoryRecorder::new(
        RunId::from_bytes([1; 16]),
        None,
        Arc::new(transcript_domain::ManualClock::new(ts0())),
    ))
}

#[tokio::test]
async fn builtins_record_pairs_and_keep_failed_command_output() {
    let (_d, ws) = workspace();
    std::fs::create_dir(ws.join("sub")).unwrap();
    let rec = recorder();
    let s = scope(&rec, &ws);
    let router = ToolRouter::with_builtins();
    assert_eq!(
        router.names(),
        ["list_dir", "read_file", "run_command", "write_file"]
    );
    router
        .call_tool(
            &s,
            "write_file",
            json!({"path": "sub/a.txt", "content": "hi"}),
            None,
        )
        .await
        .unwrap();
    let listed = router
        .call_tool(&s, "list_dir", json!({}), None)
        .await
        .unwrap();
    assert_eq!(listed, json!(["sub/"]));
    let ok = router
        .call_tool(&s, "run_command", json!({"command": "cat sub/a.txt"}), None)
        .await
        .unwrap();
    assert_eq!(ok, json!({"stdout": "hi", "stderr": "", "exit_code": 0}));
    let err = router
        .call_tool(
            &s,
            "run_command",
            json!({"command": "echo no >&2; exit 4"}),
            Some("mine".into()),
        )
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "command exited with code 4");
    let err = router
        .call_tool(&s, "nope", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "unknown tool 'nope'");
    let err = router
        .call_tool(&s, "read_file", json!({"nope": 1}), None)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidInput("missing string field 'path'".into())
    );
    let err = router
        .call_tool(
            &s,
            "write_file",
            json!({"path": "/etc/x", "content": ""}),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::PathEscapes(_)), "{err}");

    let events = decode_all(&rec.bytes());
    assert_eq!(events.len(), 14, "one call/result pair per call");
    for pair in events.chunks(2) {
        assert_eq!(pair[0].kind.known(), Some(EventType::ToolCall));
        assert_eq!(pair[1].kind.known(), Some(EventType::ToolResult));
        assert_eq!(
            pair[0].tool().unwrap().call_id,
            pair[1].tool().unwrap().call_id
        );
        assert_eq!((pair[0].path.as_str(), pair[0].iteration), ("step", 3));
    }
    assert_eq!(
        events[9].tool().unwrap().error.as_deref(),
        Some("unknown tool 'nope'")
    );
    let failed = events[7].tool().unwrap();
    assert_eq!(failed.call_id, "mine");
    assert_eq!(failed.error.as_deref(), Some("command exited with code 4"));
    assert_eq!(
        failed.output.to_value(),
        json!({"stdout": "", "stderr": "no\n", "exit_code": 4})
    );
}

struct Panicky;

#[async_trait]
impl Tool for Panicky {
    async fn call(&self, _: &ToolContext, _: Value) -> Result<Value, ToolError> {
        panic!("tool blew up")
    }
}

struct Named(&'static str);

#[async_trait]
impl Plugin for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn operations(&self) -> Vec<String> {
        vec!["read_file".into()]
    }
    async fn call(&self, _: &str, _: &ToolContext, _: Value) -> Result<Value, ToolError> {
        Ok(Value::Null)
    }
}

#[tokio::test]
async fn panics_and_name_conflicts_are_errors() {
    let (_d, ws) = workspace();
    let rec = recorder();
    let mut router = ToolRouter::with_builtins();
    router.register("panicky", Arc::new(Panicky));
    let err = router
        .call_tool(&scope(&rec, &ws), "panicky", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Panicked("tool blew up".into()));
    let events = decode_all(&rec.bytes());
    assert_eq!(
        events[1].tool().unwrap().error.as_deref(),
        Some("tool panicked: tool blew up")
    );
    let err = router.register_plugin(Arc::new(Named("dup"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin 'dup': operation 'read_file' is already a registered tool"
    );
    assert!(router.has("panicky") && !router.has("dup"));
}

#[tokio::test]
async fn plugin_protocol_failures_are_clear() {
    let sh = |script: &str| vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let err = ExternalPlugin::start(&sh("read line; echo not-json"), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("response is not JSON"), "{err}");
    // Exiting at once: the request write or the response read fails first.
    let err = ExternalPlugin::start(&sh("exit 0"), None)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("plugin exited") || msg.contains("write failed"),
        "{msg}"
    );
    let err = ExternalPlugin::start(
        &sh("read line; echo '{\"id\":1,\"result\":{\"protocol\":1}}'"),
        None,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("missing 'operations'"), "{err}");
    let err = ExternalPlugin::start(&[], None).await.unwrap_err();
    assert!(err.to_string().contains("empty plugin command"), "{err}");
    let err = ExternalPlugin::start(&["/nonexistent/plugin".to_owned()], None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot start"), "{err}");

    // A plugin that answers describe, then dies mid-call.
    let p = ExternalPlugin::start(
        &sh("read line; echo '{\"id\":1,\"result\":{\"name\":\"dying\",\"protocol\":1,\"operations\":[\"go\"]}}'; read line; exit 1"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(p.name(), "dying");
    assert!(format!("{p:?}").contains("dying"));
    let mut router = ToolRouter::new();
    router.register_plugin(Arc::new(p)).unwrap();
    let (_d, ws) = workspace();
    let rec = recorder();
    let err = router
        .call_tool(&scope(&rec, &ws), "go", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "plugin 'dying': plugin exited");
    // The python plugin's error reply and its unknown-operation path.
    let py = ExternalPlugin::start(
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
    .unwrap();
    assert_eq!(py.operations(), ["upper", "word_count", "fail"]);
    let ctx = ToolContext {
        workspace: ws.clone(),
        cancel: CancellationToken::new(),
        call_id: "c".into(),
        limits: transcript_exec::ProcessLimits::default(),
    };
    let err = py.call("nope", &ctx, json!({})).await.unwrap_err();
    assert!(err.to_string().contains("unknown operation"), "{err}");
    assert_eq!(
        py.call("upper", &ctx, json!({"text": "ok"})).await.unwrap(),
        json!("OK")
    );
}

/// A recorder whose every record fails.
struct Broken;

#[async_trait]
impl Recorder for Broken {
    fn run_id(&self) -> RunId {
        RunId::from_bytes([9; 16])
    }
    fn parent_run_id(&self) -> Option<RunId> {
        None
    }
    async fn record(&self, _: EventDraft) -> Result<Seq, RecordError> {
        Err(RecordError::Storage {
            path: "/full".into(),
            message: "disk full".into(),
            source: None,
        })
    }
    async fn subscribe(&self, _: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Err(RecordError::Closed)
    }
    async fn close(&self) -> Result<(), RecordError> {
        Err(RecordError::Closed)
    }
}

struct BrokenFactory;

#[async_trait]
impl RecorderFactory for BrokenFactory {
    async fn create(&self, _: RunId, _: Option<RunId>) -> Result<Arc<dyn Recorder>, RecordError> {
        Err(RecordError::Locked {
            path: "x.jsonl".into(),
        })
    }
}

/// The decided policy (#17): a run whose transcript cannot be written
/// stops and fails; it never reports success.
#[tokio::test]
async fn recorder_failures_stop_and_fail_the_run() {
    let (_d, ws) = workspace();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .build()
        .unwrap();
    let wf = Workflow::new("w").step(Step::command("a", "true"));
    let out = svc
        .run_with_recorder(
            &WorkflowSet::new("w", wf.clone()),
            Map::new(),
            Arc::new(Broken),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!out.succeeded());
    assert_eq!(out.run_id, RunId::from_bytes([9; 16]));
    assert_eq!(
        out.error.as_deref(),
        Some("transcript write failed: transcript /full: disk full")
    );
    // run.started failed, so no step started; run.completed was attempted.
    assert!(out.steps.is_empty());
    assert_eq!(out.transcript_errors.len(), 2);
    // A factory that cannot open the root transcript stops the run before it starts…
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(Arc::new(BrokenFactory))
        .build()
        .unwrap();
    let err = svc
        .run(
            &WorkflowSet::new("w", wf.clone()),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::Recorder(_)), "{err}");
    // …and a child transcript that cannot open fails the calling step.
    let parent = Workflow::new("p").step(Step::call_workflow("c", "w", Default::default()));
    let out = svc
        .run_with_recorder(
            &WorkflowSet::new("p", parent).with("w", wf),
            Map::new(),
            recorder(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!out.succeeded());
    assert!(
        out.transcript_errors[0].contains("cannot open the transcript of child run"),
        "{:?}",
        out.transcript_errors
    );
}

#[tokio::test]
async fn inputs_workspace_and_audit_errors() {
    let (_d, ws) = workspace();
    let wf = Workflow::new("needs")
        .input("x", None)
        .step(Step::command("a", "echo \"$X\"").with_env("X", "{{inputs.x}}"));
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .build()
        .unwrap();
    let err = svc
        .run(
            &WorkflowSet::new("n", wf.clone()),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "workflow 'needs': required input 'x' not given"
    );
    let out = svc
        .run(
            &WorkflowSet::new("n", wf),
            Map::from_iter([("x".to_owned(), json!(5))]),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.steps[0].status, Status::Succeeded);

    let file = ws.join("file");
    std::fs::write(&file, "").unwrap();
    let err = ExecutionService::deterministic_builder(&file, ts0())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
    let err = ExecutionService::deterministic_builder(ws.join("missing"), ts0())
        .build()
        .unwrap_err();
    assert!(matches!(err, ExecError::Workspace { .. }));
    // The audit trail opens on the first record: its failures are the run's.
    std::fs::write(ws.join("plain"), "").unwrap();
    let audited = ExecutionService::deterministic_builder(&ws, ts0())
        .audit_file(ws.join("plain/audit.jsonl"))
        .build()
        .unwrap();
    let out = audited
        .run(
            &WorkflowSet::new("w", Workflow::new("w").step(Step::command("a", "true"))),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(
        out.audit_errors[0].contains("Not a directory"),
        "{:?}",
        out.audit_errors
    );
    assert!(format!("{svc:?}").contains("deterministic: true"));
    assert!(
        ExecutionService::deterministic_builder(&ws, ts0())
            .custom_step(
                "command",
                Arc::new(transcript_exec::FnStep(
                    |_: &transcript_exec::CustomStepContext| { Ok(Value::Null) }
                ))
            )
            .is_err()
    );
}

/// Ignores cancellation entirely.
struct Stubborn(tokio::sync::mpsc::UnboundedSender<()>);

#[async_trait]
impl CustomStep for Stubborn {
    async fn run(&self, _: CustomStepContext) -> Result<Value, transcript_exec::StepError> {
        self.0.send(()).unwrap();
        std::future::pending::<()>().await;
        Ok(Value::Null)
    }
}

#[tokio::test]
async fn a_step_ignoring_cancellation_is_dropped_after_the_grace_period() {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (dtx, mut drx) = tokio::sync::mpsc::unbounded_channel();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .display(Arc::new(dtx))
        .cancel_grace(Duration::from_millis(50))
        .custom_step("stubborn", Arc::new(Stubborn(tx)))
        .unwrap()
        .build()
        .unwrap();
    let wf = Workflow::new("s").step(Step::custom("wait", "stubborn", Value::Null));
    let cancel = CancellationToken::new();
    let run = {
        let svc = svc.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            svc.run(&WorkflowSet::new("s", wf), Map::new(), cancel)
                .await
        })
    };
    rx.recv().await.unwrap();
    cancel.cancel();
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.status, Status::Cancelled);
    assert_well_formed(&factory.events(out.run_id));
    let mut seen = Vec::new();
    while let Ok(e) = drx.try_recv() {
        seen.push(e);
    }
    assert!(matches!(
        seen.last(),
        Some(DisplayEvent::RunFinished {
            status: Status::Cancelled,
            ..
        })
    ));
    assert_eq!(
        seen.last().unwrap().render(),
        "run 00000000-0000-4000-8000-000000000001 cancelled: cancelled"
    );
}
