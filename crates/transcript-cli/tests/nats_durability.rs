//! `--durability` on NATS storage (#44 leftovers item 3). On files `always` and `interval` are
//! the runner's `fdatasync`; on NATS the runner cannot make JetStream sync before its ack, nor
//! learn whether the server does (that is the server's `jetstream { sync_interval }`, default
//! two minutes). So a value the runner cannot honour is refused (exit 2, naming the server
//! setting) before anything is published or any step runs, rather than accepted and ignored;
//! the default (`none`: the ack, as documented) records. Stream settings from the
//! environment that cannot be used fail the same way, before any step runs.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{DEMO_RUN_ID, bin, text};
use transcript_nats::testing;

fn run(url: &str, dir: &Path, durability: Option<&str>) -> std::process::Output {
    let workflow = dir.join("one.yaml");
    std::fs::write(
        &workflow,
        "name: one\nsteps:\n  - name: first\n    type: operation\n    tool: write_file\n    input: { path: ran.txt, content: \"ran\" }\n",
    )
    .unwrap();
    let mut c = bin();
    c.current_dir(dir)
        .args(["run", "--deterministic", "--storage", url])
        .arg(&workflow)
        .arg("--workspace")
        .arg(dir.join("ws"));
    if let Some(d) = durability {
        c.args(["--durability", d]);
    }
    c.output().unwrap()
}

#[test]
fn a_durability_the_runner_cannot_honour_on_nats_is_refused_before_anything_runs() {
    let Some(server) = testing::single().unwrap() else {
        return;
    };
    let url = server.url();
    for durability in ["always", "interval"] {
        let tmp = tempfile::tempdir().unwrap();
        let o = run(&url, tmp.path(), Some(durability));
        let stderr = text(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(2),
            "--durability {durability}: {stderr}"
        );
        assert!(stderr.contains("--durability"), "{stderr}");
        assert!(stderr.contains("sync_interval"), "{stderr}");
        assert!(!tmp.path().join("ws/ran.txt").exists(), "no step ran");
    }
    // Nothing was published, nor even a store made (#52: only a run that goes on creates it).
    let list = bin().args(["list", "--storage", &url]).output().unwrap();
    assert_eq!(list.status.code(), Some(4), "{}", text(&list.stderr));
    assert!(
        text(&list.stderr).contains("no transcript store at"),
        "{}",
        text(&list.stderr)
    );
    assert!(
        !text(&list.stdout).contains(DEMO_RUN_ID),
        "nothing was published: {}",
        text(&list.stdout)
    );
    // The default, and `none` said explicitly, record (the latter on a server of its own:
    // the deterministic run id is the same).
    let other = testing::single().unwrap().unwrap();
    for (url, durability) in [(url, None), (other.url(), Some("none"))] {
        let tmp = tempfile::tempdir().unwrap();
        let o = run(&url, tmp.path(), durability);
        assert!(o.status.success(), "{durability:?}: {}", text(&o.stderr));
        assert!(tmp.path().join("ws/ran.txt").is_file());
    }
}

/// The stream settings from the environment: a value that is not a number is a usage error
/// naming the variable (exit 2, before connecting); a stream the server cannot create (three
/// replicas on one server) is a storage error naming the URL (exit 4) before any step runs.
#[test]
fn stream_settings_the_server_cannot_honour_fail_before_any_step_runs() {
    let Some(server) = testing::single().unwrap() else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let workflow = tmp.path().join("one.yaml");
    std::fs::write(
        &workflow,
        "name: one\nsteps:\n  - name: first\n    type: operation\n    tool: write_file\n    input: { path: ran.txt, content: \"ran\" }\n",
    )
    .unwrap();
    for (name, value, code, named) in [
        (
            "TRANSCRIPT_NATS_REPLICAS",
            "three",
            2,
            "TRANSCRIPT_NATS_REPLICAS=\"three\"",
        ),
        (
            "TRANSCRIPT_NATS_ACK_TIMEOUT_MS",
            "-5",
            2,
            "TRANSCRIPT_NATS_ACK_TIMEOUT_MS",
        ),
        ("TRANSCRIPT_NATS_REPLICAS", "3", 4, url.as_str()),
    ] {
        let o = bin()
            .current_dir(tmp.path())
            .env(name, value)
            .args(["run", "--deterministic", "--storage", &url])
            .arg(&workflow)
            .arg("--workspace")
            .arg(tmp.path().join("ws"))
            .output()
            .unwrap();
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{name}={value}: {stderr}");
        assert!(stderr.contains(named), "{name}={value}: {stderr}");
        assert!(!tmp.path().join("ws/ran.txt").exists(), "no step ran");
    }
}
