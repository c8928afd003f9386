//! Issue 17 item 7: a transcript holds exactly one run. `verify` never says
//! ok on a file without events or on a file holding two runs, and a new
//! recorder never appends a second run to an existing file.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use transcript_domain::{EventDraft, Payload, RecordError, Recorder, RecorderFactory, StepPayload};
use transcript_infra::{FindingCode, JsonlRecorderFactory, verify_file};

fn run_started() -> EventDraft {
    EventDraft::run_level(Payload::RunStarted(StepPayload::new("demo", "workflow")))
}

fn run_completed() -> EventDraft {
    EventDraft::run_level(Payload::RunCompleted(StepPayload::new("demo", "workflow")))
}

fn codes(findings: &[transcript_infra::Finding]) -> Vec<FindingCode> {
    findings.iter().map(|f| f.code).collect()
}

#[test]
fn an_empty_file_is_not_a_valid_transcript() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(run_id(1).file_name());
    std::fs::write(&path, b"").unwrap();
    let report = verify_file(&path);
    assert!(!report.is_valid());
    assert_eq!(codes(&report.errors), [FindingCode::NoEvents]);
    assert!(report.errors[0].message.contains("empty"), "{report:#?}");
    assert_eq!(report.run_id, None);
}

#[test]
fn twenty_megabytes_of_junk_without_a_newline_is_not_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(run_id(2).file_name());
    std::fs::write(&path, vec![b'x'; 20 << 20]).unwrap();
    let report = verify_file(&path);
    assert!(!report.is_valid(), "{report:#?}");
    assert!(
        codes(&report.errors).contains(&FindingCode::NoEvents),
        "{report:#?}"
    );
    assert_eq!(report.events, 0);
}

/// The CLI's `--deterministic` twice: the same run id again. `open` (and
/// the factory's `create`) refuse it and leave the file untouched;
/// `resume` is the explicit way to continue, and a second run appended
/// that way is reported by `verify`.
#[tokio::test]
async fn a_finished_run_id_is_refused_unless_resumed_and_two_runs_are_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(3);
    let rec = builder(tmp.path(), run).open().unwrap();
    for d in [run_started(), step("s"), run_completed()] {
        rec.record(d).await.unwrap();
    }
    rec.close().await.unwrap();
    let before = std::fs::read(rec.path()).unwrap();
    assert!(verify_file(rec.path()).is_valid());

    let err = builder(tmp.path(), run).open().unwrap_err();
    let RecordError::Storage {
        path,
        message,
        source,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(path, &rec.path().display().to_string());
    // The kind is what callers match on (the CLI's exit 3), not the message's words.
    assert_eq!(
        source.as_ref().map(std::io::Error::kind),
        Some(std::io::ErrorKind::AlreadyExists)
    );
    assert!(
        message.contains("run already exists (resume it explicitly)"),
        "{message}"
    );
    let factory = JsonlRecorderFactory::new(tmp.path()).with_clock(clock());
    let err = factory.create(run, None).await.err().unwrap();
    assert!(err.to_string().contains("run already exists"), "{err}");
    assert_eq!(std::fs::read(rec.path()).unwrap(), before, "untouched");

    // Explicitly resumed: a second run in the same file.
    let again = factory.resume(run, None).unwrap();
    assert_eq!(again.resume_info().existing_events, 3);
    for d in [run_started(), step("s"), run_completed()] {
        again.record(d).await.unwrap();
    }
    again.close().await.unwrap();
    let report = verify_file(again.path());
    assert!(!report.is_valid());
    assert_eq!(
        codes(&report.errors),
        [
            FindingCode::SecondRunStarted,
            FindingCode::EventAfterRunCompleted
        ],
        "{report:#?}"
    );
    let after = &report.errors[1];
    assert_eq!(after.line, Some(4));
    assert!(
        after
            .message
            .starts_with("3 event(s) after run.completed at line 3"),
        "{}",
        after.message
    );
}

/// An existing empty file (created, nothing recorded yet) is a new run.
#[tokio::test]
async fn an_existing_empty_file_opens_as_a_new_run() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_id(4);
    std::fs::write(tmp.path().join(run.file_name()), b"").unwrap();
    let rec = builder(tmp.path(), run).open().unwrap();
    assert_eq!(rec.record(run_started()).await.unwrap(), 1);
    rec.close().await.unwrap();
}

/// Readers do not make up a run id (`00000000-…`) for a file without
/// events: the tree loader says "no events", `verify_run` reports the
/// run asked for with a `NoEvents` error, and an empty child is a missing
/// child, not a run with a made-up id.
#[tokio::test]
async fn a_run_without_events_has_no_made_up_id() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, child) = (run_id(5), run_id(6));
    let empty = tmp.path().join(root.file_name());
    std::fs::write(&empty, b"").unwrap();
    let err = transcript_infra::load_run_tree(tmp.path(), root).unwrap_err();
    assert!(
        matches!(&err, transcript_infra::LoadError::NoEvents { run_id, path } if *run_id == root && *path == empty),
        "{err:?}"
    );
    assert!(err.to_string().contains("has no events"), "{err}");
    let report = transcript_infra::verify_run(tmp.path(), root);
    assert_eq!(report.run_id, root);
    assert_eq!(report.files[0].run_id, None);
    assert_eq!(codes(&report.files[0].errors), [FindingCode::NoEvents]);

    // A root linking to an empty child file.
    std::fs::remove_file(&empty).unwrap();
    let rec = builder(tmp.path(), root).open().unwrap();
    let step = StepPayload::new("call", "call_workflow");
    rec.record(EventDraft::new("call", 0, Payload::CallWorkflowStarted(step)).with_child(child))
        .await
        .unwrap();
    rec.close().await.unwrap();
    std::fs::write(tmp.path().join(child.file_name()), b"").unwrap();
    let loaded = transcript_infra::load_run_tree(tmp.path(), root).unwrap();
    let nil = transcript_domain::RunId::from_bytes([0; 16]);
    let call = &loaded.tree.steps[0];
    assert!(
        call.child.as_ref().is_none_or(|c| c.run_id != nil),
        "{call:#?}"
    );
    assert!(
        loaded.tree.all_problems().iter().any(|p| matches!(
            p,
            transcript_domain::tree::TreeProblem::ChildMissing { child_run_id } if *child_run_id == child
        )),
        "{:?}",
        loaded.tree.problems
    );
}
