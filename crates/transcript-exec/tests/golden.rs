//! The golden demo run (NFR-004): `fixtures/workflows/demo.yaml` run
//! deterministically through the real JSONL recorder must equal
//! `fixtures/golden/demo-run/` byte for byte (root file, child files
//! and audit trail). Regenerate after an intended change with
//! `UPDATE_GOLDENS=1 cargo test -p transcript-exec --test golden`
//! and review the diff.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_domain::tree::build_run_tree;
use transcript_domain::{EventType, Fidelity, ManualClock, RunId};
use transcript_exec::{ExecutionService, WorkflowSet};
use transcript_infra::JsonlRecorderFactory;

use support::*;

fn read_dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Runs the demo; returns the storage directory's files and the outcome.
async fn demo_run(storage: &Path) -> transcript_exec::RunOutcome {
    let (_d, ws) = workspace();
    let factory =
        JsonlRecorderFactory::new(storage).with_clock(Arc::new(ManualClock::stepping(ts0(), 1)));
    // Relative to the repository, as the README runs it (and the binary's golden test), so
    // `run.started` records a machine-independent path (wire decision 16). Every test of this
    // binary that changes directory changes it to the same place.
    std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap();
    let set = WorkflowSet::load("fixtures/workflows/demo.yaml").unwrap();
    // The demo declares its plugin; start it the way a runner does.
    let mut router = transcript_exec::ToolRouter::with_builtins();
    assert_eq!(
        transcript_exec::start_declared_plugins(&set, &mut router)
            .await
            .unwrap(),
        1
    );
    let builder = ExecutionService::deterministic_builder(&ws, ts0())
        .clock(Arc::new(ManualClock::stepping(ts0(), 1)))
        .recorder_factory(Arc::new(factory))
        .audit_file(storage.join("audit.jsonl"))
        .router(router);
    let svc = with_stamp_step(builder).build().unwrap();
    svc.run(&set, Map::new(), CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn demo_run_equals_the_golden_files() {
    let storage = tempfile::tempdir().unwrap();
    let out = demo_run(storage.path()).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert!(
        out.transcript_errors.is_empty(),
        "{:?}",
        out.transcript_errors
    );
    let produced = read_dir_files(storage.path());

    let golden_dir = fixtures().join("golden/demo-run");
    if std::env::var("UPDATE_GOLDENS").is_ok_and(|v| v == "1") {
        let _ = std::fs::remove_dir_all(&golden_dir);
        std::fs::create_dir_all(&golden_dir).unwrap();
        for (name, bytes) in &produced {
            std::fs::write(golden_dir.join(name), bytes).unwrap();
        }
        eprintln!("golden files rewritten in {}", golden_dir.display());
    }
    assert!(
        golden_dir.is_dir(),
        "no golden files; run with UPDATE_GOLDENS=1 and review"
    );
    let golden = read_dir_files(&golden_dir);
    assert_eq!(
        produced.keys().collect::<Vec<_>>(),
        golden.keys().collect::<Vec<_>>(),
        "same files (root, children, audit)"
    );
    for (name, bytes) in &produced {
        if let Some(diff) = line_diff(&golden[name], bytes) {
            panic!("{name} differs from the golden file (UPDATE_GOLDENS=1 rewrites it):\n{diff}");
        }
    }
}

#[tokio::test]
async fn demo_exercises_every_kind_and_its_tree_matches_the_execution() {
    let storage = tempfile::tempdir().unwrap();
    let out = demo_run(storage.path()).await;
    assert!(out.succeeded(), "{:?}", out.error);
    let load = |id: RunId| -> Option<Vec<transcript_domain::DecodedEvent>> {
        std::fs::read(storage.path().join(id.file_name()))
            .ok()
            .map(|b| decode_all(&b))
    };
    let root = load(out.run_id).unwrap();
    let tree = build_run_tree(&root, &mut |id| load(id));
    assert!(tree.all_problems().is_empty(), "{:?}", tree.all_problems());
    assert_eq!(tree.outline(), exec_outline(&out));

    let mut all = Vec::new();
    let mut files = 0;
    for (name, bytes) in read_dir_files(storage.path()) {
        if name.ends_with(".jsonl") && name != "audit.jsonl" {
            let events = decode_all(&bytes);
            assert_well_formed(&events);
            all.extend(events);
            files += 1;
        }
    }
    assert_eq!(files, 3, "root + child + grandchild");
    let kinds: BTreeSet<String> = all
        .iter()
        .filter(|e| {
            matches!(
                e.kind.known(),
                Some(EventType::StepStarted | EventType::CallWorkflowStarted)
            )
        })
        .map(|e| e.step().unwrap().kind.clone())
        .collect();
    for k in [
        "agent",
        "command",
        "operation",
        "terminal",
        "parallel",
        "for_each",
        "while",
        "call_workflow",
        "stamp",
    ] {
        assert!(kinds.contains(k), "kind {k} missing from {kinds:?}");
    }
    let providers: BTreeSet<String> = all
        .iter()
        .filter_map(|e| e.message().and_then(|m| m.provider.clone()))
        .collect();
    assert_eq!(
        providers,
        BTreeSet::from(["claude".to_owned(), "codex".to_owned()])
    );
    let router_tools: BTreeSet<String> = all
        .iter()
        .filter_map(|e| e.tool())
        .filter(|t| t.fidelity == Fidelity::Router)
        .map(|t| t.name.clone())
        .collect();
    assert!(router_tools.contains("write_file") && router_tools.contains("upper"));
    let failed: Vec<&str> = all
        .iter()
        .filter(|e| e.kind.known() == Some(EventType::StepCompleted))
        .filter(|e| e.step().unwrap().error.is_some())
        .map(|e| e.path.as_str())
        .collect();
    assert_eq!(failed, ["attempts.flaky"], "exactly one failing branch");
    // One call/result pair per call_id per file (US3).
    let mut per_file: BTreeMap<(RunId, String, &str), usize> = BTreeMap::new();
    for e in &all {
        if let Some(t) = e.tool() {
            *per_file
                .entry((e.run_id, t.call_id.clone(), e.kind.as_str()))
                .or_default() += 1;
        }
    }
    assert!(per_file.values().all(|n| *n == 1), "{per_file:?}");
}

/// The lines that differ between `golden` and `produced` (`-` golden, `+` produced, with line
/// numbers), or `None` when the bytes are equal.
fn line_diff(golden: &[u8], produced: &[u8]) -> Option<String> {
    if golden == produced {
        return None;
    }
    let (g, p) = (
        String::from_utf8_lossy(golden),
        String::from_utf8_lossy(produced),
    );
    let (g, p): (Vec<&str>, Vec<&str>) = (g.lines().collect(), p.lines().collect());
    let mut out = String::new();
    for i in 0..g.len().max(p.len()) {
        let (a, b) = (g.get(i), p.get(i));
        if a != b {
            if let Some(a) = a {
                out.push_str(&format!("-{:>4} {a}\n", i + 1));
            }
            if let Some(b) = b {
                out.push_str(&format!("+{:>4} {b}\n", i + 1));
            }
        }
    }
    if out.is_empty() {
        out.push_str("(line endings differ)\n");
    }
    Some(out)
}

#[test]
fn the_golden_diff_names_the_lines_that_differ() {
    assert_eq!(line_diff(b"a\nb\n", b"a\nb\n"), None);
    assert_eq!(
        line_diff(b"a\nb\nc\n", b"a\nB\nc\nd\n").unwrap(),
        "-   2 b\n+   2 B\n+   4 d\n"
    );
}
