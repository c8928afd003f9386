//! The diff document's JSON Schema is checked in (`schema/diff-document.schema.json`), current,
//! and what `diff` returns validates against it and reads back.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::*;
use serde_json::{Value, json};
use transcript_compare::{DiffDocument, DiffOptions, diff, diff_schema};

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema/diff-document.schema.json")
}

#[test]
fn checked_in_schema_is_current() {
    let fresh = serde_json::to_string_pretty(&diff_schema()).unwrap() + "\n";
    if std::env::var("TRANSCRIPT_UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
        std::fs::write(schema_path(), &fresh).unwrap();
    }
    let checked_in = std::fs::read_to_string(schema_path())
        .expect("schema/diff-document.schema.json missing: run with TRANSCRIPT_UPDATE_SCHEMA=1");
    assert_eq!(
        checked_in, fresh,
        "diff schema changed: rerun with TRANSCRIPT_UPDATE_SCHEMA=1 and review"
    );
}

#[test]
fn a_diff_document_validates_and_reads_back() {
    let mut a = Run::new(A);
    a.command("build", "a\nb\nc\n", 0);
    a.agent("review", "grep", json!({"q": 1}), "c1", "yes");
    a.command("gone", "x", 0);
    a.complete(None);
    let mut b = Run::new(B);
    b.command("build", "a\nB\nc\n", 1);
    b.agent("review", "grep", json!({"q": 2}), "c2", "no");
    b.command("new", "x", 0);
    b.complete(Some("failed"));
    let doc = diff(
        &a.record(&[]),
        &b.record(&[]),
        &DiffOptions { strict_ids: true },
    );
    let value = serde_json::to_value(&doc).unwrap();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(value["schema_version"], "1.2.0");
    // The first divergence is named first: `build`'s status, before the rest.
    assert_eq!(value["divergence"]["step"], "build", "{value}");
    assert_eq!(value["divergence"]["field"], "status", "{value}");
    let back: DiffDocument = serde_json::from_value(value).unwrap();
    assert_eq!(back, doc);
}
