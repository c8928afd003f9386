//! `transcript import copilot --store` on a store laid out as Copilot CLI lays it out, by the
//! published evidence (no schema is published by GitHub; these are third-party readers of real
//! sessions): `$COPILOT_HOME/session-state/<session-id>/events.jsonl` beside a
//! `workspace.yaml`, `COPILOT_HOME` standing for `~/.copilot`
//! (https://github.com/tenequm/pond/issues/206,
//! https://github.com/ingo-eichhorst/Irrlicht/issues/1256: the directory name is
//! `session.start.data.sessionId` and the id `copilot --resume` takes), input and cache
//! counts only in `session.shutdown`'s `modelMetrics.<model>.usage`
//! (https://github.com/mag123c/toktrack/pull/211, https://github.com/kenn-io/agentsview/pull/577).
//! The events file is our fixture built from those shapes,
//! `fixtures/providers/copilot/session-state-events.jsonl`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, repo, text};
use serde_json::Value;

const SESSION: &str = "a995dbc4-4649-4073-82de-afcbbc8aec81";

fn receipts(storage: &Path, args: &[&str]) -> Value {
    let out = bin()
        .arg("receipts")
        .args(args)
        .args(["--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_copilot_session_directory_is_imported_billed_once_and_reported_as_its_session() {
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("session-state").join(SESSION);
    std::fs::create_dir_all(&session).unwrap();
    std::fs::copy(
        repo().join("fixtures/providers/copilot/session-state-events.jsonl"),
        session.join("events.jsonl"),
    )
    .unwrap();
    std::fs::write(
        session.join("workspace.yaml"),
        format!("id: {SESSION}\ncwd: /tmp/cap\nclient_name: github/cli\n"),
    )
    .unwrap();
    let storage = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["import", "copilot", "--store", "--storage"])
        .arg(storage.path())
        .env("COPILOT_HOME", home.path())
        .env("HOME", storage.path().join("no-such-home"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one session, one run: {stdout}");
    let run = lines[0].split('\t').next().unwrap();
    let r = receipts(storage.path(), &[run]);
    // jq over the fixture: outputTokens of the two messages 30 + 12; the shutdown's
    // modelMetrics."gpt-5-mini".usage: inputTokens 21100 − cacheReadTokens 21000 = 100
    // fresh input, outputTokens 42.
    let t = &r["total"];
    assert_eq!(
        (
            &t["input_tokens"],
            &t["output_tokens"],
            &t["cache_read_tokens"]
        ),
        (&Value::from(100), &Value::from(42), &Value::from(21000)),
        "{r:#}"
    );
    // gpt-5-mini in LiteLLM 1.110.2: 2.5e-07 in, 2.5e-08 cache read, 2e-06 out:
    // 100×2.5e-07 + 21000×2.5e-08 + 42×2e-06 = 0.000025 + 0.000525 + 0.000084 = 0.000634
    let cost = r["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.000634).abs() < 1e-12, "{cost}");
    // The session is its directory, not the file name every session shares.
    let g = receipts(storage.path(), &["--by", "session"]);
    let keys: Vec<&str> = g["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [SESSION], "{g:#}");
}
