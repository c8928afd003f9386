//! The agent seam with real subprocesses replaying recorded provider streams.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{BlockType, DecodedEvent, EventType, Fidelity};
use transcript_exec::{
    AgentError, AgentReply, AgentRequest, AgentRunner, AgentSeam, AgentSpec, ExecutionService,
    Status, Step, StepKind, Workflow, WorkflowSet,
};

use support::*;

/// An agent step; confined (#56), it reads the fixtures and the tests' temporary files.
fn agent(name: &str, provider: &str, command: Vec<String>, prompt: &str) -> Step {
    agent_unconfined(name, provider, command, prompt).with_sandbox(
        transcript_exec::sandbox::StepSandbox {
            read: vec![fixtures(), std::env::temp_dir()],
            ..Default::default()
        },
    )
}

fn agent_unconfined(name: &str, provider: &str, command: Vec<String>, prompt: &str) -> Step {
    Step::new(
        name,
        StepKind::Agent(AgentSpec {
            provider: provider.into(),
            command: command.into_iter().map(Into::into).collect(),
            prompt: prompt.into(),
            system_prompt: Some("You are terse.".into()),
            ..AgentSpec::default()
        }),
    )
}

fn replay(file: &str) -> Vec<String> {
    vec![
        "cat".into(),
        fixtures().join("agents").join(file).display().to_string(),
    ]
}

fn of_type(events: &[DecodedEvent], t: EventType) -> Vec<&DecodedEvent> {
    events
        .iter()
        .filter(|e| e.kind.known() == Some(t))
        .collect()
}

async fn run_one(step: Step) -> (Arc<MemoryFactory>, transcript_exec::RunOutcome) {
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let wf = Workflow::new("agents")
        .input("topic", Some(json!("greetings")))
        .step(step);
    let out = svc
        .run(
            &WorkflowSet::new("a", wf),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    (factory, out)
}

#[tokio::test]
async fn cli_agent_replay_records_prompt_turns_and_agent_tool_calls() {
    let (factory, out) = run_one(agent(
        "review",
        "claude",
        replay("claude-review.jsonl"),
        "Review the {{inputs.topic}}.",
    ))
    .await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(
        types(&events),
        [
            "run.started",
            "step.started",
            "message.user",
            "tool.call",
            "tool.result",
            "message.assistant",
            "message.assistant",
            "step.completed",
            "run.completed"
        ]
    );
    // message.user: resolved prompt, then the system prompt (decision 11).
    let user = events[2].message().unwrap().to_message().unwrap();
    let texts: Vec<_> = user.blocks.iter().map(|b| b.as_text().unwrap()).collect();
    assert_eq!(texts, ["Review the greetings.", "You are terse."]);
    assert!(user.blocks.iter().all(|b| b.fidelity == Fidelity::Router));
    // Agent tool calls at agent_emitted fidelity, at the agent step's path.
    let call = events[3].tool().unwrap();
    assert_eq!(
        (call.name.as_str(), call.call_id.as_str()),
        // Qualified by step path and iteration, the provider's id kept.
        ("Read", "review#0/toolu_demo_1")
    );
    assert_eq!(call.fidelity, Fidelity::AgentEmitted);
    assert_eq!(
        events[4].tool().unwrap().output.to_value(),
        json!("hello world")
    );
    assert!(events[2..7].iter().all(|e| e.path == "review"));
    // Turns carry provider, model and usage (decision 10).
    let turn = events[5].message().unwrap().to_message().unwrap();
    assert_eq!(turn.provider.as_deref(), Some("claude"));
    assert_eq!(turn.model.as_deref(), Some("claude-demo-1"));
    assert_eq!(turn.usage.as_ref().unwrap().output_tokens, Some(9));
    let kinds: Vec<BlockType> = turn.blocks.iter().map(|b| b.block_type()).collect();
    assert_eq!(
        kinds,
        [
            BlockType::Thinking,
            BlockType::ToolUse,
            BlockType::ToolResult
        ]
    );
    let done = events[7].step().unwrap();
    assert_eq!(done.kind, "agent");
    assert_eq!(
        done.result.as_ref().unwrap().to_value(),
        json!("The greeting is friendly.")
    );
}

#[tokio::test]
async fn codex_replay_is_normalized_too() {
    let (factory, out) = run_one(agent(
        "sum",
        "codex",
        replay("codex-summary.jsonl"),
        "Count words",
    ))
    .await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    let turns = of_type(&events, EventType::MessageAssistant);
    assert!(!turns.is_empty());
    assert!(turns.iter().all(|t| {
        t.message()
            .unwrap()
            .to_message()
            .unwrap()
            .provider
            .as_deref()
            == Some("codex")
    }));
    let calls = of_type(&events, EventType::ToolCall);
    let results = of_type(&events, EventType::ToolResult);
    assert_eq!(calls.len(), 1);
    assert_eq!(results.len(), 1);
    assert_eq!(
        calls[0].tool().unwrap().call_id,
        results[0].tool().unwrap().call_id
    );
    assert_eq!(
        out.steps[0].error, None,
        "step succeeded with the final message"
    );
}

#[tokio::test]
async fn crashed_agent_keeps_its_dangling_tool_use_and_fails_the_step() {
    let script = format!(
        "cat '{}'; echo 'segfault in agent' >&2; exit 2",
        fixtures().join("agents/claude-partial.jsonl").display()
    );
    let (factory, out) = run_one(agent(
        "crash",
        "claude",
        vec!["sh".into(), "-c".into(), script],
        "Build it",
    ))
    .await;
    assert_eq!(out.status, Status::Failed);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    let turn = of_type(&events, EventType::MessageAssistant)[0]
        .message()
        .unwrap()
        .to_message()
        .unwrap();
    assert_eq!(turn.blocks.last().unwrap().block_type(), BlockType::ToolUse);
    assert_eq!(of_type(&events, EventType::ToolCall).len(), 1);
    assert!(of_type(&events, EventType::ToolResult).is_empty());
    let done = of_type(&events, EventType::StepCompleted)[0]
        .step()
        .unwrap();
    assert_eq!(
        done.error.as_deref(),
        Some("agent exited with code 2: segfault in agent")
    );
}

#[tokio::test]
async fn timed_out_agent_is_killed_and_recorded() {
    let script = format!(
        "cat '{}'; exec sleep 30",
        fixtures().join("agents/claude-partial.jsonl").display()
    );
    let started = std::time::Instant::now();
    let (factory, out) = run_one(
        agent(
            "hang",
            "claude",
            vec!["sh".into(), "-c".into(), script],
            "Build it",
        )
        .with_timeout(Duration::from_millis(500)),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        out.error.as_deref(),
        Some("step 'hang' failed: timed out after 500ms")
    );
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    // The turn printed before the hang is flushed before the step completes.
    let types = types(&events);
    let turn_at = types.iter().position(|t| t == "message.assistant").unwrap();
    let done_at = types.iter().position(|t| t == "step.completed").unwrap();
    assert!(turn_at < done_at);
}

#[tokio::test]
async fn unknown_provider_and_missing_runner_fail_cleanly() {
    let (factory, out) = run_one(agent("x", "nobody", replay("claude-review.jsonl"), "hi")).await;
    assert_eq!(out.status, Status::Failed);
    assert!(
        out.error.as_deref().unwrap().contains("no normalizer"),
        "{:?}",
        out.error
    );
    assert_well_formed(&factory.events(out.run_id));
    let (_, out) = run_one(agent("y", "nobody", Vec::new(), "hi")).await;
    assert_eq!(
        out.error.as_deref(),
        Some("step 'y' failed: no agent runner for provider 'nobody'")
    );
}

/// In which order a runner routes a call and reports it as agent-emitted.
#[derive(Clone, Copy, Debug)]
enum Order {
    /// Route, then report the call, then its result.
    RouteFirst,
    /// Report the call, route it, report the result.
    CallThenRoute,
    /// Report call and result, then route.
    ReportFirst,
    /// Route the same id twice (a model reusing an id).
    RouteTwice,
}

/// A runner that executes a tool through the router and also reports it as
/// agent-emitted: each call id must be recorded once (one `tool.call`, one
/// `tool.result`) whatever the order (US3).
struct RoutingRunner(Order);

#[async_trait::async_trait]
impl AgentRunner for RoutingRunner {
    async fn run(&self, req: AgentRequest, seam: &AgentSeam) -> Result<AgentReply, AgentError> {
        let input = json!({"path": "note.txt", "content": req.prompt});
        let raw = transcript_domain::RawJson::from_value(&input).unwrap();
        let route = || async {
            seam.call_tool("write_file", input.clone(), Some("call_7".into()))
                .await
                .map_err(|e| AgentError::Other(e.to_string()))
        };
        let report_call = || seam.agent_tool_call("write_file", "call_7", raw.clone());
        let report_result = || seam.agent_tool_result("write_file", "call_7", raw.clone(), None);
        match self.0 {
            Order::RouteFirst => {
                route().await?;
                report_call().await;
                report_result().await;
            }
            Order::CallThenRoute => {
                report_call().await;
                route().await?;
                report_result().await;
            }
            Order::ReportFirst => {
                report_call().await;
                report_result().await;
                route().await?;
            }
            Order::RouteTwice => {
                route().await?;
                route().await?;
            }
        }
        // An agent-only call is recorded once even if reported twice.
        let other = transcript_domain::RawJson::from_value(&json!({})).unwrap();
        seam.agent_tool_call("Think", "a1", other.clone()).await;
        seam.agent_tool_call("Think", "a1", other.clone()).await;
        seam.agent_tool_result("Think", "a1", other.clone(), None)
            .await;
        seam.agent_tool_result("Think", "a1", other, None).await;
        Ok(AgentReply {
            output: "done".into(),
            ..AgentReply::default()
        })
    }
}

#[tokio::test]
async fn router_executed_calls_are_not_double_counted_in_any_order() {
    use Fidelity::{AgentEmitted, Router};
    // (order, [(recorded id, fidelity of its tool.call, of its tool.result)]). Every execution
    // is recorded (#28): when the report's result came first, or the id already ran, the
    // execution gets its own id.
    for (order, recorded) in [
        (Order::RouteFirst, vec![("a#0/call_7", Router, Router)]),
        (
            Order::CallThenRoute,
            vec![("a#0/call_7", AgentEmitted, Router)],
        ),
        (
            Order::ReportFirst,
            vec![
                ("a#0/call_7", AgentEmitted, AgentEmitted),
                ("a#0/call_7~2", Router, Router),
            ],
        ),
        (
            Order::RouteTwice,
            vec![
                ("a#0/call_7", Router, Router),
                ("a#0/call_7~2", Router, Router),
            ],
        ),
    ] {
        let (_d, ws) = workspace();
        let factory = MemoryFactory::new();
        let svc = ExecutionService::deterministic_builder(&ws, ts0())
            .recorder_factory(factory.clone())
            .agent_runner("http", Arc::new(RoutingRunner(order)))
            .build()
            .unwrap();
        let mut step = agent("a", "http", Vec::new(), "remember");
        if let StepKind::Agent(spec) = &mut step.kind {
            spec.tools = vec!["write_file".into()];
        }
        let wf = Workflow::new("route").step(step);
        let out = svc
            .run(
                &WorkflowSet::new("r", wf),
                Map::new(),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(out.succeeded(), "{order:?}: {:?}", out.error);
        // The tool ran in every order.
        assert_eq!(
            std::fs::read_to_string(ws.join("note.txt")).unwrap(),
            "remember",
            "{order:?}"
        );
        let events = factory.events(out.run_id);
        assert_well_formed(&events);
        let pairs = |t: EventType| -> Vec<(String, Fidelity)> {
            of_type(&events, t)
                .iter()
                .map(|e| {
                    let t = e.tool().unwrap();
                    (t.call_id.clone(), t.fidelity)
                })
                .collect()
        };
        let expect = |half: fn(&(&str, Fidelity, Fidelity)) -> Fidelity| {
            let mut v: Vec<(String, Fidelity)> =
                recorded.iter().map(|r| (r.0.to_owned(), half(r))).collect();
            v.push(("a#0/a1".to_owned(), AgentEmitted));
            v
        };
        assert_eq!(pairs(EventType::ToolCall), expect(|r| r.1), "{order:?}");
        assert_eq!(pairs(EventType::ToolResult), expect(|r| r.2), "{order:?}");
    }
}

/// Forwards to a memory recorder and reports each event type as it is recorded.
struct Notify {
    inner: Arc<MemoryRecorder>,
    tx: tokio::sync::mpsc::UnboundedSender<String>,
}

#[async_trait::async_trait]
impl transcript_domain::Recorder for Notify {
    fn run_id(&self) -> transcript_domain::RunId {
        self.inner.run_id()
    }
    fn parent_run_id(&self) -> Option<transcript_domain::RunId> {
        None
    }
    async fn record(
        &self,
        draft: transcript_domain::EventDraft,
    ) -> Result<transcript_domain::Seq, transcript_domain::RecordError> {
        let t = draft.event_type().as_str().to_owned();
        let seq = self.inner.record(draft).await?;
        let _ = self.tx.send(t);
        Ok(seq)
    }
    async fn subscribe(
        &self,
        from: Option<transcript_domain::Seq>,
    ) -> Result<Box<dyn transcript_domain::Subscription>, transcript_domain::RecordError> {
        self.inner.subscribe(from).await
    }
    async fn close(&self) -> Result<(), transcript_domain::RecordError> {
        self.inner.close().await
    }
}

#[tokio::test]
async fn agent_output_is_recorded_while_the_agent_still_runs() {
    let (_d, ws) = workspace();
    let review = fixtures().join("agents/claude-review.jsonl");
    // Print the first two records, then wait (in the agent) until the test
    // has seen the tool call recorded and creates `go`.
    let script = format!(
        "head -n 2 '{f}'; while [ ! -f go ]; do sleep 0.02; done; tail -n +3 '{f}'",
        f = review.display()
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let inner = Arc::new(MemoryRecorder::new(
        transcript_domain::RunId::from_bytes([3; 16]),
        None,
        Arc::new(transcript_domain::ManualClock::new(ts0())),
    ));
    let rec = Arc::new(Notify {
        inner: inner.clone(),
        tx,
    });
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .build()
        .unwrap();
    let wf = Workflow::new("paced").step(agent(
        "paced",
        "claude",
        vec!["sh".into(), "-c".into(), script],
        "go",
    ));
    let run = {
        let svc = svc.clone();
        tokio::spawn(async move {
            svc.run_with_recorder(
                &WorkflowSet::new("p", wf),
                Map::new(),
                rec,
                CancellationToken::new(),
            )
            .await
        })
    };
    // Bounded: an agent that never reaches its tool call (or a recorder
    // that never reports it) fails the test instead of hanging it.
    let seen = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(t) = rx.recv().await {
            assert_ne!(t, "step.completed", "the agent cannot have finished yet");
            if t == "tool.call" {
                return true;
            }
        }
        false
    })
    .await
    .expect("no tool.call recorded within 60 s while the agent waits");
    assert!(seen, "the run ended without recording the tool call");
    std::fs::write(ws.join("go"), "").unwrap();
    let out = run.await.unwrap().unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    assert_well_formed(&decode_all(&inner.bytes()));
}

#[tokio::test]
async fn a_warning_the_agent_survives_is_kept_in_the_result_and_does_not_fail_the_step() {
    let capture = fixtures().join("providers/codex/exec-warning-item.jsonl");
    let (factory, out) = run_one(agent(
        "codex",
        "codex",
        vec!["cat".into(), capture.display().to_string()],
        "Go",
    ))
    .await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    let done = of_type(&events, EventType::StepCompleted)[0]
        .step()
        .unwrap();
    assert!(done.error.is_none());
    let result: Value = serde_json::from_str(done.result.as_ref().unwrap().get()).unwrap();
    let warnings = result["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{result}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .starts_with("Model metadata for `scripted-model` not found"),
        "{result}"
    );
    assert!(result["output"].is_string(), "{result}");
}

#[tokio::test]
async fn a_preset_without_its_binary_fails_naming_the_npm_package() {
    let mut step = agent("ask", "gemini", vec![], "Hi");
    if let StepKind::Agent(a) = &mut step.kind {
        a.env.insert("PATH".into(), "/nonexistent".into());
        a.env
            .insert("TRANSCRIPT_GEMINI_BIN".into(), String::new().into());
    }
    let (factory, out) = run_one(step).await;
    assert!(!out.succeeded());
    let events = factory.events(out.run_id);
    let done = of_type(&events, EventType::StepCompleted)[0]
        .step()
        .unwrap();
    let error = done.error.as_deref().unwrap();
    assert!(
        error.contains("gemini not found on PATH")
            && error.contains("npm install -g @google/gemini-cli"),
        "{error}"
    );
}

/// #29: a step that names its model gets it on its turns when the provider
/// reported none (Codex's `exec --json` carries no model); a model the
/// provider reported is kept. Read from the raw lines.
#[tokio::test]
async fn a_steps_configured_model_fills_turns_the_provider_left_without_one() {
    let models = |step: Step| async move {
        let (factory, out) = run_one(step).await;
        assert!(out.succeeded(), "{:?}", out.error);
        factory
            .text(out.run_id)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| l["type"] == "message.assistant")
            .map(|l| l["payload"]["model"].clone())
            .collect::<Vec<Value>>()
    };
    let with_model = |mut step: Step, model: &str| {
        if let StepKind::Agent(spec) = &mut step.kind {
            spec.model = Some(model.into());
        }
        step
    };
    let codex = models(with_model(
        agent("c", "codex", replay("codex-summary.jsonl"), "Go"),
        "gpt-5-codex",
    ))
    .await;
    assert!(!codex.is_empty());
    assert!(codex.iter().all(|m| m == "gpt-5-codex"), "{codex:?}");
    // Without a configured model nothing is invented.
    let bare = models(agent("c", "codex", replay("codex-summary.jsonl"), "Go")).await;
    assert!(bare.iter().all(Value::is_null), "{bare:?}");
    // A reported model wins over the configured one.
    let claude = models(with_model(
        agent("r", "claude", replay("claude-review.jsonl"), "Go"),
        "configured-model",
    ))
    .await;
    assert!(!claude.is_empty());
    assert!(
        claude
            .iter()
            .all(|m| m.is_string() && m != "configured-model"),
        "{claude:?}"
    );
}
