//! Recorder behaviour on a real filesystem: file properties, seq, resume,
//! locking, symlinks.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use common::*;
use transcript_domain::{
    EventDraft, Payload, RecordError, Recorder, RecorderFactory, RunId, StepPayload, decode_line,
};
use transcript_infra::{JsonlRecorderFactory, ResumeWarning};

#[tokio::test]
async fn writes_canonical_lines_from_seq_1_with_private_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nested/storage");
    let run = run_id(1);
    let rec = builder(&dir, run).open().unwrap();
    assert_eq!(rec.record(step("a")).await.unwrap(), 1);
    assert_eq!(rec.record(tool(7)).await.unwrap(), 2);
    rec.close().await.unwrap();
    let path = dir.join(run.file_name());
    assert_eq!(
        lines(&path),
        [
            r#"{"seq":1,"run_id":"00000001-0000-4000-8000-000000000001","type":"step.started","path":"a","iteration":0,"timestamp":"2026-06-08T08:14:42.100Z","payload":{"name":"a","kind":"command"}}"#,
            r#"{"seq":2,"run_id":"00000001-0000-4000-8000-000000000001","type":"tool.call","path":"agent","iteration":0,"timestamp":"2026-06-08T08:14:42.101Z","payload":{"name":"bash","call_id":"call-7","input":{"cmd":"ls","i":7},"output":null,"fidelity":"router"}}"#,
        ]
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&tmp.path().join("nested")), 0o700);
}

#[tokio::test]
async fn reopen_continues_the_sequence() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(2);
    let rec = builder(tmp.path(), run).open().unwrap();
    for i in 0..5 {
        rec.record(tool(i)).await.unwrap();
    }
    rec.close().await.unwrap();
    let rec = builder(tmp.path(), run).resume().unwrap();
    assert_eq!(rec.resume_info().highest_seq, 5);
    assert_eq!(rec.resume_info().existing_events, 5);
    assert!(rec.resume_info().warnings.is_empty());
    assert_eq!(rec.record(step("x")).await.unwrap(), 6);
    rec.close().await.unwrap();
    assert_eq!(seqs(rec.path()), [1, 2, 3, 4, 5, 6]);
}

#[tokio::test]
async fn foreign_out_of_order_file_resumes_after_the_highest_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(3);
    let path = tmp.path().join(run.file_name());
    let line = |seq: u64| {
        format!(
            r#"{{"seq":{seq},"run_id":"{run}","type":"step.started","path":"s","iteration":0,"timestamp":"2026-01-01T00:00:00Z","payload":{{"name":"s","kind":"agent"}}}}"#
        ) + "\n"
    };
    std::fs::write(&path, line(3) + &line(9) + "not json\n" + &line(4)).unwrap();
    let rec = builder(tmp.path(), run).resume().unwrap();
    assert_eq!(rec.resume_info().highest_seq, 9);
    assert_eq!(
        rec.resume_info().warnings,
        [ResumeWarning::MalformedLines {
            count: 1,
            first_line: 3
        }]
    );
    assert_eq!(rec.record(step("next")).await.unwrap(), 10);
    rec.close().await.unwrap();
    assert_eq!(lines(&path).len(), 5);
    assert!(lines(&path)[4].starts_with(r#"{"seq":10,"#));
}

#[tokio::test]
async fn torn_tail_is_moved_aside_and_the_file_ends_with_a_newline() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(4);
    let rec = builder(tmp.path(), run).open().unwrap();
    rec.record(step("a")).await.unwrap();
    rec.record(step("b")).await.unwrap();
    rec.close().await.unwrap();
    let path = rec.path().to_path_buf();
    let good = std::fs::read(&path).unwrap();
    // A crash mid-line, twice (the second fragment happens to be a whole event).
    let whole_but_unterminated = lines(&path)[0].replace(r#""seq":1"#, r#""seq":3"#);
    for (i, frag) in [
        b"{\"seq\":3,\"run_id\":\"tor".to_vec(),
        whole_but_unterminated.into_bytes(),
    ]
    .into_iter()
    .enumerate()
    {
        let mut bytes = good.clone();
        bytes.extend_from_slice(&frag);
        std::fs::write(&path, &bytes).unwrap();
        let rec = builder(tmp.path(), run).resume().unwrap();
        let torn = tmp.path().join(format!("{}.torn", run.file_name()));
        assert_eq!(
            rec.resume_info().warnings,
            [ResumeWarning::TornTail {
                bytes: frag.len() as u64,
                moved_to: torn.clone(),
                truncated_to: good.len() as u64,
            }]
        );
        assert_eq!(rec.resume_info().highest_seq, 2, "trial {i}");
        assert_eq!(std::fs::read(&path).unwrap(), good);
        let torn_bytes = std::fs::read(&torn).unwrap();
        assert!(torn_bytes.ends_with(&[frag.as_slice(), b"\n"].concat()));
        assert_eq!(
            std::fs::metadata(&torn).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Dropped without recording: the file stays as repaired.
        drop(rec);
    }
    let torn = tmp.path().join(format!("{}.torn", run.file_name()));
    assert_eq!(
        std::fs::read(&torn)
            .unwrap()
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        2
    );
    let rec = builder(tmp.path(), run).resume().unwrap();
    assert_eq!(rec.record(step("c")).await.unwrap(), 3);
    rec.close().await.unwrap();
    assert_eq!(seqs(&path), [1, 2, 3]);
}

#[tokio::test]
async fn a_second_recorder_on_the_same_run_is_locked_out_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(5);
    let first = builder(tmp.path(), run).open().unwrap();
    first.record(step("a")).await.unwrap();
    let before = std::fs::read(first.path()).unwrap();
    let second = builder(tmp.path(), run).open();
    match second {
        Err(RecordError::Locked { path }) => assert!(path.ends_with(&run.file_name())),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert_eq!(std::fs::read(first.path()).unwrap(), before);
    assert!(
        !tmp.path()
            .join(format!("{}.torn", run.file_name()))
            .exists()
    );
    first.record(step("b")).await.unwrap();
    first.close().await.unwrap();
    // After close the run can be reopened.
    let third = builder(tmp.path(), run).resume().unwrap();
    assert_eq!(third.next_seq(), 3);
}

#[tokio::test]
async fn symlinks_are_refused_for_the_file_and_the_storage_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(6);
    let target = tmp.path().join("elsewhere.jsonl");
    std::fs::write(&target, b"").unwrap();
    let storage = tmp.path().join("storage");
    std::fs::create_dir(&storage).unwrap();
    std::os::unix::fs::symlink(&target, storage.join(run.file_name())).unwrap();
    let err = builder(&storage, run).open().unwrap_err();
    assert!(
        matches!(&err, RecordError::Storage { message, .. } if message.contains("symbolic link")),
        "{err}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"");

    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let linked = tmp.path().join("linked");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    let err = builder(&linked, run).open().unwrap_err();
    assert!(
        matches!(&err, RecordError::Storage { message, .. } if message.contains("symbolic link")),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);

    let file = tmp.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = builder(&file, run).open().unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

/// Issue 17 item 9: every storage error names the OS cause, also when the
/// storage path is a regular file or the transcript path is a directory.
#[tokio::test]
async fn storage_errors_carry_the_os_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = builder(&file, run_id(8)).open().unwrap_err();
    assert!(
        matches!(&err, RecordError::Storage { source: Some(e), .. } if e.raw_os_error() == Some(17)),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .ends_with("storage path exists and is not a directory: File exists (os error 17)"),
        "{err}"
    );
    // Below a file: the lookup itself fails.
    let err = builder(&file.join("sub"), run_id(8)).open().unwrap_err();
    assert!(
        err.to_string().ends_with("Not a directory (os error 20)"),
        "{err}"
    );
    let run = run_id(9);
    std::fs::create_dir(tmp.path().join(run.file_name())).unwrap();
    let err = builder(tmp.path(), run).open().unwrap_err();
    assert!(
        err.to_string()
            .ends_with("cannot open for append: Is a directory (os error 21)"),
        "{err}"
    );
}

#[tokio::test]
async fn a_directory_or_fifo_at_the_transcript_path_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(7);
    std::fs::create_dir(tmp.path().join(run.file_name())).unwrap();
    assert!(builder(tmp.path(), run).open().is_err());
    // A FIFO must neither block the open nor be written to.
    let other = run_id(77);
    let status = std::process::Command::new("mkfifo")
        .arg(tmp.path().join(other.file_name()))
        .status()
        .unwrap();
    assert!(status.success());
    let err = builder(tmp.path(), other).open().unwrap_err();
    assert!(matches!(err, RecordError::Storage { .. }), "{err}");
}

#[test]
fn a_non_uuid_run_id_cannot_reach_the_filesystem() {
    // The recorder and factory only take a `RunId`; the only way from text is
    // `RunId::parse`, which admits nothing but a hyphenated UUID.
    let tmp = tempfile::tempdir().unwrap();
    for hostile in [
        "../../../../etc/passwd",
        "../x",
        "a/b",
        "00000000-0000-4000-8000-00000000000/",
        "00000000-0000-4000-8000-0000000000\0a",
        "",
    ] {
        assert!(hostile.parse::<RunId>().is_err(), "{hostile:?}");
    }
    let ok: RunId = "550E8400-E29B-41D4-A716-446655440000".parse().unwrap();
    let rec = builder(tmp.path(), ok).open().unwrap();
    assert_eq!(
        rec.path(),
        tmp.path()
            .join("550e8400-e29b-41d4-a716-446655440000.jsonl")
    );
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["550e8400-e29b-41d4-a716-446655440000.jsonl"]);
}

#[tokio::test]
async fn record_after_close_is_closed_and_close_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(8)).open().unwrap();
    rec.record(step("a")).await.unwrap();
    rec.close().await.unwrap();
    rec.close().await.unwrap();
    assert!(matches!(
        rec.record(step("b")).await,
        Err(RecordError::Closed)
    ));
    assert!(matches!(
        rec.subscribe(None).await,
        Err(RecordError::Closed)
    ));
    assert_eq!(seqs(rec.path()), [1]);
}

#[tokio::test]
async fn factory_creates_one_file_per_run_with_parent_links() {
    let tmp = tempfile::tempdir().unwrap();
    let factory = JsonlRecorderFactory::new(tmp.path()).with_clock(clock());
    let parent = run_id(9);
    let child = run_id(10);
    let p = factory.create(parent, None).await.unwrap();
    let c = factory.create(child, Some(parent)).await.unwrap();
    assert_eq!(c.parent_run_id(), Some(parent));
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
    assert_eq!(c.record(step("inner")).await.unwrap(), 1);
    c.close().await.unwrap();
    p.close().await.unwrap();
    let child_line = &lines(&tmp.path().join(child.file_name()))[0];
    let decoded = decode_line(child_line.as_bytes()).unwrap().event;
    assert_eq!(decoded.parent_run_id, Some(parent));
    assert_eq!(decoded.seq, 1);
    let parent_line = &lines(&tmp.path().join(parent.file_name()))[0];
    assert_eq!(
        decode_line(parent_line.as_bytes())
            .unwrap()
            .event
            .child_run_id,
        Some(child)
    );
}

#[tokio::test]
async fn mask_is_applied_before_encoding() {
    struct Redact;
    impl transcript_domain::EventMask for Redact {
        fn mask(&self, payload: &mut transcript_domain::Payload) {
            if let Some(t) = payload.as_tool_mut() {
                t.input = transcript_domain::RawJson::string("[redacted]");
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let rec = builder(tmp.path(), run_id(11))
        .mask(Arc::new(Redact))
        .open()
        .unwrap();
    let mut sub = rec.subscribe_jsonl(None).unwrap();
    rec.record(tool(1)).await.unwrap();
    rec.close().await.unwrap();
    let line = &lines(rec.path())[0];
    assert!(line.contains(r#""input":"[redacted]""#), "{line}");
    use transcript_domain::Subscription;
    let ev = sub.next().await.unwrap();
    assert_eq!(ev.to_line().unwrap(), format!("{line}\n"));
}
