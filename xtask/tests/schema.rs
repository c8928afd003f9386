//! Tests of the generated JSON Schema: the checked-in file is fresh, the canonical goldens
//! validate against it, it is not vacuous, and `cargo xtask schema --check` exits 1 on drift.

#![allow(clippy::unwrap_used)] // test harness: a panic is a test failure with a location

use std::process::Command;

use serde_json::Value;
use xtask::schema::{self, SCHEMA_FILE};

const GOLDEN: &str = "fixtures/golden/wire-examples.jsonl";

fn checked_in() -> Value {
    let path = xtask::workspace_root().join(SCHEMA_FILE);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run `cargo xtask schema`", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn golden_lines() -> Vec<(usize, String)> {
    let path = xtask::workspace_root().join(GOLDEN);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<(usize, String)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l.to_owned()))
        .collect();
    assert!(!lines.is_empty(), "{GOLDEN} has no line");
    lines
}

fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("at {}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn checked_in_schema_is_fresh() {
    let root = xtask::workspace_root();
    let fresh = schema::render().unwrap();
    let on_disk = std::fs::read_to_string(root.join(SCHEMA_FILE)).unwrap_or_default();
    assert_eq!(
        schema::compare(&fresh, &on_disk),
        schema::Freshness::Fresh,
        "{SCHEMA_FILE} is stale: run `cargo xtask schema` and commit it"
    );
}

#[test]
fn every_golden_line_validates_against_the_schema() {
    let validator = jsonschema::validator_for(&checked_in()).unwrap();
    let mut failures = Vec::new();
    for (n, line) in golden_lines() {
        let instance: Value = serde_json::from_str(&line).unwrap();
        for v in violations(&validator, &instance) {
            failures.push(format!("{GOLDEN}:{n}: {v}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schema_rejects_broken_envelopes() {
    let validator = jsonschema::validator_for(&checked_in()).unwrap();
    let (_, first) = golden_lines().remove(0);
    let event: Value = serde_json::from_str(&first).unwrap();
    let mutate = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut e = event.clone();
        f(e.as_object_mut().unwrap());
        e
    };
    for (what, broken) in [
        ("no seq", mutate(&|m| drop(m.remove("seq")))),
        ("no run_id", mutate(&|m| drop(m.remove("run_id")))),
        (
            "seq is a string",
            mutate(&|m| drop(m.insert("seq".into(), "1".into()))),
        ),
        (
            "timestamp is a number",
            mutate(&|m| drop(m.insert("timestamp".into(), 0.into()))),
        ),
    ] {
        assert!(
            !validator.is_valid(&broken),
            "schema accepts an envelope with {what}: {broken}"
        );
    }
}

fn xtask_schema_check(root: &std::path::Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["schema", "--check", "--root"])
        .arg(root)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn schema_check_exits_1_when_the_file_is_stale_or_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = xtask_schema_check(dir.path());
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is missing"), "{err}");

    std::fs::create_dir_all(dir.path().join("schema")).unwrap();
    let fresh = schema::render().unwrap();
    let stale = fresh.replacen('\n', "\n  \"stale\": true,\n", 1);
    std::fs::write(dir.path().join(SCHEMA_FILE), &stale).unwrap();
    let (code, err) = xtask_schema_check(dir.path());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("differs from a fresh generation at line 2"),
        "{err}"
    );

    std::fs::write(dir.path().join(SCHEMA_FILE), &fresh).unwrap();
    let (code, err) = xtask_schema_check(dir.path());
    assert_eq!(code, Some(0), "{err}");
}
