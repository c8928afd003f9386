//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use transcript_domain::{
    EventDraft, Fidelity, ManualClock, Payload, RawJson, RunId, RunIdGenerator, SequentialRunIds,
    StepPayload, Timestamp, ToolPayload,
};
use transcript_infra::{JsonlRecorder, JsonlRecorderBuilder};

pub fn run_id(n: u32) -> RunId {
    SequentialRunIds::with_prefix(n).next_run_id()
}

pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::stepping(
        Timestamp::parse("2026-06-08T08:14:42.100Z").unwrap(),
        1,
    ))
}

pub fn builder(dir: &Path, run: RunId) -> JsonlRecorderBuilder {
    JsonlRecorder::builder(dir, run).clock(clock())
}

pub fn step(name: &str) -> EventDraft {
    EventDraft::new(
        name,
        0,
        Payload::StepStarted(StepPayload::new(name, "command")),
    )
}

pub fn tool(i: u64) -> EventDraft {
    EventDraft::new(
        "agent",
        0,
        Payload::ToolCall(ToolPayload::call(
            "bash",
            format!("call-{i}"),
            RawJson::from_value(&serde_json::json!({"cmd": "ls", "i": i})).unwrap(),
            Fidelity::Router,
        )),
    )
}

/// `seq` of every line, parsed from the `{"seq":N,` prefix our writer emits.
pub fn seqs(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap();
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let rest = &l[b"{\"seq\":".len()..];
            let end = rest.iter().position(|b| *b == b',').unwrap();
            std::str::from_utf8(&rest[..end]).unwrap().parse().unwrap()
        })
        .collect()
}

pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}
