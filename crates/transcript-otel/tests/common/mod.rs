//! Deterministic transcripts built from domain types (no clock, no randomness).
#![allow(dead_code)]

use std::collections::HashMap;

use opentelemetry::Value;
use opentelemetry::trace::{SpanId, Status};
use transcript_domain::{
    ContentBlock, DecodedEvent, EventDraft, ExchangeEvent, Fidelity, MessagePayload, Payload,
    RawJson, Role, RunId, StepPayload, Timestamp, ToolPayload, Usage,
};
use transcript_otel::config::Protocol;
use transcript_otel::{MapOptions, OtlpHttpConfig, SpanData, map_run};

pub const ROOT: RunId = RunId::from_bytes([0x11; 16]);
pub const CHILD: RunId = RunId::from_bytes([0x22; 16]);
pub const BASE_MS: i64 = 1_780_000_000_000;

/// Events of one run, one every 10 ms from a fixed instant.
pub struct RunBuilder {
    pub run_id: RunId,
    pub parent: Option<RunId>,
    pub events: Vec<ExchangeEvent>,
    /// Time of the last event; each push adds 10 ms.
    pub now_ms: i64,
}

impl RunBuilder {
    pub fn new(run_id: RunId, parent: Option<RunId>, start_ms: i64) -> Self {
        Self {
            run_id,
            parent,
            events: Vec::new(),
            now_ms: start_ms,
        }
    }

    /// Time of the event with this seq.
    pub fn at(&self, seq: u64) -> Timestamp {
        self.events[seq as usize - 1].timestamp
    }

    pub fn push(&mut self, draft: EventDraft) -> &mut Self {
        let seq = self.events.len() as u64 + 1;
        self.now_ms += 10;
        let ts = Timestamp::from_unix_millis(self.now_ms).unwrap();
        self.events
            .push(draft.into_event(seq, self.run_id, self.parent, ts));
        self
    }

    pub fn run_started(&mut self, workflow: &str) -> &mut Self {
        self.push(EventDraft::run_level(Payload::RunStarted(
            StepPayload::new(workflow, "workflow"),
        )))
    }

    pub fn run_completed(&mut self, workflow: &str, error: Option<&str>) -> &mut Self {
        let mut p = StepPayload::new(workflow, "workflow");
        if let Some(e) = error {
            p = p.with_error(e);
        }
        self.push(EventDraft::run_level(Payload::RunCompleted(p)))
    }

    pub fn step_started(&mut self, path: &str, it: u64, name: &str, kind: &str) -> &mut Self {
        self.push(EventDraft::new(
            path,
            it,
            Payload::StepStarted(StepPayload::new(name, kind)),
        ))
    }

    pub fn step_completed(
        &mut self,
        path: &str,
        it: u64,
        name: &str,
        kind: &str,
        error: Option<&str>,
    ) -> &mut Self {
        let mut p = StepPayload::new(name, kind);
        if let Some(e) = error {
            p = p.with_error(e);
        }
        self.push(EventDraft::new(path, it, Payload::StepCompleted(p)))
    }

    pub fn tool_call(&mut self, path: &str, name: &str, call_id: &str, f: Fidelity) -> &mut Self {
        let input = RawJson::from_json(format!(r#"{{"arg":"{call_id}"}}"#)).unwrap();
        self.push(EventDraft::new(
            path,
            0,
            Payload::ToolCall(ToolPayload::call(name, call_id, input, f)),
        ))
    }

    pub fn tool_result(
        &mut self,
        path: &str,
        name: &str,
        call_id: &str,
        f: Fidelity,
        error: Option<&str>,
    ) -> &mut Self {
        self.push(EventDraft::new(
            path,
            0,
            Payload::ToolResult(ToolPayload::result(
                name,
                call_id,
                RawJson::string("done"),
                error.map(str::to_owned),
                f,
            )),
        ))
    }

    pub fn decoded(&self) -> Vec<DecodedEvent> {
        self.events
            .iter()
            .cloned()
            .map(DecodedEvent::from)
            .collect()
    }
}

pub fn usage(input: u64, output: u64, cache_read: Option<u64>) -> Usage {
    Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cache_read_tokens: cache_read,
        ..Usage::default()
    }
}

/// Root run `review` with an agent step using a tool, a loop whose second
/// iteration fails, and a call_workflow step whose child run `inner` has an
/// agent step with a failing router tool call. The run fails.
pub fn demo() -> (RunBuilder, RunBuilder) {
    let f = Fidelity::AgentEmitted;
    let mut root = RunBuilder::new(ROOT, None, BASE_MS);
    root.run_started("review")
        .step_started("plan", 0, "plan", "agent");
    let user = MessagePayload::new(
        Role::User,
        vec![
            ContentBlock::text(Fidelity::Router, "Find x"),
            ContentBlock::text(Fidelity::Router, "You are terse"),
        ],
    );
    root.push(EventDraft::new("plan", 0, Payload::MessageUser(user)))
        .tool_call("plan", "grep", "c1", f)
        .tool_result("plan", "grep", "c1", f, None);
    let mut turn1 = MessagePayload::new(
        Role::Assistant,
        vec![
            ContentBlock::thinking(f, "look"),
            ContentBlock::tool_use(
                f,
                "grep",
                "c1",
                RawJson::from_json(r#"{"arg":"c1"}"#.into()).unwrap(),
            ),
            ContentBlock::tool_result(f, "c1", RawJson::string("done")),
        ],
    );
    turn1.provider = Some("claude".into());
    turn1.model = Some("model-a".into());
    turn1.usage = Some(usage(10, 5, Some(3)));
    let mut turn2 = MessagePayload::new(Role::Assistant, vec![ContentBlock::text(f, "x is 1")]);
    turn2.provider = Some("claude".into());
    turn2.model = Some("model-b".into());
    turn2.usage = Some(usage(4, 2, None));
    root.push(EventDraft::new("plan", 0, Payload::MessageAssistant(turn1)))
        .push(EventDraft::new("plan", 0, Payload::MessageAssistant(turn2)))
        .step_completed("plan", 0, "plan", "agent", None)
        .step_started("loop", 0, "loop", "loop")
        .step_started("loop.check", 0, "check", "command")
        .step_completed("loop.check", 0, "check", "command", None)
        .step_started("loop.check", 1, "check", "command")
        .step_completed("loop.check", 1, "check", "command", Some("exit 1"))
        .step_completed("loop", 0, "loop", "loop", Some("exit 1"));
    root.push(
        EventDraft::new(
            "sub",
            0,
            Payload::CallWorkflowStarted(StepPayload::new("sub", "call_workflow")),
        )
        .with_child(CHILD),
    );
    // The child run happens between the parent's call_workflow events.
    let mut child = RunBuilder::new(CHILD, Some(ROOT), root.now_ms);
    child
        .run_started("inner")
        .step_started("fix", 0, "fix", "agent")
        .tool_call("fix", "write", "w1", Fidelity::Router)
        .tool_result("fix", "write", "w1", Fidelity::Router, Some("denied"))
        .step_completed("fix", 0, "fix", "agent", Some("tool denied"))
        .run_completed("inner", Some("tool denied"));
    root.now_ms = child.now_ms;
    root.push(
        EventDraft::new(
            "sub",
            0,
            Payload::CallWorkflowCompleted(
                StepPayload::new("sub", "call_workflow").with_error("tool denied"),
            ),
        )
        .with_child(CHILD),
    )
    .run_completed("review", Some("step loop failed"));
    (root, child)
}

pub fn lookup(child: &RunBuilder) -> impl FnMut(RunId) -> Option<Vec<DecodedEvent>> + '_ {
    move |id| (id == child.run_id).then(|| child.decoded())
}

pub fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

pub fn attr_str(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(|v| v.as_str().into_owned())
}

pub fn attr_i64(span: &SpanData, key: &str) -> Option<i64> {
    match attr(span, key)? {
        Value::I64(n) => Some(*n),
        _ => None,
    }
}

pub fn by_name<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

pub fn one<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let found = by_name(spans, name);
    assert_eq!(
        found.len(),
        1,
        "exactly one span named {name:?}: {found:#?}"
    );
    found[0]
}

/// span id -> (name, parent span id), for comparing trees.
pub fn shape(spans: &[SpanData]) -> HashMap<SpanId, (String, SpanId, String)> {
    spans
        .iter()
        .map(|s| {
            (
                s.span_context.span_id(),
                (s.name.to_string(), s.parent_span_id, status_text(&s.status)),
            )
        })
        .collect()
}

pub fn status_text(status: &Status) -> String {
    match status {
        Status::Unset => "unset".into(),
        Status::Ok => "ok".into(),
        Status::Error { description } => format!("error: {description}"),
    }
}

/// The spans of [`demo`]'s run and its child, mapped with the default options.
pub fn demo_spans() -> Vec<SpanData> {
    let (root, child) = demo();
    map_run(&root.decoded(), &mut lookup(&child), MapOptions::default()).spans
}

/// An export configuration for the receiver tests: batches of 5, no retry, a 10 s timeout,
/// the private CA and an `authorization` header when given, resource
/// `openinference.project.name=review`.
pub fn receiver_config(
    endpoint: &str,
    protocol: Protocol,
    ca: Option<std::path::PathBuf>,
    token: Option<&str>,
) -> OtlpHttpConfig {
    OtlpHttpConfig {
        batch_size: 5,
        max_retries: 0,
        timeout: std::time::Duration::from_secs(10),
        certificate: ca,
        headers: token
            .map(|t| vec![("authorization".to_owned(), t.to_owned())])
            .unwrap_or_default(),
        service_name: "receiver-test".into(),
        resource_attributes: vec![("openinference.project.name".into(), "review".into())],
        protocol,
        ..OtlpHttpConfig::new(endpoint)
    }
}
