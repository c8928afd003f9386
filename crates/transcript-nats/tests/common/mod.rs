//! Shared test support: real servers, the same drafts for every recorder, the file recorder's
//! bytes for them.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use transcript_domain::{
    ContentBlock, EventDraft, Fidelity, ManualClock, MessagePayload, Payload, RawJson,
    RecorderFactory, Role, RunId, StepPayload, Timestamp, ToolPayload, Usage,
};
use transcript_nats::testing::{self, ServerNode};
use transcript_nats::{NatsStore, StorageUrl, StreamOptions};

/// One server, or `None` to skip (never under CI=true: that fails in `server_binary`).
pub fn server() -> Option<ServerNode> {
    testing::single().expect("nats-server")
}

pub async fn store(url: &str, options: StreamOptions) -> NatsStore {
    NatsStore::connect(&StorageUrl::parse(url).unwrap(), options)
        .await
        .unwrap()
}

pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::stepping(
        Timestamp::parse("2026-01-02T03:04:05.678Z").unwrap(),
        7,
    ))
}

/// A run with every kind of event, awkward text included.
pub fn drafts(child: Option<RunId>) -> Vec<EventDraft> {
    let mut turn = MessagePayload::new(
        Role::Assistant,
        vec![
            ContentBlock::text(
                Fidelity::AgentEmitted,
                "héllo \u{2028} \"quoted\" </script>",
            ),
            ContentBlock::thinking(Fidelity::AgentEmitted, "hmm\n\ttab"),
        ],
    );
    turn.model = Some("claude-opus-4".to_owned());
    turn.provider = Some("claude".to_owned());
    turn.usage = Some(Usage {
        input_tokens: Some(3),
        output_tokens: Some(400),
        cache_read_tokens: Some(20_000),
        cost_usd: Some(0.25),
        ..Usage::default()
    });
    let user = MessagePayload::new(
        Role::User,
        vec![ContentBlock::text(Fidelity::AgentEmitted, "do it")],
    );
    let input = RawJson::from_value(&serde_json::json!({"path": "a b/ü.txt", "n": 1.5e3})).unwrap();
    let mut drafts = vec![
        EventDraft::run_level(Payload::RunStarted(StepPayload::new("fleet", "workflow"))),
        EventDraft::new(
            "agent",
            0,
            Payload::StepStarted(StepPayload::new("claude", "agent")),
        ),
        EventDraft::new("agent", 0, Payload::MessageUser(user)),
        EventDraft::new("agent", 0, Payload::MessageAssistant(turn)),
        EventDraft::new(
            "agent",
            0,
            Payload::ToolCall(ToolPayload::call("read", "c1", input, Fidelity::Router)),
        ),
        EventDraft::new(
            "agent",
            0,
            Payload::ToolResult(ToolPayload::result(
                "read",
                "c1",
                RawJson::string("contents"),
                Some("partial".to_owned()),
                Fidelity::Router,
            )),
        ),
        EventDraft::new(
            "agent",
            0,
            Payload::StepCompleted(StepPayload::new("claude", "agent")),
        ),
    ];
    if let Some(child) = child {
        drafts.push(
            EventDraft::new(
                "sub",
                2,
                Payload::CallWorkflowStarted(StepPayload::new("sub", "call_workflow")),
            )
            .with_child(child),
        );
    }
    drafts.push(EventDraft::run_level(Payload::RunCompleted(
        StepPayload::new("fleet", "workflow").with_error("step x failed"),
    )));
    drafts
}

/// Records `drafts` with `factory` as run `run_id` (child of `parent`); returns the seqs.
pub async fn record_all(
    factory: &dyn RecorderFactory,
    run_id: RunId,
    parent: Option<RunId>,
    drafts: Vec<EventDraft>,
) -> Vec<u64> {
    let recorder = factory.create(run_id, parent).await.unwrap();
    let mut seqs = Vec::new();
    for d in drafts {
        seqs.push(recorder.record(d).await.unwrap());
    }
    recorder.close().await.unwrap();
    seqs
}

/// The file recorder's bytes for `drafts` with a fresh clock.
pub async fn file_bytes(run_id: RunId, parent: Option<RunId>, drafts: Vec<EventDraft>) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let factory = transcript_infra::JsonlRecorderFactory::new(dir.path()).with_clock(clock());
    record_all(&factory, run_id, parent, drafts).await;
    std::fs::read(dir.path().join(run_id.file_name())).unwrap()
}
