//! The attacker's test of `--redact` for issue #39 item 8 ("redaction walks
//! every string"), through the binary. Each shape hides an Anthropic key
//! whose tail is unique to the shape, so a leak names its shape:
//!
//! * split by ANSI colour codes as `grep --color` prints it
//!   (`sk-ant-\e[01;31m\e[Kapi03…\e[m\e[K…`), in a command's output and in
//!   the agent's reply;
//! * fully URL-encoded (`%73%6B%2D…`), in a command's output and in the
//!   agent's reply;
//! * split across two text blocks of one assistant message;
//! * in the fields the model controls: the message's `model`, a tool's
//!   `name` and its `id` (the tool result's `tool_use_id`).
//!
//! `run --redact` must leave no fragment in the bytes on disk (the
//! transcript and `audit.jsonl`, read raw and JSON-decoded), in the live
//! stderr or stdout; `export --redact` of the same run recorded verbatim must
//! hold none either (nor its "no price for model …" warning) and report the
//! masks it applied; `import --redact` of the agent's stream the same.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, text};
use serde_json::{Value, json};

/// The key's published prefix, kept visible by a mask.
const KIND: &str = "sk-ant-";

/// A key whose tail (after `api03-`) is `tail`.
fn key(tail: &str) -> String {
    format!("{KIND}api03-{tail}")
}

/// Every byte of `s` as `%XX`.
fn url_encoded(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// `s` split by colour codes the way `grep --color=always` highlights a
/// match: the match starts after the kind, and the colour ends inside it.
fn ansi_split(tail: &str) -> String {
    let (a, b) = tail.split_at(tail.len() / 2);
    format!("{KIND}\x1b[01;31m\x1b[Kapi03-{a}\x1b[m\x1b[K{b}")
}

/// Every fragment that must not survive: each tail, its halves, and the
/// URL-encoded forms of both.
fn fragments() -> Vec<String> {
    let tails = [
        "AnsiCmdTailANSICMDX9Q7",
        "AnsiAgentTailANSIAGENTX9Q7",
        "UrlCmdTailURLCMDX9Q7",
        "UrlAgentTailURLAGENTX9Q7",
        "SplitBlocksTailSPLITBLOCKSX9Q7",
        "ModelFieldTailMODELFIELDX9Q7",
        "ToolNameTailTOOLNAMEX9Q7",
        "ToolIdTailTOOLIDX9Q7",
    ];
    let mut out = Vec::new();
    for t in tails {
        let (a, b) = t.split_at(t.len() / 2);
        for part in [t, a, b] {
            out.push(part.to_owned());
            out.push(url_encoded(part));
        }
    }
    out
}

/// A Claude Code stream-json reply carrying the agent's shapes.
fn claude_stream() -> String {
    let model = format!("claude-{}", key("ModelFieldTailMODELFIELDX9Q7"));
    let tool = format!("Bash_{}", key("ToolNameTailTOOLNAMEX9Q7"));
    let id = format!("toolu_{}", key("ToolIdTailTOOLIDX9Q7"));
    let split = key("SplitBlocksTailSPLITBLOCKSX9Q7");
    // Neither half alone is a key: the first ends 3 characters into the
    // tail, the second holds no prefix.
    let (head, rest) = split.split_at(KIND.len() + "api03-".len() + 3);
    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    let lines = [
        json!({"type":"system","subtype":"init","session_id":"walk","model":model,"tools":[tool],"uuid":"w-0"}),
        json!({"type":"assistant","message":{"id":"msg_1","model":model,"role":"assistant","usage":usage,"content":[
            {"type":"text","text": format!("colour: {}", ansi_split("AnsiAgentTailANSIAGENTX9Q7"))},
            {"type":"tool_use","id":id,"name":tool,"input":{"command":"ls"}}]},"session_id":"walk","uuid":"w-1"}),
        json!({"type":"user","message":{"role":"user","content":[
            {"tool_use_id":id,"type":"tool_result","content":"ok","is_error":false}]},"session_id":"walk","uuid":"w-2"}),
        json!({"type":"assistant","message":{"id":"msg_2","model":model,"role":"assistant","usage":usage,"content":[
            {"type":"text","text": format!("url: {}", url_encoded(&key("UrlAgentTailURLAGENTX9Q7")))},
            {"type":"text","text": format!("split: {head}")},
            {"type":"text","text": rest}]},"session_id":"walk","uuid":"w-3"}),
        json!({"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"done","session_id":"walk","uuid":"w-4"}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Writes the workspace, the agent's stream and the workflow; returns the
/// workflow's path.
fn setup(dir: &Path) -> std::path::PathBuf {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("colour.txt"), ansi_split("AnsiCmdTailANSICMDX9Q7")).unwrap();
    std::fs::write(
        ws.join("url.txt"),
        url_encoded(&key("UrlCmdTailURLCMDX9Q7")),
    )
    .unwrap();
    let agent = dir.join("agent.jsonl");
    std::fs::write(&agent, claude_stream()).unwrap();
    let wf = dir.join("walk.yaml");
    let workflow = json!({
        "name": "walk",
        "steps": [
            {"name": "colour", "type": "command", "command": "cat colour.txt"},
            {"name": "url", "type": "command", "command": "cat url.txt"},
            {"name": "agent", "type": "agent", "provider": "claude",
             "command": ["cat", agent.to_str().unwrap()], "prompt": "Go."},
        ]
    });
    std::fs::write(&wf, workflow.to_string()).unwrap();
    wf
}

fn run(wf: &Path, storage: &Path, ws: &Path, redact: bool) -> (String, String) {
    common::run_workflow(wf, storage, ws, redact, 0)
}

fn run_id(stdout: &str) -> String {
    common::printed_run_id(stdout)
}

/// Every fragment found in `body`, named with `place`.
fn leaks(place: &str, body: &str, failures: &mut Vec<String>) {
    for g in fragments() {
        if body.contains(g.as_str()) {
            failures.push(format!("{g:?} reached {place}"));
        }
    }
}

/// The bytes of every file in `storage`, raw and JSON-decoded (an escape
/// must not hide a fragment), each under its file name.
fn stored(storage: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(storage).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue;
        }
        let body = std::fs::read_to_string(&path).unwrap();
        let mut all = body.clone();
        for line in body.lines() {
            if let Ok(v) = serde_json::from_str::<Value>(line) {
                all.push_str(&all_strings(&v));
            }
        }
        out.push((
            path.file_name().unwrap().to_string_lossy().into_owned(),
            all,
        ));
    }
    out
}

/// The count of `transcript: N masks applied` on `stderr`.
fn masks_applied(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("transcript: ")?
                .strip_suffix(" masks applied")
        })
        .unwrap_or_else(|| panic!("no mask report in {stderr}"))
        .parse()
        .unwrap()
}

#[test]
fn run_redact_masks_every_shape_on_disk_and_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let wf = setup(dir.path());
    let ws = dir.path().join("ws");
    let storage = dir.path().join("masked");
    let (stdout, stderr) = run(&wf, &storage, &ws, true);
    let mut failures = Vec::new();
    leaks("run stderr", &stderr, &mut failures);
    leaks("run stdout", &stdout, &mut failures);
    let files = stored(&storage);
    assert!(
        files.len() >= 2,
        "the transcript and audit.jsonl: {files:?}"
    );
    for (name, body) in &files {
        leaks(name, body, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_unmasked_run_exported_with_redact_holds_no_shape_and_counts_its_masks() {
    let dir = tempfile::tempdir().unwrap();
    let wf = setup(dir.path());
    let ws = dir.path().join("ws");
    let plain = dir.path().join("plain");
    let (stdout, _) = run(&wf, &plain, &ws, false);
    let id = run_id(&stdout);
    let transcript = std::fs::read_to_string(plain.join(format!("{id}.jsonl"))).unwrap();
    // The premise: recorded verbatim, every shape is on disk.
    for tail in [
        "ModelFieldTail",
        "ToolNameTail",
        "ToolIdTail",
        "AnsiCmdTail",
    ] {
        assert!(
            transcript.contains(tail),
            "{tail} not recorded: {transcript}"
        );
    }
    let mut failures = Vec::new();
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
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        let exported = text(&out.stdout);
        let stderr = text(&out.stderr);
        leaks(&format!("export {format}"), &exported, &mut failures);
        // The unpriced model's warning is printed masked.
        leaks(&format!("export {format} stderr"), &stderr, &mut failures);
        if format == "json" || format == "otlp-json" {
            let v: Value = serde_json::from_str(&exported).unwrap();
            leaks(
                &format!("export {format} (decoded)"),
                &all_strings(&v),
                &mut failures,
            );
        }
        if masks_applied(&stderr) == 0 {
            failures.push(format!("export {format} reported 0 masks applied"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn import_redact_masks_every_shape_on_disk_and_in_its_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, claude_stream()).unwrap();
    let storage = dir.path().join("imported");
    let out = bin()
        .args(["import", "claude", "--redact", "--storage"])
        .arg(&storage)
        .arg(&session)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let mut failures = Vec::new();
    leaks("import stderr", &stderr, &mut failures);
    leaks("import stdout", &text(&out.stdout), &mut failures);
    let files = stored(&storage);
    assert!(!files.is_empty(), "nothing imported");
    for (name, body) in &files {
        leaks(name, body, &mut failures);
    }
    if masks_applied(&stderr) == 0 {
        failures.push("import reported 0 masks applied".to_owned());
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
