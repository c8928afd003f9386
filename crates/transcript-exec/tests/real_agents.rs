//! Real provider captures replayed through a CLI agent subprocess: what the
//! service records equals what the provider normalizer produces from the
//! whole file at once (incremental feeding loses and invents nothing).
//! Reads `$TRANSCRIPT_REAL_FIXTURES` (never copied into the repository);
//! skipped with a message when unset, a failure when set but missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;

use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventType, Payload};
use transcript_exec::{AgentSpec, ExecutionService, Step, StepKind, Workflow, WorkflowSet};
use transcript_providers::{Output, Provider, normalize};

use support::*;

fn real_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("TRANSCRIPT_REAL_FIXTURES")?);
    assert!(
        dir.is_dir(),
        "TRANSCRIPT_REAL_FIXTURES={} is set but is not a directory",
        dir.display()
    );
    Some(dir)
}

const CASES: &[(&str, &str)] = &[
    (
        "claude",
        "claude-code/tielec-ai-workflow-stream-json-v2.0.21-multi-tool.jsonl",
    ),
    (
        "claude",
        "claude-code/tielec-ai-workflow-stream-json-v2.0.21-tool-error-split-message.jsonl",
    ),
    (
        "claude",
        "claude-code/gleam-sdk-golden-basic-query-v2.1.7.jsonl",
    ),
    ("codex", "codex/tielec-ai-workflow-exec-json-commands.jsonl"),
    ("codex", "codex/openai-codex-docs-exec-md-sample.jsonl"),
    ("codex", "codex/hyperyolo-exec-json-minimal.jsonl"),
    (
        "copilot",
        "copilot/sortie-copilot-cli-output-format-json-simple_session.jsonl",
    ),
];

#[tokio::test]
async fn real_captures_replayed_through_a_subprocess_match_the_normalizer() {
    let Some(dir) = real_dir() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is not set"
        );
        eprintln!("skipped: TRANSCRIPT_REAL_FIXTURES is not set");
        return;
    };
    for (provider, rel) in CASES {
        let file = dir.join(rel);
        assert!(file.is_file(), "missing real fixture {}", file.display());
        let (_d, ws) = workspace();
        let factory = MemoryFactory::new();
        let svc = ExecutionService::deterministic_builder(&ws, ts0())
            .recorder_factory(factory.clone())
            .build()
            .unwrap();
        let step = Step::new(
            "agent",
            StepKind::Agent(AgentSpec {
                provider: (*provider).into(),
                command: vec!["cat".into(), file.display().to_string().into()],
                prompt: "replay".into(),
                ..AgentSpec::default()
            }),
        );
        let out = svc
            .run(
                &WorkflowSet::new("real", Workflow::new("real").step(step)),
                Map::new(),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        let events = factory.events(out.run_id);
        assert_well_formed(&events);
        let recorded: Vec<Payload> = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind.known(),
                    Some(EventType::MessageAssistant | EventType::ToolCall | EventType::ToolResult)
                )
            })
            .map(|e| e.to_event().unwrap().payload)
            .collect();
        let bytes = std::fs::read(&file).unwrap();
        // Call ids are recorded qualified by the agent step's path and iteration
        // (`agent#0/<provider id>`: unique per run file), the provider's id kept after the `/`.
        let expected: Vec<Payload> = normalize(Provider::from_name(provider).unwrap(), &bytes)
            .iter()
            .filter(|o| !matches!(o, Output::Diagnostic(_)))
            .filter_map(Output::to_payload)
            .map(qualify_ids)
            .collect();
        assert!(!expected.is_empty(), "{rel}: nothing normalized");
        assert_eq!(recorded, expected, "{rel}");
        eprintln!(
            "{rel}: {} events recorded, step {}",
            recorded.len(),
            out.error.as_deref().unwrap_or("succeeded")
        );
    }
}

/// `payload` with every call id as the agent seam records it for step `agent`, iteration 0.
fn qualify_ids(mut payload: Payload) -> Payload {
    let q = |id: &mut String| *id = format!("agent#0/{id}");
    if let Some(t) = payload.as_tool_mut() {
        q(&mut t.call_id);
    }
    if let Some(m) = payload.as_message_mut() {
        for b in &mut m.blocks {
            match &mut b.body {
                transcript_domain::BlockBody::ToolUse { tool_id, .. }
                | transcript_domain::BlockBody::ToolResult { tool_id, .. } => q(tool_id),
                _ => {}
            }
        }
    }
    payload
}
