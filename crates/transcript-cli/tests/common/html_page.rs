//! The HTML page in a real browser (issue #42): headless Chromium (a skip fails under
//! `CI=true`), `transcript export --format html` dumped as Chromium's DOM with a clean
//! browser log, the timeline's bars read from that DOM, and hand-written transcripts whose
//! times the bars are compared with.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

pub fn chromium() -> Option<PathBuf> {
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

pub fn browser_or_skip() -> Option<PathBuf> {
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

pub fn headless(browser: &Path, profile: &Path) -> Command {
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
pub fn export_and_dump(browser: &Path, storage: &Path, run: &str, dir: &Path) -> String {
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
pub fn timeline(dom: &str) -> &str {
    let start = dom
        .find("<section class=\"timeline\"")
        .expect("no timeline section in the page");
    let end = start + dom[start..].find("</section>").unwrap();
    &dom[start..end]
}

/// One bar as Chromium serialized it.
#[derive(Debug)]
pub struct Bar {
    pub class: String,
    pub href: String,
    pub run: String,
    pub path: String,
    pub left: f64,
    pub width: f64,
}

pub fn attr(tag: &str, name: &str) -> String {
    let key = format!(" {name}=\"");
    let at = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"));
    let rest = &tag[at + key.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

pub fn pct(style: &str, prop: &str) -> f64 {
    let key = format!("{prop}:");
    let at = style
        .find(&key)
        .unwrap_or_else(|| panic!("no {prop} in {style}"));
    let rest = style[at + key.len()..].trim_start();
    rest[..rest.find('%').unwrap()].trim().parse().unwrap()
}

/// Every `<a …>` tag of the timeline, as bars (a link that is not a bar fails).
pub fn bars(section: &str) -> Vec<Bar> {
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

pub fn step_bar<'b>(bars: &'b [Bar], run: &str, path: &str) -> &'b Bar {
    bars.iter()
        .find(|b| b.class.contains("k-step") && b.run == run && b.path == path)
        .unwrap_or_else(|| panic!("no bar for step {path} of {run}: {bars:#?}"))
}

/// Milliseconds since midnight of a `YYYY-MM-DDTHH:MM:SS.mmmZ` time (the recorder's
/// format; the runs here stay within one day), read by hand rather than by our reader.
pub fn ms(t: &str) -> i64 {
    assert!(t.len() == 24 && t.ends_with('Z'), "{t}");
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    n(11..13) * 3_600_000 + n(14..16) * 60_000 + n(17..19) * 1000 + n(20..23)
}

pub const RUN: &str = "0000abcd-0000-4000-8000-000000000042";

/// A hand-written transcript: `(type, path, at ms, payload)` events of run [`RUN`].
pub fn write_run(storage: &Path, events: &[(&str, &str, i64, Value)]) {
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
