//! The `Importer` API (issue #43 items 1-2), as a team calls it: a capture auto-detected into
//! a run whose file is in the storage, faults as typed errors naming the file and the cause,
//! diagnostics sent to the progress callback (never printed), and a store imported
//! incrementally (a second import finds the file unchanged).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use transcript_import::store::StoreOutcome;
use transcript_import::{ImportError, ImportOutcome, ImportStatus, Importer, Notice, Store};
use transcript_providers::Provider;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/providers/claude")
        .join(name)
}

#[test]
fn a_capture_is_detected_and_imported_as_one_durable_run() {
    let dir = tempfile::tempdir().unwrap();
    let importer = Importer::new(dir.path()).deterministic(true);
    let run = importer
        .import_file(&fixture("scenario-stream-json.jsonl"), None)
        .unwrap();
    assert_eq!(run.provider, Provider::Claude);
    assert_eq!(run.status, ImportStatus::Succeeded);
    let text = std::fs::read_to_string(&run.path).unwrap();
    assert_eq!(text.lines().count() as u64, run.events);
    assert!(run.path.starts_with(dir.path()));
    assert!(
        text.lines().last().unwrap().contains("\"run.completed\""),
        "{text}"
    );
}

#[test]
fn faults_are_typed_errors_naming_the_file_and_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n\n").unwrap();
    let importer = Importer::new(dir.path().join("storage"));
    match importer.import_file(&empty, None) {
        Err(ImportError::Read { path, message }) => {
            assert_eq!(path, empty);
            assert!(message.contains("empty file"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let missing = dir.path().join("missing.jsonl");
    let e = importer.import_file(&missing, None).unwrap_err();
    assert!(
        e.to_string().starts_with(&missing.display().to_string()),
        "{e}"
    );
    // A store root that is not there: nothing is imported, the error names it.
    let store = Store {
        provider: Provider::Claude,
        dirs: vec![missing.clone()],
    };
    assert!(matches!(
        importer.import_store(&store, None),
        Err(ImportError::NotFound { path, .. }) if path == missing
    ));
}

#[test]
fn diagnostics_go_to_the_progress_callback() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("noisy.jsonl");
    let mut text = std::fs::read_to_string(fixture("scenario-stream-json.jsonl")).unwrap();
    text.insert_str(0, "{\"type\": 7}\nnot json at all\n");
    std::fs::write(&input, text).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let importer = Importer::new(dir.path().join("storage")).with_progress(Arc::new(move |n| {
        if let Notice::Diagnostics {
            input, kind, count, ..
        } = n
        {
            sink.lock()
                .unwrap()
                .push((input.to_path_buf(), kind.to_owned(), count));
        }
    }));
    let run = importer
        .import_file(&input, Some(Provider::Claude))
        .unwrap();
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|(p, _, _)| *p == input));
    assert_eq!(
        seen.iter().map(|(_, _, n)| n).sum::<usize>(),
        run.diagnostics
    );
}

#[test]
fn a_store_is_imported_incrementally() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("projects/-app");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(fixture("session.jsonl"), project.join("s1.jsonl")).unwrap();
    let importer = Importer::new(dir.path().join("storage"));
    let store = Store {
        provider: Provider::Claude,
        dirs: vec![dir.path().join("projects")],
    };
    let first = importer.import_store(&store, None).unwrap();
    assert_eq!(first.len(), 1);
    let Ok((StoreOutcome::New(run, events, _), _)) = &first[0].result else {
        panic!("{:?}", first[0].result)
    };
    assert!(*events > 0);
    let again = importer.import_store(&store, None).unwrap();
    assert!(
        matches!(&again[0].result, Ok((StoreOutcome::Unchanged(r), _)) if r == run),
        "{:?}",
        again[0].result
    );
}

/// #51 item 3: a source already imported is not a second run: the same file again, or a copy
/// of it at another path (the same first 4 KiB), is reported unchanged under the first run,
/// and the storage holds one run.
#[test]
fn a_source_imported_again_or_copied_is_not_a_second_run() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let mut log = format!(
        "{{\"type\":\"summary\",\"summary\":\"{}\"}}\n",
        "padding ".repeat(600)
    );
    log.push_str(&std::fs::read_to_string(fixture("session.jsonl")).unwrap());
    assert!(log.len() > 4096);
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("elsewhere-b.jsonl");
    std::fs::write(&a, &log).unwrap();
    std::fs::write(&b, &log).unwrap();
    let importer = Importer::new(&storage);
    let first = importer.import_file(&a, Some(Provider::Claude)).unwrap();
    assert_eq!(first.outcome, ImportOutcome::New);
    for again in [&a, &b] {
        let run = importer.import_file(again, Some(Provider::Claude)).unwrap();
        assert_eq!(run.outcome, ImportOutcome::Unchanged, "{}", again.display());
        assert_eq!(run.run_id, first.run_id);
        assert_eq!(run.events, 0);
    }
    let runs = std::fs::read_dir(&storage)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jsonl")
        })
        .count();
    assert_eq!(runs, 1);
    // A different log is a new run.
    let other = importer
        .import_file(&fixture("session.jsonl"), Some(Provider::Claude))
        .unwrap();
    assert_eq!(other.outcome, ImportOutcome::New);
    assert_ne!(other.run_id, first.run_id);
}
