//! The attacker's test of `--redact` (issue 28 item 4), through the binary:
//! for every form of the redaction corpus (`fixtures/redaction/corpus.json`),
//! a workflow whose command prints the secret, whose agent (a replayed Claude
//! stream) says it, uses it as a tool input and as a JSON object key, and
//! whose last step fails with it on stderr. With `run --redact`, no secret
//! fragment may reach the transcript, the audit trail or stderr (live
//! progress and the final line); an unmasked run exported with `--redact` in
//! every format must hold none either and report the masks it applied.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, repo, text};
use serde_json::{Value, json};

fn corpus() -> Value {
    let path = repo().join("fixtures/redaction/corpus.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A Claude Code stream-json reply that says `secret`, calls a tool with it
/// (as a value and as an object key, plus the case's structured form) and
/// gets it back as the tool's result.
fn claude_stream(secret: &str, structured: Option<&Value>) -> String {
    let mut input = json!({ "note": secret });
    input[secret] = json!("as a key");
    if let Some(s) = structured {
        input["structured"] = s.clone();
    }
    let lines = [
        json!({"type":"system","subtype":"init","session_id":"atk","model":"claude-atk","tools":["Bash"],"uuid":"a-0"}),
        json!({"type":"assistant","message":{"id":"msg_1","model":"claude-atk","role":"assistant","content":[
            {"type":"thinking","thinking": format!("I found {secret}"),"signature":"c2ln"},
            {"type":"tool_use","id":"toolu_1","name":"Bash","input": input}]},"session_id":"atk","uuid":"a-1"}),
        json!({"type":"user","message":{"role":"user","content":[
            {"tool_use_id":"toolu_1","type":"tool_result","content": secret,"is_error":false}]},"session_id":"atk","uuid":"a-2"}),
        json!({"type":"assistant","message":{"id":"msg_2","model":"claude-atk","role":"assistant","content":[
            {"type":"text","text": format!("Here it is: {secret}")}]},"session_id":"atk","uuid":"a-3"}),
        json!({"type":"result","subtype":"success","is_error":false,"num_turns":2,"result": secret,"session_id":"atk","uuid":"a-4"}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Writes the case's workspace and workflow; returns the workflow path.
fn setup(dir: &Path, secret: &str, structured: Option<&Value>) -> std::path::PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("leak.txt"), secret).unwrap();
    let agent = dir.join("agent.jsonl");
    std::fs::write(&agent, claude_stream(secret, structured)).unwrap();
    // The step error holds only the last line of stderr: a fragment of a
    // multi-line secret alone (a folded key's last line) is not a secret
    // any rule can recognise, so multi-line forms fail without printing.
    let fail = if secret.contains(['\n', '\r']) {
        "echo giving up >&2; exit 3"
    } else {
        "cat leak.txt >&2; exit 3"
    };
    let wf = dir.join("attack.yaml");
    let workflow = json!({
        "name": "attack",
        "steps": [
            {"name": "print", "type": "command", "command": "cat leak.txt"},
            {"name": "agent", "type": "agent", "provider": "claude",
             "command": ["cat", agent.to_str().unwrap()], "prompt": "Summarize the output."},
            {"name": "fail", "type": "command", "command": fail},
        ]
    });
    // JSON is YAML.
    std::fs::write(&wf, workflow.to_string()).unwrap();
    wf
}

fn run(wf: &Path, storage: &Path, ws: &Path, redact: bool) -> (String, String) {
    common::run_workflow(wf, storage, ws, redact, 1)
}

fn run_id(stdout: &str) -> String {
    common::printed_run_id(stdout)
}

fn leaks(name: &str, place: &str, body: &str, gone: &[String], failures: &mut Vec<String>) {
    for g in gone {
        if body.contains(g.as_str()) {
            failures.push(format!("{name}: {g:?} reached {place}"));
        }
    }
}

#[test]
fn no_form_of_the_corpus_reaches_disk_stderr_or_an_export() {
    let mut failures = Vec::new();
    let corpus = corpus();
    for case in corpus["leak"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let secret = case["text"].as_str().unwrap();
        let gone: Vec<String> = case["gone"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap().to_owned())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let wf = setup(dir.path(), secret, case.get("json"));
        let ws = dir.path().join("ws");

        // Masked while recording.
        let storage = dir.path().join("masked");
        let (stdout, stderr) = run(&wf, &storage, &ws, true);
        leaks(name, "run stderr", &stderr, &gone, &mut failures);
        leaks(name, "run stdout", &stdout, &gone, &mut failures);
        let mut files = 0;
        for entry in std::fs::read_dir(&storage).unwrap() {
            let path = entry.unwrap().path();
            let body = std::fs::read_to_string(&path).unwrap();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            leaks(name, &file, &body, &gone, &mut failures);
            // The JSON-decoded strings too: an escape must not hide a leak.
            for line in body.lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                leaks(name, &file, &all_strings(&v), &gone, &mut failures);
            }
            files += 1;
        }
        assert_eq!(files, 2, "{name}: the transcript and audit.jsonl");

        // Recorded verbatim, masked on export.
        let plain = dir.path().join("plain");
        let (stdout, _) = run(&wf, &plain, &ws, false);
        let id = run_id(&stdout);
        let transcript = std::fs::read_to_string(plain.join(format!("{id}.jsonl"))).unwrap();
        let recorded: String = transcript
            .lines()
            .map(|l| all_strings(&serde_json::from_str(l).unwrap()))
            .collect();
        assert!(
            gone.iter().all(|g| recorded.contains(g.as_str())),
            "{name}: the unmasked run records the secret (the test's premise)"
        );
        for format in ["markdown", "json", "html", "otlp-json"] {
            let out = bin()
                .args([
                    "export",
                    &id,
                    "--format",
                    format,
                    "--redact",
                    "--capture-content",
                    "--storage",
                ])
                .arg(&plain)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{name} {format}: {}",
                text(&out.stderr)
            );
            let exported = text(&out.stdout);
            leaks(
                name,
                &format!("export {format}"),
                &exported,
                &gone,
                &mut failures,
            );
            if format == "json" || format == "otlp-json" {
                let v: Value = serde_json::from_str(&exported).unwrap();
                leaks(
                    name,
                    &format!("export {format} (decoded)"),
                    &all_strings(&v),
                    &gone,
                    &mut failures,
                );
            }
            let report = text(&out.stderr);
            let masks: u64 = report
                .lines()
                .find_map(|l| {
                    l.strip_prefix("transcript: ")?
                        .strip_suffix(" masks applied")
                })
                .unwrap_or_else(|| panic!("{name} {format}: no mask report in {report}"))
                .parse()
                .unwrap();
            if masks == 0 {
                failures.push(format!("{name}: export {format} reported 0 masks applied"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every string of a value (keys included), one per line.
fn all_strings(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                out.push_str(k);
                out.push('\n');
                walk(x, out);
            }),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(v, &mut out);
    out
}
