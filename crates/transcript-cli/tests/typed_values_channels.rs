//! Issue #48, what users rely on keeps working: a ref typed by a pattern in `git log`, a `url`
//! input fetched by curl from a local server, a `for_each` over a literal list, an agent's
//! answer (hostile text) posted through `stdin:` and through `{{ … | file }}` (a 0600 file
//! removed when the run ends), and a clear migration message for a workflow written before
//! the types.
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use std::io::{Read, Write};

use common::text;
use serde_json::json;
use typed_support::Sandbox;

/// An agent's answer an attacker would like to see run: shell, an option, a backtick.
const ANSWER: &str = "Summary: $(touch @M@) `touch @M@`\n--output=@M@\n-rf; done";

/// A Claude Code stream-json reply whose final text is `answer`.
fn claude_stream(answer: &str) -> String {
    let lines = [
        json!({"type":"system","subtype":"init","session_id":"s","model":"claude-x","tools":[],"uuid":"u-0"}),
        json!({"type":"assistant","message":{"id":"msg_1","model":"claude-x","role":"assistant","content":[
            {"type":"text","text": answer}]},"session_id":"s","uuid":"u-1"}),
        json!({"type":"result","subtype":"success","is_error":false,"num_turns":1,"result": answer,"session_id":"s","uuid":"u-2"}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The agent step `summary` replaying [`ANSWER`] (YAML at an indentation of 2).
fn summary_step(sb: &Sandbox) -> String {
    let fixture = sb.dir().join("agent.jsonl");
    std::fs::write(&fixture, claude_stream(&sb.fill(ANSWER))).unwrap();
    format!(
        "  - name: summary\n    type: agent\n    provider: claude\n    prompt: Summarize.\n    command: [\"cat\", \"{}\"]\n",
        fixture.display()
    )
}

#[test]
fn git_log_of_a_ref_typed_by_a_pattern_runs() {
    let sb = Sandbox::new();
    sb.git_repo();
    let wf = "name: log\ninputs:\n  - name: ref\n    type: string\n    pattern: '[A-Za-z0-9._/~^-]+'\nsteps:\n  - name: s\n    type: command\n    command: [\"git\", \"log\", \"-1\", \"--format=%s\", \"{{inputs.ref}}\"]\n";
    sb.write_workflow(wf, None);
    for (reference, subject) in [("HEAD", "two"), ("HEAD~1", "one")] {
        let out = sb.run(&[("ref", reference)], &[]).unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let printed: Vec<String> = sb
            .events()
            .iter()
            .filter(|e| e["type"] == "step.completed" && e["payload"]["name"] == "s")
            .filter_map(|e| e["payload"]["result"]["stdout"].as_str().map(str::to_owned))
            .collect();
        assert!(
            printed.iter().any(|p| p.trim() == subject),
            "{reference}: {printed:?}"
        );
    }
}

/// A one-request HTTP server on a free loopback port answering `body`; its URL and the
/// thread (joined to see the request it got).
fn serve_once(body: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/page?x=1",
        listener.local_addr().unwrap().port()
    );
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    (url, handle)
}

#[test]
fn curl_of_a_url_input_fetches_it() {
    let (url, server) = serve_once("hello from the server");
    let sb = Sandbox::new();
    // The step reaches the server because the workflow declares it (#57); the URL is data.
    let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let wf = format!(
        "name: fetch\ninputs:\n  - name: url\n    type: url\nsteps:\n  - name: s\n    type: command\n    command: [\"curl\", \"-fsS\", \"{{{{inputs.url}}}}\"]\n    network: [\"127.0.0.1:{port}\"]\n"
    );
    sb.write_workflow(&wf, None);
    let out = sb.run(&[("url", &url)], &[]).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(sb.stdout_of("s").as_deref(), Some("hello from the server"));
    assert!(server.join().unwrap().starts_with("GET /page?x=1 HTTP/1.1"));
}

#[test]
fn a_for_each_over_a_literal_list_passes_its_items_as_argv() {
    let sb = Sandbox::new();
    let wf = "name: each\nsteps:\n  - name: each\n    type: for_each\n    items: [alpha, \"two words\", \"a;b $(x)\"]\n    steps:\n      - name: s\n        type: command\n        command: [\"printf\", \"[%s]\", \"{{loop.item}}\", \"{{loop.index}}\"]\n";
    sb.write_workflow(wf, None);
    let out = sb.run(&[], &[]).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed: Vec<String> = sb
        .events()
        .iter()
        .filter(|e| e["type"] == "step.completed")
        .filter_map(|e| e["payload"]["result"]["stdout"].as_str().map(str::to_owned))
        .collect();
    for want in ["[alpha][0]", "[two words][1]", "[a;b $(x)][2]"] {
        assert!(printed.iter().any(|p| p == want), "{want}: {printed:?}");
    }
}

#[test]
fn an_agents_answer_reaches_a_program_through_stdin_byte_for_byte() {
    let sb = Sandbox::new();
    let answer = sb.fill(ANSWER);
    let wf = format!(
        "name: post\nsteps:\n{}  - name: count\n    type: command\n    command: [\"wc\", \"-c\"]\n    stdin: \"{{{{steps.summary.output}}}}\"\n  - name: save\n    type: command\n    command: [\"sh\", \"-c\", \"cat > out.txt\"]\n    stdin: \"{{{{steps.summary.output}}}}\"\n  - name: tool\n    type: operation\n    tool: run_command\n    input:\n      command: [\"sh\", \"-c\", \"cat > tool.txt\"]\n      stdin: \"{{{{steps.summary.output}}}}\"\n",
        summary_step(&sb)
    );
    sb.write_workflow(&wf, None);
    let out = sb.run(&[], &[]).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!sb.marker().exists());
    let output = sb.stdout_of("summary").unwrap();
    assert!(output.contains("$(touch"), "{output}");
    assert_eq!(
        sb.stdout_of("count").unwrap().trim(),
        output.len().to_string(),
        "wc -c counts the agent's output"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("out.txt")).unwrap(),
        output
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("tool.txt")).unwrap(),
        output
    );
    assert!(output.contains(answer.lines().next().unwrap()), "{output}");
}

#[test]
fn an_agents_answer_reaches_a_program_as_a_private_file_removed_when_the_run_ends() {
    let sb = Sandbox::new();
    let wf = format!(
        "name: post\nsteps:\n{}  - name: copy\n    type: command\n    command: [\"cp\", \"{{{{ steps.summary.output | file }}}}\", \"out.txt\"]\n  - name: mode\n    type: command\n    command: [\"stat\", \"-c\", \"%a %U\", \"{{{{ steps.summary.output | file }}}}\"]\n  - name: where\n    type: command\n    command: [\"realpath\", \"{{{{ steps.summary.output | file }}}}\"]\n  - name: body\n    type: command\n    command: [\"@D@/gh\", \"issue\", \"comment\", \"7\", \"--body-file\", \"{{{{ steps.summary.output | file }}}}\"]\n",
        summary_step(&sb)
    );
    // A stand-in for `gh issue comment 7 --body-file FILE`: it keeps the body it was given.
    let gh = sb.dir().join("gh");
    std::fs::write(
        &gh,
        "#!/bin/sh\nwhile [ \"$1\" != --body-file ]; do shift; done\ncat \"$2\" > body.txt\n",
    )
    .unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    sb.write_workflow(&wf, None);
    let out = sb.run(&[], &[]).unwrap();
    assert!(!sb.marker().exists());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let output = sb.stdout_of("summary").unwrap();
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("out.txt")).unwrap(),
        output
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("body.txt")).unwrap(),
        output
    );
    let mode = sb.stdout_of("mode").unwrap();
    assert!(
        mode.starts_with("600 "),
        "the file's mode while the run runs: {mode}"
    );
    let path = sb.stdout_of("where").unwrap();
    let path = std::path::Path::new(path.trim());
    assert!(path.is_absolute(), "{}", path.display());
    assert!(
        !path.starts_with(sb.ws()),
        "the file is in the run's private directory, not the workspace: {}",
        path.display()
    );
    assert!(!path.exists(), "{} outlives the run", path.display());
}

#[test]
fn a_workflow_from_before_the_types_is_refused_with_a_migration_message() {
    let sb = Sandbox::new();
    sb.git_repo();
    let wf = "name: old\ninputs:\n  - name: ref\nsteps:\n  - name: log\n    type: command\n    command: [\"git\", \"log\", \"-1\", \"{{inputs.ref}}\"]\n";
    sb.write_workflow(wf, None);
    let out = sb.run(&[("ref", "HEAD")], &[]).unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    for needle in [
        "free text",
        "inputs.ref",
        "log",
        "type",
        "stdin",
        "file",
        "env",
    ] {
        assert!(
            stderr.contains(needle),
            "the message lacks {needle:?}: {stderr}"
        );
    }
    assert!(
        sb.events().is_empty(),
        "nothing is recorded for a refused workflow"
    );
}
