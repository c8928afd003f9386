//! `transcript import copilot --store` (issue #29 item 3) finds Copilot CLI's session state
//! through `COPILOT_HOME` (`$COPILOT_HOME/session-state/<session>/events.jsonl`, else
//! `~/.copilot/session-state`). The real CLI cannot run here (it needs a GitHub login, and
//! its npm package 1.0.102 is a native loader that fetches the app into `~/.copilot/pkg`
//! or `$COPILOT_HOME/pkg` at run time), so the store is built from the real `events.jsonl`
//! capture under `$TRANSCRIPT_REAL_FIXTURES/copilot`, and the receipts equal jq over it.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::{bin, text};
use serde_json::Value;

#[test]
fn copilot_store_is_found_through_copilot_home_and_bills_each_message_once() {
    let Some(dir) = std::env::var_os("TRANSCRIPT_REAL_FIXTURES") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is unset"
        );
        eprintln!("skipped: TRANSCRIPT_REAL_FIXTURES is unset");
        return;
    };
    let capture =
        PathBuf::from(dir).join("copilot/agent-sessions-copilot-events-jsonl-schema-fixture.jsonl");
    assert!(capture.is_file(), "{} is missing", capture.display());
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("session-state/copilot_stage0_small");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::copy(&capture, session.join("events.jsonl")).unwrap();
    let storage = tempfile::tempdir().unwrap();
    let import = || {
        let out = bin()
            .args(["import", "copilot", "--store", "--storage"])
            .arg(storage.path())
            .env("COPILOT_HOME", home.path())
            .env("HOME", storage.path().join("no-such-home"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let first = import();
    let fields: Vec<&str> = first.trim().split('\t').collect();
    assert_eq!(fields[1], "copilot", "{first}");
    assert_eq!(fields[3], "new", "{first}");
    let out = bin()
        .args(["receipts", fields[0], "--json", "--storage"])
        .arg(storage.path())
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    // jq -s '[.[] | select(.type=="assistant.message") | {(.data.messageId): .data.outputTokens}]
    //   | add | [.[]] | add' <capture> → 15 (m-1: 12, m-2: 3, the trimmed ones 0)
    assert_eq!(r["total"]["output_tokens"], 15, "{r}");
    let again = import();
    assert!(again.trim().ends_with("\tunchanged"), "{again}");
}
