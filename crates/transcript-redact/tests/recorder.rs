//! The redactor as the JSONL recorder's mask: nothing unmasked reaches the
//! file or a live subscriber.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use transcript_domain::{
    ContentBlock, EventDraft, Fidelity, MessagePayload, Payload, Recorder, Role, RunIdGenerator,
    SequentialRunIds,
};
use transcript_infra::JsonlRecorder;
use transcript_redact::Redactor;

#[tokio::test]
async fn secrets_are_masked_before_the_write_and_the_broadcast() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-proj-LIVEstreamSECRET0123456789abcdefgh";
    let redactor = Arc::new(Redactor::builtin());
    let recorder = JsonlRecorder::builder(dir.path(), SequentialRunIds::new().next_run_id())
        .mask(redactor.clone())
        .open()
        .unwrap();
    let mut live = recorder.subscribe(None).await.unwrap();
    let draft = EventDraft::new(
        "agent",
        0,
        Payload::MessageUser(MessagePayload::new(
            Role::User,
            vec![ContentBlock::text(
                Fidelity::Router,
                format!("use {secret} please"),
            )],
        )),
    );
    recorder.record(draft).await.unwrap();
    let received = live.next().await.unwrap();
    let line = received.to_line().unwrap();
    assert!(!line.contains(secret), "live stream: {line}");
    assert!(line.contains("use sk-proj-…(34 chars) please"), "{line}");
    Recorder::close(&recorder).await.unwrap();
    let on_disk = std::fs::read_to_string(recorder.path()).unwrap();
    assert!(!on_disk.contains(secret));
    assert_eq!(on_disk, line, "the live event is the stored line");
    assert_eq!(redactor.masks_made(), 1);
}
