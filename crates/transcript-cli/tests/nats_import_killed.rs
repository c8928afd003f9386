//! A server killed mid-import (#59 item 4), against real nats-servers started on free loopback
//! ports and stopped by PID: a store of many session files is imported into NATS, the server is
//! SIGKILLed once the stream holds part of it (watched through the stream's own count, no
//! sleep), the import fails (exit 4, never "imported"), the server comes back, and the import
//! run again leaves the store equal to a clean import: every run whole, nothing abandoned.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, text};
use transcript_nats::testing;

const LOG: &str = "spotter-session-log-v2.1.38-subagent.jsonl";
const SESSIONS: usize = 150;

/// A Claude Code store (`config/projects/-work-demo/<session>.jsonl`) of `SESSIONS` copies of
/// the log, each its own session.
fn store(config: &Path, log: &Path) {
    let project = config.join("projects/-work-demo");
    std::fs::create_dir_all(&project).unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    for n in 0..SESSIONS {
        let session = format!("5e55{n:04}-0000-4000-8000-000000000000");
        let body: String = text
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                if v.get("sessionId").is_some() {
                    v["sessionId"] = session.clone().into();
                }
                serde_json::to_string(&v).unwrap() + "\n"
            })
            .collect();
        std::fs::write(project.join(format!("{session}.jsonl")), body).unwrap();
    }
}

fn import(url: &str, config: &Path) -> Command {
    let mut c = bin();
    c.env("CLAUDE_CONFIG_DIR", config)
        .env("TRANSCRIPT_NATS_LEASE_SECS", "2")
        .env("TRANSCRIPT_NATS_ACK_TIMEOUT_MS", "500")
        .env("TRANSCRIPT_NATS_PUBLISH_ATTEMPTS", "2")
        .args([
            "import",
            "--deterministic",
            "--storage",
            url,
            "claude",
            "--store",
        ]);
    c
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// How many messages the store at `url` (`nats://…/STREAM`) holds (0 while it does not exist).
fn messages(url: &str) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let Ok(url) = transcript_nats::StorageUrl::parse(url) else {
            return 0;
        };
        let options = transcript_nats::StreamOptions::default();
        let Ok(store) = transcript_nats::NatsStore::connect_existing(&url, options).await else {
            return 0;
        };
        match store.jetstream().get_stream(&url.stream).await {
            Ok(mut s) => s.info().await.map(|i| i.state.messages).unwrap_or(0),
            Err(_) => 0,
        }
    })
}

/// Every run's lines as `mirror` copies them from `url` into `dir`, by file name.
fn mirrored(url: &str, dir: &Path) -> Vec<(String, Vec<u8>)> {
    ok(bin()
        .args(["mirror", url, "--to"])
        .arg(dir)
        .output()
        .unwrap());
    let mut runs: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    runs.sort();
    runs
}

#[test]
fn a_server_killed_mid_import_leaves_nothing_half_after_the_import_runs_again() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    let Some(mut server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("claude");
    store(&config, &log);
    let url = format!("{}/KILLED", server.url());
    let child = import(&url, &config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Part of the import is in the stream: kill the server under it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = 0;
    while seen < 200 && Instant::now() < deadline {
        seen = messages(&url);
        std::thread::yield_now();
    }
    assert!(seen >= 200, "the import never reached the stream");
    server.kill();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{stdout}{stderr}");
    assert!(!stderr.contains("1 session file(s)"), "{stderr}");

    server.restart().unwrap();
    ok(import(&url, &config).output().unwrap());
    let Some(clean) = testing::single().expect("nats-server") else {
        return;
    };
    let clean_url = format!("{}/KILLED", clean.url());
    ok(import(&clean_url, &config).output().unwrap());
    let recovered = mirrored(&url, &tmp.path().join("recovered"));
    let expected = mirrored(&clean_url, &tmp.path().join("clean"));
    assert_eq!(recovered.len(), SESSIONS);
    assert_eq!(
        recovered.iter().map(|r| &r.0).collect::<Vec<_>>(),
        expected.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    for ((name, got), (_, want)) in recovered.iter().zip(&expected) {
        assert!(got == want, "{name}: not what a clean import writes");
    }
    let listed = ok(bin()
        .args(["list", "--all", "--json", "-n", "1000", "--storage", &url])
        .output()
        .unwrap());
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let runs = listed.as_array().unwrap();
    assert_eq!(runs.len(), SESSIONS, "{listed}");
    assert!(runs.iter().all(|r| r["status"] != "abandoned"), "{listed}");
}
