//! The import index after the bulk import (issue #29 item 4): it keeps a digest of the last
//! turn, not the turn, so it stays small and holds no session content (the old index copied
//! the last turn verbatim, unmasked under `--redact`, mode 0644); an index written the old
//! way (whole turns under `tail`) keeps appending exactly what a grown session added.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{bin, text};
use serde_json::Value;

const SECRET: &str = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ";

/// Claude Code records of one session: a prompt, then one API request (`msg_A`/`req_A`)
/// whose content blocks arrive in two records with the result of its own tool call between
/// them (`grown` adds the second one).
fn session(grown: bool) -> String {
    let mut lines = vec![
        r#"{"type":"user","message":{"role":"user","content":"List the files"},"uuid":"p-1","sessionId":"ses-1","parentUuid":null,"timestamp":"2026-01-02T10:00:00.000Z"}"#.to_owned(),
        format!(
            r#"{{"type":"assistant","requestId":"req_A","message":{{"id":"msg_A","model":"claude-sonnet-4-5","role":"assistant","content":[{{"type":"text","text":"Listing with {SECRET}."}},{{"type":"tool_use","id":"toolu_1","name":"Bash","input":{{"command":"ls"}}}}],"usage":{{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":100}}}},"uuid":"a-1","sessionId":"ses-1","parentUuid":"p-1","timestamp":"2026-01-02T10:00:01.000Z"}}"#
        ),
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt"}]},"uuid":"r-1","sessionId":"ses-1","parentUuid":"a-1","timestamp":"2026-01-02T10:00:02.000Z"}"#.to_owned(),
    ];
    if grown {
        lines.push(r#"{"type":"assistant","requestId":"req_A","message":{"id":"msg_A","model":"claude-sonnet-4-5","role":"assistant","content":[{"type":"text","text":"One file."}],"usage":{"input_tokens":7,"output_tokens":40,"cache_read_input_tokens":100}},"uuid":"a-2","sessionId":"ses-1","parentUuid":"r-1","timestamp":"2026-01-02T10:00:03.000Z"}"#.to_owned());
    }
    lines.join("\n") + "\n"
}

/// `transcript import claude --store --deterministic` of the store under `config`.
fn import(config: &Path, storage: &Path, extra: &[&str]) -> String {
    let out = bin()
        .args(["import", "claude", "--store", "--deterministic"])
        .args(extra)
        .arg("--storage")
        .arg(storage)
        .env("CLAUDE_CONFIG_DIR", config)
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn index(storage: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(storage.join("import-index.json")).unwrap()).unwrap()
}

fn run_file(storage: &Path) -> std::path::PathBuf {
    storage.join("00000000-0000-4000-8000-000000000001.jsonl")
}

#[test]
fn the_index_holds_no_session_content_and_is_private_even_under_redact() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude");
    let project = config.join("projects/-work-demo");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("s1.jsonl"), session(false)).unwrap();
    let storage = home.path().join("storage");
    import(&config, &storage, &["--redact"]);
    let transcript = std::fs::read_to_string(run_file(&storage)).unwrap();
    assert!(transcript.contains("Listing with"), "{transcript}");
    assert!(!transcript.contains(SECRET), "masked in the transcript");
    let raw = std::fs::read_to_string(storage.join("import-index.json")).unwrap();
    assert!(!raw.contains(SECRET), "the index copies no secret: {raw}");
    assert!(!raw.contains("Listing with"), "nor any content: {raw}");
    let entry = index(&storage)["files"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    // The turn the stream ended with, as a digest: one sha256 per block (its text, the tool
    // call and the call's result), and its usage.
    let tail = &entry["tail_digest"];
    assert_eq!(tail["blocks"].as_array().unwrap().len(), 3, "{entry}");
    assert!(tail["blocks"][0].as_str().unwrap().len() == 64, "{entry}");
    assert_eq!(tail["usage"]["output_tokens"], 3, "{entry}");
    let mode = std::fs::metadata(storage.join("import-index.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// The whole turn an index of the previous version kept under `tail`: the payload of the
/// run's last `message.assistant` line (what the old import serialized there).
fn to_old_index(storage: &Path) {
    let mut idx = index(storage);
    let transcript = std::fs::read_to_string(run_file(storage)).unwrap();
    let last_turn = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|e| e["type"] == "message.assistant")
        .unwrap()["payload"]
        .clone();
    for entry in idx["files"].as_object_mut().unwrap().values_mut() {
        let e = entry.as_object_mut().unwrap();
        assert!(e.remove("tail_digest").is_some_and(|d| !d.is_null()));
        e.insert("tail".to_owned(), last_turn.clone());
    }
    std::fs::write(
        storage.join("import-index.json"),
        serde_json::to_string_pretty(&idx).unwrap(),
    )
    .unwrap();
}

#[test]
fn an_index_of_whole_turns_keeps_appending_only_what_a_grown_session_added() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude");
    let project = config.join("projects/-work-demo");
    std::fs::create_dir_all(&project).unwrap();
    let log = project.join("s1.jsonl");
    std::fs::write(&log, session(false)).unwrap();
    let (old, new) = (home.path().join("old"), home.path().join("new"));
    import(&config, &old, &[]);
    import(&config, &new, &[]);
    to_old_index(&old);
    let before = std::fs::read(run_file(&old)).unwrap();
    std::fs::write(&log, session(true)).unwrap();
    let out = import(&config, &old, &[]);
    assert!(out.trim_end().ends_with("appended"), "{out}");
    import(&config, &new, &[]);
    let (a, b) = (
        std::fs::read(run_file(&old)).unwrap(),
        std::fs::read(run_file(&new)).unwrap(),
    );
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    assert_eq!(&a[..before.len()], &before[..], "appended only");
    // What was appended is the new block and the usage the request grew by, once.
    let appended = String::from_utf8_lossy(&a[before.len()..]).into_owned();
    assert_eq!(appended.matches("One file.").count(), 1, "{appended}");
    assert!(!appended.contains("Listing with"), "{appended}");
    assert!(appended.contains(r#""output_tokens":37"#), "{appended}");
    // The index is written back as digests.
    let raw = std::fs::read_to_string(old.join("import-index.json")).unwrap();
    assert!(
        raw.contains("tail_digest") && !raw.contains("\"tail\""),
        "{raw}"
    );
}
