//! Builds events the way a recorder does, prints their canonical lines, and
//! decodes a line written by a newer writer without failing.
//!
//! Run: `cargo run -p transcript-domain --example encode_decode`

use transcript_domain::{
    Clock, ContentBlock, DecodeWarning, EventDraft, Fidelity, ManualClock, MessagePayload, Payload,
    PreEncoded, RawJson, Role, RunIdGenerator, SequentialRunIds, StepPayload, Timestamp,
    ToolPayload, decode_str,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run_id = SequentialRunIds::new().next_run_id();
    let clock = ManualClock::stepping(Timestamp::parse("2026-06-08T08:14:42.100Z")?, 5);

    let drafts = [
        EventDraft::run_level(Payload::RunStarted(StepPayload::new("review", "workflow"))),
        EventDraft::new(
            "analyze",
            0,
            Payload::StepStarted(StepPayload::new("analyze", "agent")),
        ),
        EventDraft::new(
            "analyze",
            0,
            Payload::MessageUser(MessagePayload::new(
                Role::User,
                vec![ContentBlock::text(
                    Fidelity::Router,
                    "Review main.go for bugs.",
                )],
            )),
        ),
        EventDraft::new(
            "analyze",
            0,
            Payload::ToolCall(ToolPayload::call(
                "read_file",
                "call-1",
                RawJson::from_value(&serde_json::json!({"path": "main.go"}))?,
                Fidelity::Router,
            )),
        ),
    ];

    // What a recorder does: serialize outside its lock, then assign seq and
    // timestamp together and splice them in.
    let mut out = Vec::new();
    for (i, draft) in drafts.iter().enumerate() {
        let pre = PreEncoded::new(run_id, None, draft)?;
        pre.write_line(i as u64 + 1, clock.now(), &mut out);
    }
    print!("{}", String::from_utf8(out)?);

    // A newer writer's line: decoded completely, with a matchable warning.
    let future = format!(
        r#"{{"seq":5,"run_id":"{run_id}","type":"step.retried","path":"analyze","iteration":0,"timestamp":"2026-06-08T08:14:42.200Z","payload":{{"attempt":2}}}}"#
    );
    let decoded = decode_str(&future)?;
    for warning in &decoded.warnings {
        match warning {
            DecodeWarning::UnknownEventType { type_name } => {
                eprintln!("note: skipping unknown event type {type_name}")
            }
            other => eprintln!("warning: {other}"),
        }
    }
    Ok(())
}
