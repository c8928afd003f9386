//! `transcript check` with `judge:` expectations through the binary (#50 item 3), against the
//! scripted model server on 127.0.0.1: the endpoint and key configured as the HTTP agent's
//! (`OPENAI_BASE_URL` / `OPENAI_API_KEY`, or the file's `base_url` and the variable its
//! `api_key_env` names), a pass and a fail with the model's reasons on stdout and in JUnit,
//! the key sent as a bearer token and found nowhere in what the command printed or wrote,
//! even when the server quotes it back in an error, which is exit 4 naming the judge.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

use common::html_page::{RUN, write_run};
use common::{bin, text};
use serde_json::json;
use transcript_testkit::model_server::{ModelServer, Script, Turn};

const KEY: &str = "sk-judge-test-5f0c2a9e71d4b8c3";

/// A run whose agent step ran `cargo test` and answered.
fn write_agent_run(storage: &Path) {
    let tool = json!({"command": "cargo test"});
    write_run(
        storage,
        &[
            (
                "run.started",
                "",
                0,
                json!({"name": "ci", "kind": "workflow"}),
            ),
            (
                "step.started",
                "review",
                1,
                json!({"name": "review", "kind": "agent"}),
            ),
            (
                "message.user",
                "review",
                2,
                json!({"role": "user", "blocks": [
                {"type": "text", "fidelity": "router", "text": "Run the tests, then commit."}]}),
            ),
            (
                "message.assistant",
                "review",
                3,
                json!({"role": "assistant", "model": "m", "blocks": [
                {"type": "tool_use", "fidelity": "agent_emitted", "tool_name": "Bash", "tool_id": "c1", "tool_input": tool}]}),
            ),
            (
                "tool.call",
                "review",
                4,
                json!({"name": "Bash", "call_id": "c1", "input": tool, "output": null, "fidelity": "router"}),
            ),
            (
                "tool.result",
                "review",
                5,
                json!({"name": "Bash", "call_id": "c1", "input": null, "output": "test result: ok. 12 passed", "fidelity": "router"}),
            ),
            (
                "message.assistant",
                "review",
                6,
                json!({"role": "assistant", "model": "m", "blocks": [
                {"type": "text", "fidelity": "agent_emitted", "text": "All 12 tests pass."}]}),
            ),
            (
                "step.completed",
                "review",
                7,
                json!({"name": "review", "kind": "agent", "result": "All 12 tests pass."}),
            ),
            (
                "run.completed",
                "",
                8,
                json!({"name": "ci", "kind": "workflow"}),
            ),
        ],
    );
}

fn check(storage: &Path, expect: &Path, junit: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = bin();
    c.env_remove("OPENAI_BASE_URL").env_remove("OPENAI_API_KEY");
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(["--color", "never", "check", RUN, "--expect"])
        .arg(expect)
        .arg("--junit")
        .arg(junit)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap()
}

fn assert_no_key(out: &Output, junit: &Path) {
    for (what, shown) in [
        ("stdout", text(&out.stdout)),
        ("stderr", text(&out.stderr)),
        ("junit", std::fs::read_to_string(junit).unwrap_or_default()),
    ] {
        assert!(!shown.contains(KEY), "the key in {what}:\n{shown}");
        assert!(
            !shown.contains(&KEY[3..]),
            "part of the key in {what}:\n{shown}"
        );
    }
}

#[test]
fn check_grades_judges_through_the_scripted_server_and_never_shows_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("s");
    write_agent_run(&storage);
    let server = ModelServer::start(Script::new([
        Turn::text(r#"{"verdict": "pass", "reason": "cargo test ran and 12 passed"}"#),
        Turn::text(r#"{"verdict": "fail", "reason": "no commit was made"}"#),
    ]))
    .unwrap();
    let expect = tmp.path().join("expect.yaml");
    std::fs::write(
        &expect,
        "judge: {model: judge-model, max_retries: 0}\nrun:\n  status: succeeded\n  judge: {rubric: \"The tests ran.\"}\nsteps:\n  review:\n    judge: {rubric: \"It committed after the tests.\"}\n",
    )
    .unwrap();
    let junit = tmp.path().join("junit.xml");
    // Configured as the HTTP agent is: OPENAI_BASE_URL and OPENAI_API_KEY.
    let out = check(
        &storage,
        &expect,
        &junit,
        &[
            ("OPENAI_BASE_URL", &server.openai_base_url()),
            ("OPENAI_API_KEY", KEY),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("ok   run: judge: \"The tests ran.\" (")
            && shown
                .contains("judge judge-model: pass: cargo test ran and 12 passed (graded whole)"),
        "{shown}"
    );
    assert!(
        shown.contains("FAIL review: judge: \"It committed after the tests.\" (")
            && shown.contains("judge judge-model: fail: no commit was made (graded whole)"),
        "{shown}"
    );
    assert!(
        shown.contains("2 of 3 expectations hold, 1 failed"),
        "{shown}"
    );
    let requests = server.generation_requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert_eq!(r.body.as_ref().unwrap()["model"], "judge-model");
    }
    let user = requests[1].body.as_ref().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.contains("test result: ok. 12 passed"), "{user}");
    // JUnit: one case per expectation, the judges' with their reasons.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    assert!(xml.contains("<system-out>judge judge-model: pass: cargo test ran and 12 passed"));
    assert!(xml.contains("<failure message=\"judge judge-model: fail: no commit was made"));
    assert_no_key(&out, &junit);
}

/// A model endpoint that answers its one request 401 quoting the bearer token it got, as a
/// careless gateway would; returns its base URL.
fn echoing_server() -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0, "closed before its headers");
            raw.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&raw).into_owned();
        let auth = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("authorization: ")
                    .or_else(|| l.strip_prefix("Authorization: "))
            })
            .unwrap_or("none")
            .to_owned();
        let body = json!({"error": {"message": format!("Incorrect API key provided: {auth}"),
            "type": "invalid_request_error"}})
        .to_string();
        let reply = format!(
            "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(reply.as_bytes()).unwrap();
        auth
    });
    (url, handle)
}

#[test]
fn a_server_quoting_the_key_back_is_exit_4_naming_the_judge_with_the_key_masked() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("s");
    write_agent_run(&storage);
    let (url, server) = echoing_server();
    let expect = tmp.path().join("expect.yaml");
    // The file's base_url and the variable its api_key_env names.
    std::fs::write(
        &expect,
        format!(
            "judge:\n  model: judge-model\n  base_url: {url}\n  api_key_env: MY_JUDGE_KEY\n  max_retries: 0\nsteps:\n  review:\n    status: succeeded\n    judge: {{rubric: x}}\n"
        ),
    )
    .unwrap();
    let junit = tmp.path().join("junit.xml");
    let out = check(
        &storage,
        &expect,
        &junit,
        &[("MY_JUDGE_KEY", KEY), ("OPENAI_API_KEY", "other")],
    );
    assert_eq!(server.join().unwrap(), format!("Bearer {KEY}"));
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stdout));
    let shown = text(&out.stdout);
    assert!(shown.contains("\nERR  review: judge: \"x\" ("), "{shown}");
    assert!(
        shown.contains(&format!(
            "expect.yaml:9): judge judge-model: POST {url}/chat/completions: HTTP 401: Incorrect API key provided: Bearer ***"
        )),
        "{shown}"
    );
    assert!(shown.contains("1 not graded (error)"), "{shown}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<error message=\"judge judge-model: POST"),
        "{xml}"
    );
    assert!(xml.contains("errors=\"1\""), "{xml}");
    assert_no_key(&out, &junit);
}
