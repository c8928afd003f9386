//! What backends read from the spans of imported and recorded runs (#41 items 3 and 4):
//! every `invoke_agent` and `chat` span names its provider, failed ones too; one `chat` span
//! per model request (items the provider reports under one usage are one request), each with
//! its usage or `transcript.usage.missing` saying why, never an empty inference span. Truth:
//! jq over the raw captures in `$TRANSCRIPT_REAL_FIXTURES`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{DEMO_RUN_ID, demo_command, real_fixture};
use serde_json::Value;

fn transcript(storage: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(args)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Imports `capture` and returns its run id.
fn import(storage: &Path, provider: &str, capture: &Path) -> String {
    let out = transcript(storage, &["import", provider, capture.to_str().unwrap()]);
    out.split('\t').next().unwrap().trim().to_owned()
}

/// The spans of a stored run (OTLP/JSON), each as (name, attributes by key).
fn spans(storage: &Path, run: &str) -> Vec<(String, BTreeMap<String, Value>)> {
    let json = transcript(storage, &["export", run, "--format", "otlp-json"]);
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    let mut out = Vec::new();
    for rs in v["resourceSpans"].as_array().unwrap() {
        for ss in rs["scopeSpans"].as_array().unwrap() {
            for s in ss["spans"].as_array().unwrap() {
                let attrs = s["attributes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| {
                        let value = a["value"].as_object().unwrap().values().next().unwrap();
                        (a["key"].as_str().unwrap().to_owned(), value.clone())
                    })
                    .collect();
                out.push((s["name"].as_str().unwrap().to_owned(), attrs));
            }
        }
    }
    out
}

fn of_op<'a>(
    spans: &'a [(String, BTreeMap<String, Value>)],
    op: &str,
) -> Vec<&'a BTreeMap<String, Value>> {
    spans
        .iter()
        .filter(|(_, a)| a.get("gen_ai.operation.name").and_then(Value::as_str) == Some(op))
        .map(|(_, a)| a)
        .collect()
}

fn int(a: &BTreeMap<String, Value>, key: &str) -> Option<u64> {
    a.get(key).map(|v| match v {
        Value::String(s) => s.parse().unwrap(),
        other => other.as_u64().unwrap(),
    })
}

#[test]
fn a_failed_imported_agent_names_its_provider_on_its_span_and_in_receipts() {
    let Some(failed) = real_fixture("codex", "vibe-kanban-legacy-msg-config-prompt-error.jsonl")
    else {
        return;
    };
    let ok = real_fixture("codex", "tielec-ai-workflow-exec-json-commands.jsonl").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path();
    let failed_run = import(storage, "codex", &failed);
    let ok_run = import(storage, "codex", &ok);

    let expected = of_op(&spans(storage, &ok_run), "invoke_agent")[0]
        .get("gen_ai.provider.name")
        .cloned()
        .expect("a successful Codex import names its provider");
    let failed_spans = spans(storage, &failed_run);
    let agents = of_op(&failed_spans, "invoke_agent");
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].get("gen_ai.provider.name"), Some(&expected));
    assert_eq!(
        agents[0].get("transcript.provider").and_then(Value::as_str),
        Some("codex")
    );
    for chat in of_op(&failed_spans, "chat") {
        assert_eq!(chat.get("gen_ai.provider.name"), Some(&expected));
    }
    // receipts: the provider, not `—`.
    let receipts: Value =
        serde_json::from_str(&transcript(storage, &["receipts", &failed_run, "--json"])).unwrap();
    let text = receipts.to_string();
    assert!(text.contains("\"provider\":\"codex\""), "{text}");
}

#[test]
fn one_chat_span_per_usage_report_of_a_codex_exec_capture() {
    let Some(capture) = real_fixture("codex", "tielec-ai-workflow-exec-json-commands.jsonl") else {
        return;
    };
    // Truth from jq over the raw capture: the requests the provider billed (one usage each).
    let jq = |filter: &str| -> String {
        let out = Command::new("jq")
            .args(["-s", filter])
            .arg(&capture)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let reports: usize = jq("[.[] | select(.usage != null)] | length")
        .parse()
        .unwrap();
    let input: u64 = jq("[.[] | select(.usage != null) | .usage.input_tokens] | add")
        .parse()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = import(dir.path(), "codex", &capture);
    let spans = spans(dir.path(), &run);
    let chats = of_op(&spans, "chat");
    assert_eq!(chats.len(), reports, "one chat span per billed request");
    for chat in &chats {
        assert!(
            int(chat, "gen_ai.usage.input_tokens").is_some()
                || chat.contains_key("transcript.usage.missing"),
            "an inference span with neither usage nor why: {chat:?}"
        );
        assert!(chat.contains_key("gen_ai.provider.name"), "{chat:?}");
    }
    let sum: u64 = chats
        .iter()
        .filter_map(|c| int(c, "gen_ai.usage.input_tokens"))
        .sum();
    assert_eq!(
        sum, input,
        "the chat spans carry the capture's input tokens"
    );
}

#[test]
fn the_demo_agents_have_one_chat_span_per_usage_report() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(out.status.success());
    // Truth: the transcript's own usage reports of the step (jq over the JSONL).
    let file = storage.join(format!("{DEMO_RUN_ID}.jsonl"));
    let out = Command::new("jq")
        .args([
            "-s",
            "[.[] | select(.type == \"message.assistant\" and .payload.usage != null)] | length",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let reports: usize = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let spans = spans(&storage, DEMO_RUN_ID);
    let chats = of_op(&spans, "chat");
    assert!(reports >= 2);
    assert_eq!(chats.len(), reports);
    for chat in chats {
        assert!(int(chat, "gen_ai.usage.input_tokens").is_some(), "{chat:?}");
    }
}

#[test]
fn a_request_without_usage_says_why() {
    let Some(capture) = real_fixture(
        "codex",
        "vibe-kanban-legacy-msg-exec-command-reasoning.jsonl",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = import(dir.path(), "codex", &capture);
    for chat in of_op(&spans(dir.path(), &run), "chat") {
        assert!(
            int(chat, "gen_ai.usage.input_tokens").is_some()
                || chat
                    .get("transcript.usage.missing")
                    .and_then(Value::as_str)
                    .is_some_and(|why| !why.is_empty()),
            "{chat:?}"
        );
    }
}
