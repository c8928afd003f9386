//! The tolerant reader, `verify` and the run-tree loader.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Cursor;

use common::*;
use proptest::prelude::*;
use transcript_domain::{DecodeError, Recorder, RunId};
use transcript_infra::{
    FindingCode, MalformedCause, ReadError, ReadItem, ReadWarningKind, TranscriptReader,
    load_run_tree, verify_file, verify_reader, verify_run,
};

fn line(run: RunId, seq: u64) -> String {
    format!(
        r#"{{"seq":{seq},"run_id":"{run}","type":"step.started","path":"s","iteration":0,"timestamp":"2026-01-01T00:00:00.000Z","payload":{{"name":"s","kind":"agent"}}}}"#
    )
}

/// Summarizes reader output as (kind, line, offset) triples.
fn summary(bytes: &[u8], cap: usize) -> Vec<(String, u64, u64)> {
    TranscriptReader::new(Cursor::new(bytes.to_vec()))
        .with_max_line_bytes(cap)
        .map(|item| match item {
            Ok(ReadItem::Event(e)) => (format!("event {}", e.event.seq), e.line, e.offset),
            Ok(ReadItem::Warning(w)) => (format!("warning {}", w.kind), w.line, w.offset),
            Err(ReadError::Malformed(m)) => (format!("malformed {}", m.cause), m.line, m.offset),
            Err(e) => panic!("{e}"),
        })
        .collect()
}

#[test]
fn garbage_nul_invalid_utf8_and_empty_lines_are_reported_and_skipped() {
    let run = run_id(1);
    let l1 = line(run, 1);
    let l2 = line(run, 2);
    let mut bytes = Vec::new();
    bytes.extend_from_slice(format!("{l1}\n").as_bytes());
    bytes.extend_from_slice(b"garbage{{\n");
    bytes.extend_from_slice(b"\0\0\0\0\n");
    bytes.extend_from_slice(b"\n");
    bytes.extend_from_slice(b"{\"seq\":\xff\xfe}\n");
    bytes.extend_from_slice(format!("{l2}\n").as_bytes());
    let got = summary(&bytes, 1 << 20);
    let o2 = (l1.len() + 1) as u64;
    assert_eq!(got.len(), 6, "{got:?}");
    assert_eq!(got[0], ("event 1".into(), 1, 0));
    assert!(got[1].0.starts_with("malformed invalid JSON"), "{got:?}");
    assert_eq!((got[1].1, got[1].2), (2, o2));
    assert!(got[2].0.starts_with("malformed invalid JSON"), "{got:?}");
    assert_eq!((got[2].1, got[2].2), (3, o2 + 10));
    assert_eq!(got[3], ("warning empty line".into(), 4, o2 + 15));
    assert_eq!(got[4].0, "malformed invalid UTF-8 at byte 7");
    assert_eq!(got[5].0, "event 2");
    assert_eq!(got[5].1, 6);
}

#[test]
fn over_long_lines_are_reported_with_their_length_and_skipped() {
    let run = run_id(2);
    let long = "x".repeat(5000);
    let input = format!("{}\n{long}\n{}\n{long}", line(run, 1), line(run, 2));
    let mut reader = TranscriptReader::new(std::io::BufReader::with_capacity(
        64,
        Cursor::new(input.clone().into_bytes()),
    ))
    .with_max_line_bytes(300)
    .with_path("/x/t.jsonl");
    assert!(matches!(reader.next(), Some(Ok(ReadItem::Event(_)))));
    match reader.next() {
        Some(Err(ReadError::Malformed(m))) => {
            assert_eq!(m.line, 2);
            assert_eq!(
                m.cause,
                MalformedCause::TooLong {
                    length: 5000,
                    limit: 300
                }
            );
            let text = m.to_string();
            assert!(text.starts_with("/x/t.jsonl: line 2 (byte "), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(reader.next(), Some(Ok(ReadItem::Event(e))) if e.event.seq == 2));
    // An over-long unterminated tail is a warning with its full length.
    match reader.next() {
        Some(Ok(ReadItem::Warning(w))) => {
            assert_eq!(
                w.kind,
                ReadWarningKind::UnterminatedFinalLine { length: 5000 }
            );
            assert_eq!(w.line, 4);
        }
        other => panic!("{other:?}"),
    }
    assert!(reader.next().is_none());
    assert_eq!(reader.offset(), input.len() as u64);
}

#[test]
fn an_unterminated_final_line_is_a_warning_and_decoded_when_whole() {
    let run = run_id(3);
    let torn = format!("{}\n{{\"seq\":2,\"ru", line(run, 1));
    let got = summary(torn.as_bytes(), 1 << 20);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].0, "warning unterminated final line (12 bytes)");
    let whole = format!("{}\n{}", line(run, 1), line(run, 2));
    let got = summary(whole.as_bytes(), 1 << 20);
    assert_eq!(got.len(), 3);
    assert_eq!(got[1].0, "event 2");
    assert!(got[2].0.starts_with("warning unterminated"));
}

#[test]
fn unknown_event_types_are_events_with_warnings() {
    let run = run_id(4);
    let l = line(run, 1).replace("step.started", "step.teleported");
    let mut r = TranscriptReader::new(Cursor::new(format!("{l}\n")));
    match r.next() {
        Some(Ok(ReadItem::Event(e))) => {
            assert_eq!(e.event.kind.as_str(), "step.teleported");
            assert!(matches!(
                e.warnings[0],
                transcript_domain::DecodeWarning::UnknownEventType { .. }
            ));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_causes_are_typed() {
    let got: Vec<_> = TranscriptReader::new(Cursor::new(b"{\"seq\":1}\n".to_vec())).collect();
    match &got[0] {
        Err(ReadError::Malformed(m)) => {
            assert!(matches!(
                m.cause,
                MalformedCause::Decode(DecodeError::Shape { .. })
            ))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn verify_reports_gaps_duplicates_mixed_runs_and_bad_links() {
    let run = run_id(5);
    let other = run_id(6);
    let child = run_id(7);
    let text = [
        line(run, 2),
        line(run, 3),
        line(run, 3),
        line(run, 6),
        line(other, 7),
        line(run, 8).replace(
            r#""iteration":0"#,
            &format!(r#""child_run_id":"{child}","iteration":0"#),
        ),
        line(run, 9).replace("step.started", "step.call_workflow.started"),
    ]
    .join("\n")
        + "\n";
    let report = verify_reader(TranscriptReader::new(Cursor::new(text)));
    let codes: Vec<_> = report.errors.iter().map(|f| (f.code, f.line)).collect();
    assert_eq!(
        codes,
        [
            (FindingCode::FirstSeqNotOne, Some(1)),
            (FindingCode::SeqNotIncreasing, Some(3)),
            (FindingCode::SeqGap, Some(4)),
            (FindingCode::MixedRunId, Some(5)),
            (FindingCode::UnexpectedChildRunId, Some(6)),
            (FindingCode::MissingChildRunId, Some(7)),
        ]
    );
    assert_eq!(report.events, 7);
    assert_eq!((report.first_seq, report.last_seq), (Some(2), Some(9)));
    assert!(!report.is_valid());
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["errors"][0]["code"], "first_seq_not_one");
}

#[tokio::test]
async fn verify_run_and_loader_follow_child_links() {
    let tmp = tempfile::tempdir().unwrap();
    let parent = run_id(8);
    let child = run_id(9);
    let missing = run_id(10);
    use transcript_domain::{EventDraft, Payload, StepPayload};
    let p = builder(tmp.path(), parent).open().unwrap();
    let c = builder(tmp.path(), child)
        .parent_run_id(Some(parent))
        .open()
        .unwrap();
    let sp = |n: &str| StepPayload::new(n, "workflow");
    p.record(EventDraft::run_level(Payload::RunStarted(sp("main"))))
        .await
        .unwrap();
    p.record(
        EventDraft::new(
            "call",
            0,
            Payload::CallWorkflowStarted(StepPayload::new("call", "call_workflow")),
        )
        .with_child(child),
    )
    .await
    .unwrap();
    c.record(EventDraft::run_level(Payload::RunStarted(sp("sub"))))
        .await
        .unwrap();
    c.record(step("inner")).await.unwrap();
    c.record(EventDraft::run_level(Payload::RunCompleted(sp("sub"))))
        .await
        .unwrap();
    p.record(
        EventDraft::new(
            "call",
            0,
            Payload::CallWorkflowCompleted(StepPayload::new("call", "call_workflow")),
        )
        .with_child(child),
    )
    .await
    .unwrap();
    p.record(EventDraft::run_level(Payload::RunCompleted(sp("main"))))
        .await
        .unwrap();
    c.close().await.unwrap();
    p.close().await.unwrap();

    let report = verify_run(tmp.path(), parent);
    assert!(report.is_valid(), "{report:#?}");
    assert_eq!(report.files.len(), 2);
    assert_eq!(report.files[1].parent_run_id, Some(parent));

    let loaded = load_run_tree(tmp.path(), parent).unwrap();
    assert_eq!(loaded.files.len(), 2);
    assert_eq!(loaded.tree.run_id, parent);
    assert_eq!(loaded.tree.workflow.as_deref(), Some("main"));
    let call = &loaded.tree.steps[0];
    assert_eq!(call.child_run_id, Some(child));
    let sub = call.child.as_ref().unwrap();
    assert_eq!(sub.workflow.as_deref(), Some("sub"));
    assert_eq!(sub.steps[0].name, "inner");

    // A link to a run without a file: both report it.
    let q = builder(tmp.path(), run_id(11)).open().unwrap();
    q.record(
        EventDraft::new(
            "call",
            0,
            Payload::CallWorkflowStarted(StepPayload::new("call", "call_workflow")),
        )
        .with_child(missing),
    )
    .await
    .unwrap();
    q.close().await.unwrap();
    let report = verify_run(tmp.path(), run_id(11));
    assert_eq!(report.links[0].code, FindingCode::ChildMissing);
    let loaded = load_run_tree(tmp.path(), run_id(11)).unwrap();
    assert!(
        loaded.tree.all_problems().iter().any(|p| matches!(
            p,
            transcript_domain::tree::TreeProblem::ChildMissing { child_run_id } if *child_run_id == missing
        )),
        "{:?}",
        loaded.tree.problems
    );
    assert!(load_run_tree(tmp.path(), run_id(12)).is_err());
    let f = verify_file(tmp.path().join(run_id(12).file_name()));
    assert_eq!(f.errors[0].code, FindingCode::ReadFailed);
}

#[test]
fn a_file_named_after_another_run_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(run_id(13).file_name());
    std::fs::write(&path, line(run_id(14), 1) + "\n").unwrap();
    let report = verify_file(&path);
    assert_eq!(report.errors[0].code, FindingCode::FileNameMismatch);
}

proptest! {
    /// Any bytes: never panics, line numbers count up, offsets stay inside
    /// the input and the reader consumes everything.
    #[test]
    fn reader_never_panics_and_accounts_for_every_byte(
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b'{'), Just(0u8), Just(0xffu8), any::<u8>()],
            0..600,
        ),
        cap in 1usize..64,
    ) {
        let mut reader = TranscriptReader::new(std::io::BufReader::with_capacity(7, Cursor::new(bytes.clone())))
            .with_max_line_bytes(cap);
        let mut last_line = 0;
        for item in reader.by_ref() {
            let (line, offset) = match item {
                Ok(ReadItem::Event(e)) => (e.line, e.offset),
                Ok(ReadItem::Warning(w)) => (w.line, w.offset),
                Err(ReadError::Malformed(m)) => (m.line, m.offset),
                Err(e) => panic!("{e}"),
            };
            prop_assert!(line >= last_line);
            prop_assert!(offset <= bytes.len() as u64);
            last_line = line;
        }
        prop_assert_eq!(reader.offset(), bytes.len() as u64);
        let newlines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
        let tail = u64::from(!bytes.is_empty() && bytes.last() != Some(&b'\n'));
        prop_assert_eq!(last_line, newlines + tail);
    }
}
