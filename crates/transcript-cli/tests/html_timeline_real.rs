//! The HTML timeline of a real agent session (issue #42): a real Claude Code log
//! (`$TRANSCRIPT_REAL_FIXTURES`, never copied into the repository) imported by the binary,
//! exported as HTML and loaded in headless Chromium. Every agent turn and every tool call
//! of the transcript (counted here from the file with serde_json) is one bar on the axis.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TRANSCRIPT_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|_| PathBuf::from(name))
        })
}

fn browser_or_skip() -> Option<PathBuf> {
    let b = chromium();
    if b.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: no chromium on PATH (install Debian's `chromium`; .ci/run does"
        );
        eprintln!("skipped: no chromium on PATH");
    }
    b
}

fn headless(browser: &Path, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// `transcript export <run> --format html` into `dir/run.html`, then Chromium's DOM of it
/// (asserting a clean browser log).
fn export_and_dump(browser: &Path, storage: &Path, run: &str, dir: &Path) -> String {
    let page = dir.join("run.html");
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["export", run, "--format", "html", "-o"])
        .arg(&page)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = headless(browser, &dir.join("profile"))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let log = String::from_utf8_lossy(&dom.stderr);
    for bad in ["Uncaught", "Refused to", "net::ERR_", "Failed to load"] {
        assert!(
            !log.lines()
                .any(|l| l.contains(bad) && l.contains("run.html")),
            "{bad} in browser log:\n{log}"
        );
    }
    String::from_utf8(dom.stdout).unwrap()
}

/// The timeline section of a dumped DOM.
fn timeline(dom: &str) -> &str {
    let start = dom
        .find("<section class=\"timeline\"")
        .expect("no timeline section in the page");
    let end = start + dom[start..].find("</section>").unwrap();
    &dom[start..end]
}

/// One bar as Chromium serialized it.
#[derive(Debug)]
#[allow(dead_code)]
struct Bar {
    class: String,
    href: String,
    run: String,
    path: String,
    left: f64,
    width: f64,
}

fn attr(tag: &str, name: &str) -> String {
    let key = format!(" {name}=\"");
    let at = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"));
    let rest = &tag[at + key.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

fn pct(style: &str, prop: &str) -> f64 {
    let key = format!("{prop}:");
    let at = style
        .find(&key)
        .unwrap_or_else(|| panic!("no {prop} in {style}"));
    let rest = style[at + key.len()..].trim_start();
    rest[..rest.find('%').unwrap()].trim().parse().unwrap()
}

/// Every `<a …>` tag of the timeline, as bars (a link that is not a bar fails).
fn bars(section: &str) -> Vec<Bar> {
    section
        .match_indices("<a ")
        .map(|(i, _)| {
            let tag = &section[i..i + section[i..].find('>').unwrap()];
            let style = attr(tag, "style").replace(' ', "");
            Bar {
                class: attr(tag, "class"),
                href: attr(tag, "href"),
                run: attr(tag, "data-run"),
                path: attr(tag, "data-path"),
                left: pct(&style, "left"),
                width: pct(&style, "width"),
            }
        })
        .collect()
}

#[allow(dead_code)]
fn step_bar<'b>(bars: &'b [Bar], run: &str, path: &str) -> &'b Bar {
    bars.iter()
        .find(|b| b.class.contains("k-step") && b.run == run && b.path == path)
        .unwrap_or_else(|| panic!("no bar for step {path} of {run}: {bars:#?}"))
}

/// Milliseconds since midnight of a `YYYY-MM-DDTHH:MM:SS.mmmZ` time (the recorder's
/// format; the runs here stay within one day), read by hand rather than by our reader.
#[allow(dead_code)]
fn ms(t: &str) -> i64 {
    assert!(t.len() == 24 && t.ends_with('Z'), "{t}");
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    n(11..13) * 3_600_000 + n(14..16) * 60_000 + n(17..19) * 1000 + n(20..23)
}

#[allow(dead_code)]
const RUN: &str = "0000abcd-0000-4000-8000-000000000042";

/// A hand-written transcript: `(type, path, at ms, payload)` events of run [`RUN`].
#[allow(dead_code)]
fn write_run(storage: &Path, events: &[(&str, &str, i64, Value)]) {
    std::fs::create_dir_all(storage).unwrap();
    let mut text = String::new();
    for (seq, (ty, path, at, payload)) in events.iter().enumerate() {
        assert!(*at < 60_000);
        let ts = format!("2026-05-28T10:00:{:02}.{:03}Z", at / 1000, at % 1000);
        let e = json!({"seq": seq + 1, "run_id": RUN, "type": ty, "path": path, "iteration": 0,
            "timestamp": ts, "payload": payload});
        text.push_str(&e.to_string());
        text.push('\n');
    }
    std::fs::write(storage.join(format!("{RUN}.jsonl")), text).unwrap();
}

#[test]
fn a_real_claude_session_has_a_bar_per_turn_and_tool_call() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let Some(log) = common::real_fixture(
        "claude-code",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["import", "claude", "--deterministic"])
        .arg(&log)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let run = stdout.trim_end().split('\t').next().unwrap().to_owned();
    let events: Vec<Value> = std::fs::read_to_string(storage.join(format!("{run}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let turns = events
        .iter()
        .filter(|e| e["type"] == "message.assistant")
        .count();
    let mut calls: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e["type"] == "tool.call" || e["type"] == "tool.result")
        .map(|e| (&e["path"], &e["payload"]["call_id"]))
        .collect();
    calls.sort_by_key(|(p, c)| (p.to_string(), c.to_string()));
    calls.dedup();
    assert!(
        turns >= 4 && calls.len() >= 6,
        "{turns} turns, {} calls",
        calls.len()
    );
    let dom = export_and_dump(&browser, &storage, &run, dir.path());
    let bars = bars(timeline(&dom));
    let count = |k: &str| bars.iter().filter(|b| b.class.contains(k)).count();
    assert_eq!(count("k-turn"), turns);
    assert_eq!(count("k-tool"), calls.len());
    for b in &bars {
        assert!(
            b.left >= 0.0 && b.width >= 0.0 && b.left + b.width <= 100.0001,
            "{b:?}"
        );
    }
}
