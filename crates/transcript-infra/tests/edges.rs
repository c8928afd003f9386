//! Edge cases: factory options, verify findings, reader I/O errors, storage
//! creation failures.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Cursor, Read};
use std::sync::Arc;

use common::*;
use transcript_domain::{Recorder, RecorderFactory, RunId};
use transcript_infra::{
    Durability, FindingCode, JsonlRecorderFactory, ReadError, ReadItem, TranscriptReader,
    verify_reader, verify_run,
};

fn line(run: RunId, seq: u64, extra: &str, ts: &str) -> String {
    format!(
        r#"{{"seq":{seq},"run_id":"{run}"{extra},"type":"step.started","path":"s","iteration":0,"timestamp":"{ts}","payload":{{"name":"s","kind":"agent"}}}}"#
    )
}

#[tokio::test]
async fn factory_options_reach_the_recorders() {
    struct Upper;
    impl transcript_domain::EventMask for Upper {
        fn mask(&self, payload: &mut transcript_domain::Payload) {
            if let Some(s) = payload.as_step_mut() {
                s.name = s.name.to_uppercase();
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let factory = JsonlRecorderFactory::new(tmp.path().join("runs"))
        .with_clock(clock())
        .with_durability(Durability::Always)
        .with_subscriber_buffer(2)
        .with_mask(Arc::new(Upper));
    assert!(format!("{factory:?}").contains("Always"));
    assert_eq!(factory.storage_dir(), tmp.path().join("runs"));
    let rec = factory.open(run_id(1), None).unwrap();
    assert_eq!(rec.durability(), Durability::Always);
    assert!(format!("{rec:?}").contains("Always"));
    let mut sub = rec.subscribe_jsonl(None).unwrap();
    for _ in 0..3 {
        rec.record(step("quiet")).await.unwrap();
    }
    assert_eq!(rec.fanout_stats().dropped_total, 1, "buffer of 2");
    assert_eq!(rec.write_stats().batches, 3);
    rec.close().await.unwrap();
    use transcript_domain::Subscription;
    assert_eq!(sub.next().await.unwrap().path, "quiet");
    assert!(lines(rec.path())[0].contains(r#""name":"QUIET""#));
    assert_eq!(
        rec.acknowledged_len(),
        std::fs::metadata(rec.path()).unwrap().len()
    );
    let dyn_rec = factory.create(run_id(2), Some(run_id(1))).await.unwrap();
    assert_eq!(dyn_rec.run_id(), run_id(2));
    dyn_rec.close().await.unwrap();
}

#[test]
fn storage_under_a_file_cannot_be_created() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("file"), b"x").unwrap();
    let err = builder(&tmp.path().join("file/sub"), run_id(3))
        .open()
        .unwrap_err();
    assert!(err.to_string().contains("storage directory"), "{err}");
}

#[test]
fn verify_reports_links_timestamps_and_warnings() {
    let run = run_id(4);
    let parent = run_id(5);
    let text = [
        line(
            run,
            1,
            &format!(r#","parent_run_id":"{parent}""#),
            "2026-01-01T00:00:01Z",
        ),
        String::new(),
        line(run, 2, "", "2026-01-01T00:00:00Z"),
        line(
            run,
            3,
            &format!(r#","parent_run_id":"{run}""#),
            "2026-01-01T00:00:02Z",
        ),
        line(run, 4, "", "2026-01-01T00:00:03Z").replace("step.started", "step.beamed"),
    ]
    .join("\n")
        + "\n";
    let report = verify_reader(TranscriptReader::new(Cursor::new(text)));
    let errors: Vec<_> = report.errors.iter().map(|f| f.code).collect();
    assert_eq!(
        errors,
        [
            FindingCode::MixedParentRunId,
            FindingCode::MixedParentRunId,
            FindingCode::SelfLink,
            FindingCode::MixedParentRunId,
        ]
    );
    let warnings: Vec<_> = report.warnings.iter().map(|f| f.code).collect();
    assert_eq!(
        warnings,
        [
            FindingCode::EmptyLine,
            FindingCode::TimestampBackwards,
            FindingCode::DecodeWarning,
        ]
    );
    let empty = verify_reader(TranscriptReader::new(Cursor::new(Vec::new())));
    assert_eq!(empty.errors[0].code, FindingCode::NoEvents);
    assert!(!empty.is_valid());
}

#[test]
fn verify_run_reports_parent_mismatch_and_cycles() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (run_id(6), run_id(7));
    let call = |run: RunId, child: RunId, parent: Option<RunId>| {
        let p = parent.map_or(String::new(), |p| format!(r#","parent_run_id":"{p}""#));
        line(
            run,
            1,
            &format!(r#"{p},"child_run_id":"{child}""#),
            "2026-01-01T00:00:00Z",
        )
        .replace("step.started", "step.call_workflow.started")
            + "\n"
    };
    // a calls b; b (claiming no parent) calls a back.
    std::fs::write(tmp.path().join(a.file_name()), call(a, b, None)).unwrap();
    std::fs::write(tmp.path().join(b.file_name()), call(b, a, None)).unwrap();
    let report = verify_run(tmp.path(), a);
    let links: Vec<_> = report.links.iter().map(|f| f.code).collect();
    assert_eq!(
        links,
        [FindingCode::ChildParentMismatch, FindingCode::LinkCycle]
    );
    assert!(!report.is_valid());
    assert_eq!(report.error_count(), 2);
    let json = serde_json::to_string(&report).unwrap();
    assert!(json.contains("child_parent_mismatch"), "{json}");
}

/// A source that fails after some bytes.
struct Failing(Cursor<Vec<u8>>);
impl Read for Failing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.read(buf)? {
            0 => Err(std::io::Error::other("device gone")),
            n => Ok(n),
        }
    }
}

#[test]
fn an_io_error_ends_the_iteration_after_reporting_it() {
    let run = run_id(8);
    let text = line(run, 1, "", "2026-01-01T00:00:00Z") + "\n";
    let reader = std::io::BufReader::new(Failing(Cursor::new(text.into_bytes())));
    assert!(reader.buffer().is_empty());
    let items: Vec<_> = TranscriptReader::new(reader).with_path("/dev/x").collect();
    assert_eq!(items.len(), 2);
    assert!(matches!(items[0], Ok(ReadItem::Event(_))));
    match &items[1] {
        Err(e @ ReadError::Io { .. }) => {
            assert!(e.to_string().contains("/dev/x"), "{e}");
            assert!(e.to_string().contains("device gone"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(TranscriptReader::open("/nonexistent/t.jsonl").is_err());
}
