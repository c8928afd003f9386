//! `transcript import` says what it imported in tokens and dollars (issue #29 item 4), priced
//! by the embedded LiteLLM table as `receipts` prices it: for one file, for several (with
//! their sum), and for `--store` / directories (per file, and what this import added). An
//! unknown model's cost is `—` with one warning naming it, never $0.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, text};
use serde_json::Value;

fn real(folder: &str, name: &str) -> Option<PathBuf> {
    common::real_fixture(folder, name)
}

fn import(provider: &str, storage: &Path, args: &[&Path]) -> Output {
    let out = bin()
        .args(["import", provider, "--storage"])
        .arg(storage)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// The receipt total of `run` as the import line words it.
fn receipt_words(storage: &Path, run: &str) -> String {
    let out = bin()
        .args(["receipts", run, "--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &r["total"];
    let n = |k: &str| t[k].as_u64().map_or("—".to_owned(), |v| v.to_string());
    let cost = r["cost_usd"]
        .as_f64()
        .map_or("—".to_owned(), |c| format!("${c:.6}"));
    format!(
        "tokens: input {}, output {}, cache read {}, cache write {}, reasoning {}; cost {cost}",
        n("input_tokens"),
        n("output_tokens"),
        n("cache_read_tokens"),
        n("cache_write_tokens"),
        n("reasoning_tokens"),
    )
}

#[test]
fn one_file_import_prints_the_tokens_and_cost_receipts_give() {
    let Some(log) = real(
        "claude-code",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ) else {
        return;
    };
    let storage = tempfile::tempdir().unwrap();
    let out = import("auto", storage.path(), &[&log]);
    let run = text(&out.stdout).split('\t').next().unwrap().to_owned();
    let err = text(&out.stderr);
    let words = receipt_words(storage.path(), &run);
    // receipts_cost.rs computes this cost by hand from the pinned table: $0.2266455.
    assert!(words.contains("cost $0.22664"), "{words}");
    // jq truth of issue #29 item 1 for this log: input 54, cache read 88,231.
    assert!(words.starts_with("tokens: input 54, output "), "{words}");
    let line = err
        .lines()
        .find(|l| l.starts_with("transcript: imported "))
        .unwrap();
    assert!(line.ends_with(&format!("; {words}")), "{line}\n{words}");
    assert!(!err.contains("warning: no price"), "{err}");
}

/// A Gemini CLI saved session (the 0.61 shape) of one turn by `model`.
fn chat(dir: &Path, name: &str, model: &str) -> PathBuf {
    let path = dir.join("chats").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let lines = [
        r#"{"sessionId":"s1","projectHash":"p","startTime":"2026-11-26T00:00:00.000Z","lastUpdated":"2026-11-26T00:00:00.000Z","kind":"main"}"#.to_owned(),
        r#"{"id":"u1","timestamp":"2026-11-26T00:00:01.000Z","type":"user","content":[{"text":"hi"}]}"#.to_owned(),
        format!(
            r#"{{"id":"g1","timestamp":"2026-11-26T00:00:02.000Z","type":"gemini","content":"Hello.","thoughts":[],"tokens":{{"input":1000,"output":20,"cached":400,"thoughts":5,"tool":0,"total":1025}},"model":"{model}"}}"#
        ),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn an_unknown_model_costs_a_dash_and_one_warning_in_file_and_store_imports() {
    let dir = tempfile::tempdir().unwrap();
    let a = chat(dir.path(), "session-a.jsonl", "no-such-model-7");
    let b = chat(dir.path(), "session-b.jsonl", "no-such-model-7");
    let storage = tempfile::tempdir().unwrap();
    let out = import("auto", storage.path(), &[&a, &b]);
    let err = text(&out.stderr);
    let imported: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("transcript: imported "))
        .collect();
    assert_eq!(imported.len(), 2, "{err}");
    for l in &imported {
        assert!(
            l.ends_with(
                "tokens: input 600, output 20, cache read 400, cache write —, reasoning 5; cost —"
            ),
            "{l}"
        );
    }
    assert!(
        err.contains(
            "transcript: 2 runs imported; tokens: input 1200, output 40, cache read 800, cache write —, reasoning 10; cost —"
        ),
        "{err}"
    );
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("no price")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("no-such-model-7"), "{err}");
    assert!(
        !err.contains("$0.0000") && !err.contains("cost $0 "),
        "{err}"
    );

    // The same files as a store: per file and in sum, one warning.
    let storage = tempfile::tempdir().unwrap();
    let out = import("gemini", storage.path(), &[dir.path()]);
    let err = text(&out.stderr);
    assert_eq!(
        err.lines().filter(|l| l.contains("no price")).count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("2 new, 0 appended, 0 unchanged, 0 not imported; imported now: tokens: input 1200, output 40, cache read 800, cache write —, reasoning 10; cost —"),
        "{err}"
    );
}

#[test]
fn a_store_import_prints_what_it_added_priced() {
    let dir = tempfile::tempdir().unwrap();
    let a = chat(dir.path(), "session-a.jsonl", "gemini-2.5-pro");
    let storage = tempfile::tempdir().unwrap();
    let out = import("gemini", storage.path(), &[dir.path()]);
    let run = text(&out.stdout).split('\t').next().unwrap().to_owned();
    let err = text(&out.stderr);
    let words = receipt_words(storage.path(), &run);
    // By hand from the pinned table (gemini-2.5-pro: input $1.25e-6, output $1e-5, cache
    // read $1.25e-7, thoughts at the output price): 600 × 1.25e-6 + 20 × 1e-5
    // + 400 × 1.25e-7 + 5 × 1e-5 = $0.00105.
    assert!(words.ends_with("cost $0.001050"), "{words}");
    assert!(
        err.contains(&format!("{}: new (4 events; {words})", a.display())),
        "{err}\n{words}"
    );
    assert!(err.contains(&format!("imported now: {words}")), "{err}");
    assert!(!err.contains("no price"), "{err}");
    // Nothing new: the next import adds nothing, and says so.
    let out = import("gemini", storage.path(), &[dir.path()]);
    assert!(
        text(&out.stderr).contains("imported now: tokens: input —, output —, cache read —, cache write —, reasoning —; cost $0 (no billed turns)"),
        "{}",
        text(&out.stderr)
    );
}

/// A capture that names no model (Codex `exec --json`: `jq -c 'select(.model? or
/// .item.model? or .msg.model?)'` finds none) is imported with one warning that says so and
/// where the model is recorded, not the workflow hint "set the step's model:" (an import has
/// no step to set).
#[test]
fn a_capture_without_a_model_is_warned_about_in_terms_of_the_import() {
    let Some(capture) = real("codex", "hyperyolo-exec-json-minimal.jsonl") else {
        return;
    };
    let jq = std::process::Command::new("jq")
        .args(["-c", "select(.model? or .item.model? or .msg.model?)"])
        .arg(&capture)
        .output()
        .unwrap();
    assert!(
        jq.status.success() && jq.stdout.is_empty(),
        "the capture names a model"
    );
    let storage = tempfile::tempdir().unwrap();
    let err = text(&import("codex", storage.path(), &[&capture]).stderr);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("some turns name no model"), "{err}");
    assert!(!warnings[0].contains("step's model"), "{err}");
    assert!(warnings[0].contains("~/.codex/sessions"), "{err}");
}
