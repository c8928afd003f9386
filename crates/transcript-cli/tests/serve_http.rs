//! `transcript serve` over plain HTTP (#60): the first line says where it serves; a
//! non-loopback address gets a generated token (printed) and every request without it is
//! 401; a token that cannot travel in a header is a usage error; SIGINT ends it with exit 0
//! even while a live stream is open; JSON and the CSP through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_support;

use std::io::{Read, Write};
use std::time::Duration;

use serve_support::{Serve, get, simple_run};

const RUN: &str = "0000abcd-0000-4000-8000-000000000071";

#[test]
fn a_public_address_gets_a_generated_token_and_every_request_without_it_is_401() {
    let tmp = tempfile::tempdir().unwrap();
    simple_run(tmp.path(), RUN, "ok", "out");
    let serve = Serve::start(tmp.path(), &["--addr", "0.0.0.0:0"], 2);
    assert!(
        serve.origin.starts_with("http://0.0.0.0:"),
        "{}",
        serve.origin
    );
    let open = &serve.more[0];
    assert!(open.ends_with("(generated token)"), "{open}");
    let token = open
        .split("?token=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 32);
    let addr = serve.addr();
    for path in [
        "/",
        "/api/runs",
        &format!("/runs/{RUN}"),
        "/search?q=ok",
        "/nothing",
    ] {
        let r = get(&addr, path, &[]);
        assert_eq!(r.status, 401, "{path}");
        assert!(!r.body.contains(RUN), "{path}");
        assert!(
            r.head
                .contains("content-security-policy: default-src 'none'"),
            "{path}"
        );
    }
    let bearer = format!("Authorization: Bearer {token}");
    assert_eq!(get(&addr, "/api/runs", &[&bearer]).status, 200);
    let r = get(&addr, &format!("/?token={token}"), &[]);
    assert_eq!(r.status, 200);
    assert!(
        r.head.contains("set-cookie: transcript_token="),
        "{}",
        r.head
    );
    let mut wrong = token.clone();
    wrong.replace_range(..1, if token.starts_with('a') { "b" } else { "a" });
    assert_eq!(
        get(&addr, "/", &[&format!("Authorization: Bearer {wrong}")]).status,
        401
    );
}

#[test]
fn a_bad_token_or_address_is_a_usage_error_and_loopback_needs_none() {
    let tmp = tempfile::tempdir().unwrap();
    let out = common::bin()
        .args(["serve", "--addr", "0.0.0.0:0", "--token", "short"])
        .arg("--storage")
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", common::describe(&out));
    assert!(common::text(&out.stderr).contains("16 to 256"));
    let out = common::bin()
        .args(["serve", "--addr", "not-an-address"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Loopback: no token line, and no token asked for.
    simple_run(tmp.path(), RUN, "ok", "out");
    let serve = Serve::start(tmp.path(), &["--addr", "127.0.0.1:0"], 1);
    let r = get(&serve.addr(), "/api/runs", &[]);
    assert_eq!(r.status, 200);
    let list: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(list["runs"][0]["run_id"], RUN);
    assert_eq!(list["runs"][0]["status"], "succeeded");
}

#[test]
fn sigint_ends_it_cleanly_while_a_live_stream_is_open() {
    let tmp = tempfile::tempdir().unwrap();
    simple_run(tmp.path(), RUN, "ok", "out");
    let mut serve = Serve::start(tmp.path(), &["--addr", "127.0.0.1:0"], 1);
    // The list's live stream stays open until the server ends it.
    let mut stream = std::net::TcpStream::connect(serve.addr()).unwrap();
    stream
        .write_all(b"GET /api/runs/live HTTP/1.0\r\n\r\n")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.0 200");
    assert_eq!(serve.interrupt(Duration::from_secs(20)), Some(0));
    // The stream ended with it.
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
}
