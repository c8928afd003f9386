//! One request, one bill across everything `receipts` reads (#51). A real Claude Code session
//! log (`$TRANSCRIPT_REAL_FIXTURES/claude-code/spotter-session-log-v2.1.38-subagent.jsonl`,
//! whose streamed records repeat requests with rising `output_tokens`) with:
//!
//! - its resumed copy, made here as Claude Code writes one (a new session id, the earlier
//!   records again with the same `message.id` and `requestId`), both imported as a store;
//! - the same log imported twice both ways (`--store` then by file twice, and by file twice
//!   then `--store`);
//! - a copy taken while it streamed (every `output_tokens` still 1) beside the final log.
//!
//! Each time `receipts --by day|session|model` bills one bill equal to jq's over the distinct
//! requests (computed by `jq` here, outside our code, priced by hand from the pinned LiteLLM
//! prices of claude-opus-4-6), counts requests, not records, and says how many duplicate
//! turns it set aside.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, text};
use serde_json::Value;

const LOG: &str = "spotter-session-log-v2.1.38-subagent.jsonl";

/// jq's bill of the distinct requests of Claude Code session logs: the key is
/// `message.id/requestId`, each request's last streamed copy (the largest `output_tokens`)
/// counts, priced from the pinned table's claude-opus-4-6 entry (input 5e-06, output
/// 2.5e-05, cache read 5e-07, 5-minute cache write 6.25e-06, 1-hour cache write 1e-05).
const TRUTH: &str = r#"
[inputs | select(.type == "assistant" and .message.usage != null)
 | {k: (.message.id + "/" + (.requestId // "")), u: .message.usage}]
| group_by(.k) | map(max_by(.u.output_tokens) | .u)
| {requests: length,
   input_tokens: (map(.input_tokens // 0) | add),
   output_tokens: (map(.output_tokens // 0) | add),
   cache_read_tokens: (map(.cache_read_input_tokens // 0) | add),
   cache_write_tokens: (map(.cache_creation_input_tokens // 0) | add),
   cost: (map((.input_tokens // 0) * 5e-06 + (.output_tokens // 0) * 2.5e-05
              + (.cache_read_input_tokens // 0) * 5e-07
              + ((.cache_creation_input_tokens // 0)
                 - (.cache_creation.ephemeral_1h_input_tokens // 0)) * 6.25e-06
              + (.cache_creation.ephemeral_1h_input_tokens // 0) * 1e-05) | add)}
"#;

/// Records of every assistant line of `files`, as jq reads them: jq's bill.
fn jq_truth(files: &[&Path]) -> Value {
    let out = std::process::Command::new("jq")
        .args(["-n", "-c", TRUTH])
        .args(files)
        .output()
        .expect("jq is installed");
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

fn import(storage: &Path, args: &[&Path]) -> Output {
    ok(bin()
        .args(["import", "claude", "--storage"])
        .arg(storage)
        .args(args)
        .output()
        .unwrap())
}

/// The log's lines, each record's `sessionId` set to `session` and, when `streaming`, each
/// assistant record's `output_tokens` cut to 1 (a copy taken while the requests streamed).
fn copy_of(log: &Path, session: &str, lines: usize, streaming: bool) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let mut out = String::new();
    for line in text.lines().take(lines) {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v.get("sessionId").is_some() {
            v["sessionId"] = session.into();
        }
        if streaming && v["type"] == "assistant" && v["message"]["usage"].is_object() {
            v["message"]["usage"]["output_tokens"] = 1.into();
        }
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push('\n');
    }
    out
}

/// `receipts --by <by> --json` over `storage`: the groups summed (requests, tokens, cost)
/// and the duplicates it set aside, with its stderr.
fn billed(storage: &Path, by: &str) -> (Value, String) {
    let out = ok(bin()
        .args(["receipts", "--by", by, "--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = r["groups"].as_array().unwrap();
    let sum = |f: &dyn Fn(&Value) -> u64| groups.iter().map(f).sum::<u64>();
    let counts = [
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    ];
    let mut bill = serde_json::json!({
        "requests": sum(&|g| g["turns"].as_u64().unwrap()),
        "cost": groups.iter().map(|g| g["cost_usd"].as_f64().unwrap()).sum::<f64>(),
        "duplicates": r["duplicates"],
    });
    for c in counts {
        bill[c] = sum(&|g| g["usage"][c].as_u64().unwrap_or(0)).into();
    }
    (bill, text(&out.stderr))
}

/// Every grouping bills jq's truth: the same requests, tokens and cost (to float summation
/// order); `duplicates` turns were set aside and said so.
fn assert_one_bill(storage: &Path, truth: &Value, duplicates: u64) {
    for by in ["day", "session", "model"] {
        let (bill, err) = billed(storage, by);
        for k in [
            "requests",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
        ] {
            assert_eq!(bill[k], truth[k], "--by {by}: {k}: {bill} vs jq {truth}");
        }
        let (ours, jq) = (
            bill["cost"].as_f64().unwrap(),
            truth["cost"].as_f64().unwrap(),
        );
        assert!(
            (ours - jq).abs() < 1e-9,
            "--by {by}: cost {ours} vs jq {jq}"
        );
        assert_eq!(bill["duplicates"], duplicates, "--by {by}");
        let note = format!("transcript: note: {duplicates} duplicate turn(s) set aside");
        assert_eq!(duplicates > 0, err.contains(&note), "--by {by}: {err}");
    }
}

/// The runs of `storage` (its transcript files).
fn runs(storage: &Path) -> usize {
    std::fs::read_dir(storage)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .and_then(|x| x.to_str())
                == Some("jsonl")
        })
        .count()
}

/// A Claude Code store (`projects/<project>/<session>.jsonl`) holding `files`.
fn store(dir: &Path, files: &[(&str, String)]) -> PathBuf {
    let project = dir.join("projects").join("-work-demo");
    std::fs::create_dir_all(&project).unwrap();
    for (session, body) in files {
        std::fs::write(project.join(format!("{session}.jsonl")), body).unwrap();
    }
    dir.join("projects")
}

#[test]
fn a_resumed_copy_bills_its_history_once() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    let dir = tempfile::tempdir().unwrap();
    let original = copy_of(&log, "0f6e1c52-0000-4000-8000-000000000001", lines, false);
    let resumed = copy_of(
        &log,
        "0f6e1c52-0000-4000-8000-000000000002",
        lines / 2,
        false,
    );
    let root = store(
        dir.path(),
        &[
            ("0f6e1c52-0000-4000-8000-000000000001", original),
            ("0f6e1c52-0000-4000-8000-000000000002", resumed),
        ],
    );
    let files: Vec<PathBuf> = ["1", "2"]
        .iter()
        .map(|n| {
            root.join(format!(
                "-work-demo/0f6e1c52-0000-4000-8000-00000000000{n}.jsonl"
            ))
        })
        .collect();
    let truth = jq_truth(&[&files[0], &files[1]]);
    // The resumed copy adds no request: the truth is the log's own.
    assert_eq!(truth, jq_truth(&[&log]));
    let storage = tempfile::tempdir().unwrap();
    let imported = import(storage.path(), &[&root]);
    assert_eq!(runs(storage.path()), 2);
    // The import's own total bills as `receipts` does (#59 item 5): one request, one bill.
    let said = text(&imported.stderr);
    let total = said
        .lines()
        .find(|l| l.contains("imported now:"))
        .and_then(|l| l.rsplit_once("cost $"))
        .map(|(_, c)| c.trim().parse::<f64>().unwrap())
        .unwrap_or_else(|| panic!("{said}"));
    let jq = truth["cost"].as_f64().unwrap();
    assert!(
        (total - jq).abs() < 1e-6,
        "import says ${total}, jq ${jq}\n{said}"
    );
    assert!(said.contains("duplicate turn(s) set aside"), "{said}");
    // The resumed copy's assistant turns, all set aside.
    let (bill, _) = billed(storage.path(), "day");
    let set_aside = bill["duplicates"].as_u64().unwrap();
    assert!(set_aside > 0, "{bill}");
    assert_one_bill(storage.path(), &truth, set_aside);
}

#[test]
fn the_same_log_imported_twice_both_ways_is_one_bill() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = std::fs::read_to_string(&log).unwrap();
    let root = store(
        dir.path(),
        &[("491e126e-1e71-469c-ade2-fcc8af567c74", body)],
    );
    let file = root.join("-work-demo/491e126e-1e71-469c-ade2-fcc8af567c74.jsonl");
    let truth = jq_truth(&[&log]);
    // --store, then by file twice.
    let a = tempfile::tempdir().unwrap();
    import(a.path(), &[&root]);
    for _ in 0..2 {
        let err = text(&import(a.path(), &[&file]).stderr);
        assert!(err.contains("already imported as run"), "{err}");
    }
    assert_eq!(runs(a.path()), 1);
    assert_one_bill(a.path(), &truth, 0);
    // By file twice, then --store.
    let b = tempfile::tempdir().unwrap();
    import(b.path(), &[&file]);
    import(b.path(), &[&file]);
    let out = import(b.path(), &[&root]);
    assert!(
        text(&out.stdout).ends_with("\tunchanged\n"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(runs(b.path()), 1);
    assert_one_bill(b.path(), &truth, 0);
}

#[test]
fn a_copy_taken_while_streaming_is_billed_once_at_its_final_size() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snapshot.jsonl");
    std::fs::write(
        &snapshot,
        copy_of(&log, "0f6e1c52-0000-4000-8000-000000000003", lines, true),
    )
    .unwrap();
    // jq keeps each request's largest copy: the final log's.
    let truth = jq_truth(&[&snapshot, &log]);
    assert_eq!(truth, jq_truth(&[&log]));
    let storage = tempfile::tempdir().unwrap();
    // The snapshot read first: the larger copy wins, not the first.
    import(storage.path(), &[&snapshot]);
    import(storage.path(), &[&log]);
    assert_eq!(runs(storage.path()), 2);
    let (bill, _) = billed(storage.path(), "day");
    let set_aside = bill["duplicates"].as_u64().unwrap();
    assert!(set_aside > 0, "{bill}");
    assert_one_bill(storage.path(), &truth, set_aside);
}
