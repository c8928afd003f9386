//! The HTML export rendered in headless Chromium (Debian's `chromium`
//! package; `.ci/run` installs it when missing). The page must load without
//! console errors or blocked requests and show every step name. A screenshot
//! is taken into a temporary directory, never into the repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::html_page::{chromium, headless};
use common::{DEMO_RUN_ID, demo_command};

fn step_names(tree: &serde_json::Value, out: &mut Vec<String>) {
    if let Some(steps) = tree["steps"].as_array() {
        for s in steps {
            out.push(s["name"].as_str().unwrap().to_owned());
            step_names(s, out);
        }
    }
    if let Some(children) = tree["children"].as_array() {
        for s in children {
            out.push(s["name"].as_str().unwrap().to_owned());
            step_names(s, out);
        }
    }
    if tree["child"].is_object() {
        step_names(&tree["child"], out);
    }
}

#[test]
fn html_export_renders_in_headless_chromium_with_every_step() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: no chromium on PATH (install Debian's `chromium`; .ci/run does"
        );
        eprintln!("skipped: no chromium on PATH (install Debian's `chromium`; .ci/run does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_id = DEMO_RUN_ID;
    let page = dir.path().join("run.html");
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["export", run_id, "--format", "html", "-o"])
        .arg(&page)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(out.status.success());
    let tree = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["tree", run_id, "--json", "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    let tree: serde_json::Value = serde_json::from_slice(&tree.stdout).unwrap();
    let mut names = Vec::new();
    step_names(&tree, &mut names);
    assert!(names.len() > 20, "{names:?}");

    let url = format!("file://{}", page.display());
    let dom = headless(&browser, &dir.path().join("profile1"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    for name in &names {
        assert!(
            html.contains(&format!("{name} ")) || html.contains(&format!(">{name}<")),
            "step {name} not shown"
        );
    }
    let log = String::from_utf8_lossy(&dom.stderr);
    for bad in [
        "Uncaught",
        "CONSOLE",
        "Refused to",
        "net::ERR_",
        "Failed to load",
    ] {
        assert!(
            !log.lines()
                .any(|l| l.contains(bad) && l.contains("run.html")),
            "{bad} in browser log:\n{log}"
        );
    }
    let shot = dir.path().join("page.png");
    let s = headless(&browser, &dir.path().join("profile2"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,2000")
        .arg(&url)
        .output()
        .unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    eprintln!(
        "screenshot: {} ({} bytes, temporary)",
        shot.display(),
        png.len()
    );
}
