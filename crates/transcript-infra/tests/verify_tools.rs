//! Issue 18 item 6: `verify` warns about a `tool.result` without its
//! `tool.call` and about a `tool.call` without a result.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use transcript_domain::{EventDraft, Fidelity, Payload, RawJson, Recorder, ToolPayload};
use transcript_infra::{FindingCode, verify_file};

fn call(id: &str) -> EventDraft {
    let input = RawJson::from_value(&serde_json::json!({"cmd": "ls"})).unwrap();
    EventDraft::new(
        "agent",
        0,
        Payload::ToolCall(ToolPayload::call("bash", id, input, Fidelity::Router)),
    )
}

fn result(id: &str) -> EventDraft {
    let output = RawJson::from_value(&serde_json::json!("ok")).unwrap();
    EventDraft::new(
        "agent",
        0,
        Payload::ToolResult(ToolPayload::result(
            "bash",
            id,
            output,
            None,
            Fidelity::Router,
        )),
    )
}

#[tokio::test]
async fn unpaired_tool_calls_and_results_are_warnings_naming_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(1)).open().unwrap();
    for d in [
        call("a"),   // 1: paired with 2
        result("a"), // 2
        result("b"), // 3: no call
        call("c"),   // 4: never answered
        call("a"),   // 5: a reused id pairs in order, with 6
        result("a"), // 6
        result("d"), // 7: its call comes after it
        call("d"),   // 8: so this one is never answered
    ] {
        rec.record(d).await.unwrap();
    }
    rec.close().await.unwrap();
    let report = verify_file(rec.path());
    assert!(report.is_valid(), "warnings only: {:#?}", report.errors);
    let warnings: Vec<_> = report
        .warnings
        .iter()
        .map(|w| (w.code, w.line.unwrap()))
        .collect();
    assert_eq!(
        warnings,
        [
            (FindingCode::ToolResultWithoutCall, 3),
            (FindingCode::ToolResultWithoutCall, 7),
            (FindingCode::ToolCallWithoutResult, 4),
            (FindingCode::ToolCallWithoutResult, 8),
        ]
    );
    assert!(
        report.warnings[0].message.contains("\"b\""),
        "{:?}",
        report.warnings[0]
    );
}

#[tokio::test]
async fn paired_calls_give_no_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(2)).open().unwrap();
    for d in [call("x"), call("y"), result("y"), result("x")] {
        rec.record(d).await.unwrap();
    }
    rec.close().await.unwrap();
    let report = verify_file(rec.path());
    assert!(report.warnings.is_empty(), "{:#?}", report.warnings);
    assert!(report.is_valid());
}
