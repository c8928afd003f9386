//! `audit.jsonl` follows the transcript's file rules (#17 item 5). This
//! binary sets the process-wide umask to 0 for its single test, so it is
//! kept apart from every other test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;
use transcript_exec::{ExecutionService, Step, Workflow, WorkflowSet};

use support::*;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn failing_set() -> WorkflowSet {
    WorkflowSet::new(
        "w",
        Workflow::new("w").input("token", None).step(
            Step::command("leak", "echo \"token=$TOKEN\" >&2; exit 3")
                .with_env("TOKEN", "{{inputs.token}}"),
        ),
    )
}

fn inputs(token: &str) -> Map<String, serde_json::Value> {
    let mut m = Map::new();
    m.insert("token".into(), json!(token));
    m
}

#[tokio::test]
async fn audit_trail_is_private_refuses_symlinks_opens_lazily_and_masks() {
    rustix::process::umask(rustix::fs::Mode::empty());
    let (_d, ws) = workspace();
    let base = tempfile::tempdir().unwrap();

    // umask 0: created directories 0o700, the file 0o600.
    let storage = base.path().join("a/b/st");
    let audit = storage.join("audit.jsonl");
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .audit_file(&audit)
        .audit_mask(Arc::new(|t: &str| t.replace("sekrit-123", "[MASKED]")))
        .build()
        .unwrap();
    // A run refused before it starts leaves no file (not even directories).
    let refused = svc
        .run(&failing_set(), Map::new(), CancellationToken::new())
        .await;
    assert!(refused.is_err());
    assert!(!base.path().join("a").exists());

    let out = svc
        .run(
            &failing_set(),
            inputs("sekrit-123"),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(out.audit_errors.is_empty(), "{:?}", out.audit_errors);
    for dir in ["a", "a/b", "a/b/st"] {
        assert_eq!(mode(&base.path().join(dir)), 0o700, "{dir}");
    }
    assert_eq!(mode(&audit), 0o600);
    // Masked: the failing step's error carried the secret.
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(text.contains("token=[MASKED]"), "{text}");
    assert!(!text.contains("sekrit-123"), "{text}");

    // A symlink planted at the path is refused, its target untouched.
    let other = base.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let target = base.path().join("target.txt");
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, other.join("audit.jsonl")).unwrap();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .audit_file(other.join("audit.jsonl"))
        .build()
        .unwrap();
    let out = svc
        .run(&failing_set(), inputs("x"), CancellationToken::new())
        .await
        .unwrap();
    assert!(
        out.audit_errors
            .iter()
            .all(|e| e.contains("symbolic link; refusing to follow it")),
        "{:?}",
        out.audit_errors
    );
    assert!(!out.audit_errors.is_empty());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}
