//! Issue #48, `secret: true`: a secret input's value is masked as CI systems mask secrets. A
//! workflow hands the secret to a command's `env:` (which prints it to stdout and to stderr),
//! to an agent step's `env:` (the one data reference an agent's env takes), to a prompt, gets
//! it back in the agent's answer, and ends with a step that fails printing it on stderr. With
//! and without `--redact`, the value appears in no file under the storage, in no export
//! (markdown, json, html) and nowhere in the run's stdout or stderr; `run.started` records it
//! as `***`.
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use std::path::Path;

use common::text;
use serde_json::json;
use typed_support::{Sandbox, bounded};

/// A value no redaction rule recognises: only `secret: true` can mask it.
const SECRET: &str = "plain-Wombat-7319-quartz";

fn claude_stream(said: &str) -> String {
    let lines = [
        json!({"type":"system","subtype":"init","session_id":"s","model":"claude-x","tools":["Bash"],"uuid":"u-0"}),
        json!({"type":"assistant","message":{"id":"msg_1","model":"claude-x","role":"assistant","content":[
            {"type":"thinking","thinking": format!("the token is {said}"),"signature":"c2ln"},
            {"type":"tool_use","id":"toolu_1","name":"Bash","input": {"command": format!("echo {said}")}}]},"session_id":"s","uuid":"u-1"}),
        json!({"type":"user","message":{"role":"user","content":[
            {"tool_use_id":"toolu_1","type":"tool_result","content": said,"is_error":false}]},"session_id":"s","uuid":"u-2"}),
        json!({"type":"assistant","message":{"id":"msg_2","model":"claude-x","role":"assistant","content":[
            {"type":"text","text": format!("Done with {said}.")}]},"session_id":"s","uuid":"u-3"}),
        json!({"type":"result","subtype":"success","is_error":false,"num_turns":2,"result": format!("Done with {said}."),"session_id":"s","uuid":"u-4"}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn workflow(fixture: &Path) -> String {
    format!(
        r#"name: secrets
inputs:
  - name: token
    secret: true
steps:
  - name: show
    type: command
    command: 'printf "%s\n" "$TOKEN"; printf "warn %s\n" "$TOKEN" >&2'
    env: {{ TOKEN: "{{{{inputs.token}}}}" }}
  - name: show_argv
    type: command
    command: ["sh", "-c", "printf 'argv-less %s\n' \"$TOKEN\""]
    env: {{ TOKEN: "{{{{inputs.token}}}}" }}
  - name: ask
    type: agent
    provider: claude
    prompt: "Use the token {{{{inputs.token}}}} to log in."
    command: ["cat", "{fixture}"]
    env: {{ ANTHROPIC_API_KEY: "{{{{inputs.token}}}}" }}
  - name: fail
    type: command
    command: 'echo "rejected $TOKEN" >&2; exit 4'
    env: {{ TOKEN: "{{{{inputs.token}}}}" }}
"#,
        fixture = fixture.display()
    )
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_secret_input_reaches_no_record_export_or_stderr_with_or_without_redact() {
    let mut failures = Vec::new();
    for redact in [false, true] {
        let sb = Sandbox::new();
        let fixture = sb.dir().join("agent.jsonl");
        std::fs::write(&fixture, claude_stream(SECRET)).unwrap();
        sb.write_workflow(&workflow(&fixture), None);
        let extra: &[&str] = if redact { &["--redact"] } else { &[] };
        let out = sb.run(&[("token", SECRET)], extra).expect("the run hung");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "the last step fails: {stderr}");
        let label = if redact { "--redact" } else { "no --redact" };
        assert!(
            stderr.contains("rejected"),
            "{label}: the failing step is reported: {stderr}"
        );
        if stderr.contains(SECRET) || text(&out.stdout).contains(SECRET) {
            failures.push(format!("{label}: the run's output: {stderr}"));
        }
        let events = sb.events();
        assert!(!events.is_empty(), "{label}: the run is recorded");
        let started = events.iter().find(|e| e["type"] == "run.started").unwrap();
        let started = started.to_string();
        // `--redact` may mask the mask itself; never the value.
        if !(started.contains("\"***\"") || redact && started.contains("\"token\":\"…(")) {
            failures.push(format!(
                "{label}: run.started does not record the input as \"***\": {started}"
            ));
        }
        for file in files(&sb.st()) {
            let bytes = std::fs::read(&file).unwrap();
            if String::from_utf8_lossy(&bytes).contains(SECRET) {
                failures.push(format!("{label}: {} holds the secret", file.display()));
            }
        }
        let run_id = Sandbox::run_id(&out);
        for format in ["markdown", "json", "html"] {
            let mut cmd = common::bin();
            cmd.args(["export", &run_id, "--format", format, "--storage"])
                .arg(sb.st());
            let export = bounded(&mut cmd).expect("export hung");
            assert!(
                export.status.success(),
                "{label} {format}: {}",
                text(&export.stderr)
            );
            if text(&export.stdout).contains(SECRET) || text(&export.stderr).contains(SECRET) {
                failures.push(format!("{label}: the {format} export holds the secret"));
            }
        }
        // The secret did reach the programs: the command saw it (its stdout is masked, but the
        // length of what it printed is the secret's).
        let show = sb.stdout_of("show").unwrap_or_default();
        if show.trim().is_empty() {
            failures.push(format!(
                "{label}: the step printed nothing: the secret never reached it"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Secrets whose bytes change when written as JSON or HTML (quotes, backslashes, `<&>`, a
/// non-ASCII letter), so a mask matching only the raw bytes would miss them in the records.
const AWKWARD: &[&str] = &[
    "pa\"ss\\word-Quokka-5521",
    "<b>&amp;-Lemur-8830</b>",
    "zürich-Ocelot-4417-ü",
];

/// The forms of `secret` a file or an export could hold it in: raw, JSON-escaped (with and
/// without `\u` escapes for non-ASCII), HTML-escaped.
fn forms(secret: &str) -> Vec<String> {
    let json = serde_json::to_string(secret).unwrap();
    let json = json[1..json.len() - 1].to_owned();
    let ascii: String = json
        .chars()
        .map(|c| {
            if c.is_ascii() {
                c.to_string()
            } else {
                format!("\\u{:04x}", c as u32)
            }
        })
        .collect();
    let html = secret
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    let mut all = vec![secret.to_owned(), json, ascii, html];
    all.dedup();
    all
}

/// A parent whose secret goes through a child that does not declare it secret, a typed secret
/// standing in argv, a secret on stdin.
fn spread_workflow(pattern: &str) -> (String, String) {
    let parent = format!(
        r#"name: spread
inputs:
  - name: token
    secret: true
  - name: id
    type: string
    pattern: '{pattern}'
    secret: true
steps:
  - name: argv
    type: command
    command: ["printf", "id=%s\n", "{{{{inputs.id}}}}"]
  - name: stdin
    type: command
    command: ["cat"]
    stdin: "{{{{inputs.token}}}}"
  - name: call
    type: call_workflow
    workflow: child.yaml
    inputs: {{ x: "{{{{inputs.token}}}}" }}
"#
    );
    let child = r#"name: child
inputs:
  - name: x
steps:
  - name: leak
    type: command
    command: 'printf "%s\n" "$X"; printf "%s\n" "$X" >&2; exit 5'
    env: { X: "{{inputs.x}}" }
"#
    .to_owned();
    (parent, child)
}

#[test]
fn a_secret_in_any_encoding_through_a_child_argv_or_stdin_reaches_no_record() {
    let mut failures = Vec::new();
    for secret in AWKWARD {
        for redact in [false, true] {
            let sb = Sandbox::new();
            let (parent, child) = spread_workflow(&regex_escape(secret));
            sb.write_workflow(&parent, Some(&child));
            let extra: &[&str] = if redact { &["--redact"] } else { &[] };
            let out = sb
                .run(&[("token", secret), ("id", secret)], extra)
                .expect("the run hung");
            let label = format!("{secret:?} {}", if redact { "--redact" } else { "" });
            let stderr = text(&out.stderr);
            if out.status.code() != Some(1) {
                failures.push(format!(
                    "{label}: exit {:?}, want 1 (the child fails): {stderr}",
                    out.status.code()
                ));
                continue;
            }
            let mut places: Vec<(String, String)> = vec![
                ("the run's stderr".into(), stderr.clone()),
                ("the run's stdout".into(), text(&out.stdout)),
            ];
            for file in files(&sb.st()) {
                let body = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
                places.push((file.display().to_string(), body));
            }
            let run_id = Sandbox::run_id(&out);
            for format in ["markdown", "json", "html"] {
                let mut cmd = common::bin();
                cmd.args(["export", &run_id, "--format", format, "--storage"])
                    .arg(sb.st());
                let export = bounded(&mut cmd).expect("export hung");
                places.push((format!("the {format} export"), text(&export.stdout)));
            }
            for (place, body) in &places {
                for form in forms(secret) {
                    if body.contains(&form) {
                        failures.push(format!("{label}: {place} holds {form:?}"));
                    }
                }
            }
            // The value did reach the programs (masked where recorded).
            if sb.stdout_of("argv").is_none_or(|s| s.trim() == "id=") {
                failures.push(format!("{label}: the argv step printed no id"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `text` with every regex metacharacter escaped, so the pattern admits exactly `text`.
fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if "\\.+*?()|[]{}^$#&-~".contains(c) {
                format!("\\{c}")
            } else if c == '\'' {
                "''".to_owned()
            } else {
                c.to_string()
            }
        })
        .collect()
}
