//! The attacker's test of `run --redact` for what the first one
//! (`redaction_attack.rs`) left out (#28 leftovers):
//!
//! * a failing command step whose stderr ends inside a multi-line secret
//!   (a folded key, a PEM body): its failure message keeps stderr's last
//!   line, which alone no rule recognises, so the whole stderr is masked
//!   before that line is taken;
//! * an external plugin writing a secret on its stderr, which used to reach
//!   the terminal raw.
//!
//! Secrets come from `fixtures/redaction/corpus.json`; no fragment may reach
//! the run's stderr or stdout, the transcript or `audit.jsonl`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, repo, text};
use serde_json::{Value, json};

fn corpus() -> Value {
    let path = repo().join("fixtures/redaction/corpus.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every corpus case whose secret spans lines: `(name, text, gone)`.
fn multiline_cases() -> Vec<(String, String, Vec<String>)> {
    let corpus = corpus();
    let cases: Vec<_> = corpus["leak"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["text"].as_str().unwrap().contains('\n'))
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["text"].as_str().unwrap().to_owned(),
                c["gone"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| g.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect();
    assert!(cases.len() >= 5, "the corpus lost its multi-line forms");
    cases
}

/// Runs `wf` with `--redact`; returns (exit code, stdout, stderr, every
/// file the storage holds).
fn run_redacted(
    wf: &Path,
    storage: &Path,
    ws: &Path,
    extra: &[&str],
) -> (i32, String, String, String) {
    let out = bin()
        .args(["run", "--deterministic", "--color", "never", "--redact"])
        .args(extra)
        .arg("--storage")
        .arg(storage)
        .arg("--workspace")
        .arg(ws)
        .arg(wf)
        .output()
        .unwrap();
    let mut files = String::new();
    for entry in std::fs::read_dir(storage).unwrap() {
        let path = entry.unwrap().path();
        files.push_str(&std::fs::read_to_string(&path).unwrap());
        // JSON escapes must not hide a fragment: decode every line too.
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            if let Ok(v) = serde_json::from_str::<Value>(line) {
                files.push_str(&strings(&v));
            }
        }
    }
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
        files,
    )
}

fn strings(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s}\n"),
        Value::Array(a) => a.iter().map(strings).collect(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}\n{}", strings(v)))
            .collect(),
        _ => String::new(),
    }
}

fn leaks(name: &str, places: &[(&str, &str)], gone: &[String], failures: &mut Vec<String>) {
    for (place, body) in places {
        for g in gone {
            if body.contains(g.as_str()) {
                failures.push(format!("{name}: {g:?} reached {place}"));
            }
        }
    }
}

#[test]
fn a_multi_line_secret_on_a_failing_commands_stderr_is_masked_whole() {
    let mut failures = Vec::new();
    for (name, secret, gone) in multiline_cases() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // Exactly the secret on stderr, its last line last.
        std::fs::write(ws.join("leak.txt"), &secret).unwrap();
        let wf = dir.path().join("attack.yaml");
        let workflow = json!({
            "name": "attack",
            "steps": [{"name": "fail", "type": "command", "command": "cat leak.txt >&2; exit 3"}]
        });
        std::fs::write(&wf, workflow.to_string()).unwrap();
        let storage = dir.path().join("storage");
        let (code, stdout, stderr, files) = run_redacted(&wf, &storage, &ws, &[]);
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(
            stderr.contains("command exited with code 3"),
            "{name}: the failure is still reported: {stderr}"
        );
        leaks(
            &name,
            &[
                ("stderr", &stderr),
                ("stdout", &stdout),
                ("storage", &files),
            ],
            &gone,
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A plugin that writes `secret` on stderr when it starts and on every call.
const LEAKY_PLUGIN: &str = r#"import json, sys
secret = open(sys.argv[1]).read()
sys.stderr.write("starting with " + secret + "\n"); sys.stderr.flush()
for line in sys.stdin:
    req = json.loads(line)
    if req["method"] == "describe":
        out = {"id": req["id"], "result": {"name": "leaky", "protocol": 1, "operations": ["leak"]}}
    else:
        sys.stderr.write("calling with " + secret + "\n"); sys.stderr.flush()
        out = {"id": req["id"], "result": "done"}
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
"#;

#[test]
fn a_plugins_stderr_is_masked_under_redact() {
    let mut failures = Vec::new();
    let corpus = corpus();
    // One single-line key and every multi-line form.
    let mut cases = multiline_cases();
    let first = &corpus["leak"][0];
    cases.push((
        first["name"].as_str().unwrap().to_owned(),
        first["text"].as_str().unwrap().to_owned(),
        first["gone"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap().to_owned())
            .collect(),
    ));
    for (name, secret, gone) in cases {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let secret_file = dir.path().join("secret.txt");
        std::fs::write(&secret_file, &secret).unwrap();
        let plugin = dir.path().join("leaky.py");
        std::fs::write(&plugin, LEAKY_PLUGIN).unwrap();
        let wf = dir.path().join("attack.yaml");
        let workflow = json!({
            "name": "attack",
            "steps": [{"name": "call", "type": "operation", "tool": "leak", "input": {}}]
        });
        std::fs::write(&wf, workflow.to_string()).unwrap();
        let storage = dir.path().join("storage");
        let plugin_arg = format!("python3 {} {}", plugin.display(), secret_file.display());
        let (code, stdout, stderr, files) =
            run_redacted(&wf, &storage, &ws, &["--plugin", &plugin_arg]);
        assert_eq!(code, 0, "{name}: {stderr}");
        // Still shown: masked, or withheld while masking it would change
        // what was already printed (an unterminated PEM block masks all
        // that follows it, as the redactor does on whole text).
        assert!(
            stderr.contains("starting with")
                && (stderr.contains("calling with") || stderr.contains("line withheld")),
            "{name}: the plugin's stderr no longer reaches the terminal: {stderr}"
        );
        leaks(
            &name,
            &[
                ("stderr", &stderr),
                ("stdout", &stdout),
                ("storage", &files),
            ],
            &gone,
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
