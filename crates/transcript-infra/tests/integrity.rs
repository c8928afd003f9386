//! Issue 23: the file and the stream never disagree, seq is never reused,
//! readers of linked runs stay linear and bounded.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;

use common::*;
use transcript_domain::{
    EventDraft, MAX_LINE_BYTES, MessagePayload, Payload, RecordError, Recorder, Role, RunId,
    StepPayload,
};
use transcript_infra::{FindingCode, ResumeWarning, load_run_tree, verify_file, verify_run};

fn append(path: &std::path::Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// Item 2: a line over the shared cap (seq 2, planted as a writer without
/// the cap would have written it) is unreadable, but its seq is not handed
/// out again: resume reads it from the line's `{"seq":N,` prefix.
#[tokio::test]
async fn an_oversized_line_keeps_its_seq_on_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(1);
    let rec = builder(tmp.path(), run).open().unwrap();
    assert_eq!(rec.record(step("small")).await.unwrap(), 1);
    rec.close().await.unwrap();
    let mut big = format!(r#"{{"seq":2,"run_id":"{run}","type":"tool.call","x":""#).into_bytes();
    big.resize(MAX_LINE_BYTES + 10, b'a');
    big.extend_from_slice(b"\"}\n");
    append(rec.path(), &big);

    let rec = builder(tmp.path(), run).resume().unwrap();
    assert_eq!(rec.resume_info().highest_seq, 2);
    assert!(
        rec.resume_info()
            .warnings
            .contains(&ResumeWarning::SeqFromUnreadableLine { line: 2, seq: 2 }),
        "{:?}",
        rec.resume_info().warnings
    );
    assert_eq!(rec.record(step("after")).await.unwrap(), 3);
    rec.close().await.unwrap();
}

/// A replaying subscription reads the file with the reader's capped line loop: a stored line
/// over the cap (seq 2) is skipped without being held whole and counted as dropped, and the
/// events around it arrive in order.
#[tokio::test]
async fn a_replay_skips_a_stored_line_over_the_cap_and_counts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(1);
    let rec = builder(tmp.path(), run).open().unwrap();
    assert_eq!(rec.record(step("small")).await.unwrap(), 1);
    rec.close().await.unwrap();
    let mut big = format!(r#"{{"seq":2,"run_id":"{run}","type":"tool.call","x":""#).into_bytes();
    big.resize(MAX_LINE_BYTES + 10, b'a');
    big.extend_from_slice(b"\"}\n");
    append(rec.path(), &big);

    // Last in the file, the oversized line is named by its `{"seq":2,` head (no later event
    // would show the gap).
    let rec = builder(tmp.path(), run).resume().unwrap();
    let mut sub = rec.subscribe(Some(1)).await.unwrap();
    rec.close().await.unwrap();
    let mut seqs = Vec::new();
    while let Some(event) = sub.next().await {
        seqs.push(event.seq);
    }
    assert_eq!(seqs, [1]);
    assert_eq!(sub.dropped(), 1, "the oversized line is a counted gap");

    let rec = builder(tmp.path(), run).resume().unwrap();
    assert_eq!(rec.record(step("after")).await.unwrap(), 3);
    let mut sub = rec.subscribe(Some(1)).await.unwrap();
    rec.close().await.unwrap();
    let mut seqs = Vec::new();
    while let Some(event) = sub.next().await {
        seqs.push(event.seq);
    }
    assert_eq!(seqs, [1, 3]);
    assert_eq!(sub.dropped(), 1);
}

/// Item 2: the recorder refuses a line over the cap; nothing is written and
/// no seq is consumed.
#[tokio::test]
async fn the_recorder_refuses_a_line_over_the_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(2)).open().unwrap();
    let mut huge = StepPayload::new("s", "command");
    huge.error = Some("e".repeat(MAX_LINE_BYTES));
    let err = rec
        .record(EventDraft::new("s", 0, Payload::StepCompleted(huge)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RecordError::TooLarge { length, limit } if limit == MAX_LINE_BYTES && length > limit),
        "{err:?}"
    );
    assert_eq!(std::fs::metadata(rec.path()).unwrap().len(), 0);
    assert_eq!(rec.record(step("ok")).await.unwrap(), 1);
    rec.close().await.unwrap();
    assert!(verify_file(rec.path()).is_valid());
}

/// Item 7: a line holding the largest seq refuses the resume with an error
/// naming the file and the line, instead of panicking or wrapping.
#[tokio::test]
async fn the_largest_seq_refuses_the_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(3);
    let rec = builder(tmp.path(), run).open().unwrap();
    rec.record(step("a")).await.unwrap();
    rec.close().await.unwrap();
    let line = std::fs::read_to_string(rec.path()).unwrap();
    let max = line.replacen("{\"seq\":1,", &format!("{{\"seq\":{},", u64::MAX), 1);
    append(rec.path(), max.as_bytes());
    let err = builder(tmp.path(), run).resume().unwrap_err();
    let RecordError::Storage { path, message, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(path, &rec.path().display().to_string());
    assert!(
        message.contains("line 2") && message.contains("largest"),
        "{message}"
    );
    // Nothing was changed.
    assert_eq!(
        std::fs::read_to_string(rec.path()).unwrap(),
        format!("{line}{max}")
    );
}

/// Item 3: a structurally invalid draft is refused before it gets a seq.
#[tokio::test]
async fn invalid_drafts_are_refused_without_consuming_a_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(4)).open().unwrap();
    let bad = [
        step("s").with_child(run_id(5)),
        EventDraft::new(
            "s",
            0,
            Payload::MessageUser(MessagePayload::new(Role::Assistant, Vec::new())),
        ),
        EventDraft::new("", 0, Payload::StepStarted(StepPayload::new("s", "agent"))),
    ];
    for draft in bad {
        let err = rec.record(draft).await.unwrap_err();
        assert!(matches!(err, RecordError::Invalid(_)), "{err:?}");
    }
    assert_eq!(std::fs::metadata(rec.path()).unwrap().len(), 0);
    assert_eq!(rec.record(step("ok")).await.unwrap(), 1);
    rec.close().await.unwrap();
    let report = verify_file(rec.path());
    assert!(report.is_valid(), "{report:#?}");
}

/// Item 10: a replaying subscriber that meets stored lines it cannot
/// rebuild (an unknown type from a newer writer, a damaged line) counts
/// them in `dropped` instead of leaving a silent gap.
#[tokio::test]
async fn replay_counts_stored_lines_it_cannot_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(6);
    let rec = builder(tmp.path(), run).open().unwrap();
    rec.record(step("a")).await.unwrap();
    rec.close().await.unwrap();
    let first = std::fs::read_to_string(rec.path()).unwrap();
    let unknown = first
        .replacen("{\"seq\":1,", "{\"seq\":2,", 1)
        .replace("step.started", "step.future_kind");
    let damaged = format!("{{\"seq\":3,\"run_id\":\"{run}\", broken\n");
    append(rec.path(), format!("{unknown}{damaged}").as_bytes());

    let rec = builder(tmp.path(), run).resume().unwrap();
    assert_eq!(rec.next_seq(), 4);
    let mut sub = rec.subscribe_jsonl(Some(1)).unwrap();
    rec.record(step("b")).await.unwrap();
    rec.close().await.unwrap();
    let mut got = Vec::new();
    while let Some(ev) = transcript_domain::Subscription::next(&mut sub).await {
        got.push(ev.seq);
    }
    assert_eq!(got, [1, 4]);
    assert_eq!(transcript_domain::Subscription::dropped(&sub), 2);
}

fn call(child: RunId, completed: bool) -> EventDraft {
    let step = StepPayload::new("call", "call_workflow");
    let payload = if completed {
        Payload::CallWorkflowCompleted(step)
    } else {
        Payload::CallWorkflowStarted(step)
    };
    EventDraft::new("call", 0, payload).with_child(child)
}

/// Item 6: a chain of runs where each run calls the next one twice. The
/// loader reads every file once (not once per path through the tree).
#[tokio::test]
async fn the_loader_reads_each_shared_child_file_once() {
    const DEPTH: u32 = 10;
    let tmp = tempfile::tempdir().unwrap();
    let runs: Vec<RunId> = (0..=DEPTH).map(|i| run_id(100 + i)).collect();
    for (i, &run) in runs.iter().enumerate() {
        let rec = builder(tmp.path(), run)
            .parent_run_id(i.checked_sub(1).map(|p| runs[p]))
            .open()
            .unwrap();
        if let Some(&child) = runs.get(i + 1) {
            for _ in 0..2 {
                rec.record(call(child, false)).await.unwrap();
                rec.record(call(child, true)).await.unwrap();
            }
        } else {
            rec.record(step("leaf")).await.unwrap();
        }
        rec.close().await.unwrap();
    }
    let loaded = load_run_tree(tmp.path(), runs[0]).unwrap();
    assert_eq!(loaded.files.len(), runs.len());
}

/// Item 6: `verify_run` follows child links no deeper than the tree builder.
#[tokio::test]
async fn verify_run_stops_at_the_tree_depth_limit() {
    let depth = transcript_domain::tree::MAX_DEPTH as u32 + 2;
    let tmp = tempfile::tempdir().unwrap();
    let runs: Vec<RunId> = (0..=depth).map(|i| run_id(1000 + i)).collect();
    for (i, &run) in runs.iter().enumerate() {
        let rec = builder(tmp.path(), run)
            .parent_run_id(i.checked_sub(1).map(|p| runs[p]))
            .open()
            .unwrap();
        match runs.get(i + 1) {
            Some(&child) => rec.record(call(child, false)).await.unwrap(),
            None => rec.record(step("leaf")).await.unwrap(),
        };
        rec.close().await.unwrap();
    }
    let report = verify_run(tmp.path(), runs[0]);
    assert_eq!(report.links.len(), 1, "{:#?}", report.links);
    assert_eq!(report.links[0].code, FindingCode::LinkTooDeep);
    assert_eq!(report.files.len(), transcript_domain::tree::MAX_DEPTH + 1);
}
