//! The HTML page's waterfall timeline and cost chart (issue #42), checked in headless
//! Chromium (Debian's `chromium`, as `tests/html.rs`): the page Chromium parsed (its
//! `--dump-dom`) is read back, and every bar's inline left and width are compared with the
//! times in the transcript file itself (read here with serde_json, not with our reader).
//! Transcripts are written by hand (a parallel branch that overlaps its sibling, one step
//! twice as long as another, failed, cancelled and incomplete steps, hostile names) and
//! by the demo workflow.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::html_page::*;

use std::path::Path;
use std::process::Command;

use common::{DEMO_RUN_ID, demo_command};
use serde_json::{Value, json};

fn step(name: &str, kind: &str) -> Value {
    json!({"name": name, "kind": kind})
}

fn failed(name: &str, error: &str) -> Value {
    json!({"name": name, "kind": "command", "error": error})
}

/// A run of 1000 ms: `fan` (parallel, 100..700) whose branch `a` runs 100..500 and `b`
/// 200..400 (half as long, inside `a`'s time), `broken` failed, `stopped` cancelled,
/// `hung` never completed.
fn shaped_run(storage: &Path) {
    write_run(
        storage,
        &[
            ("run.started", "", 0, step("shaped", "workflow")),
            ("step.started", "fan", 100, step("fan", "parallel")),
            ("step.started", "fan.a", 100, step("a", "command")),
            ("step.started", "fan.b", 200, step("b", "command")),
            ("step.completed", "fan.b", 400, step("b", "command")),
            ("step.completed", "fan.a", 500, step("a", "command")),
            ("step.completed", "fan", 700, step("fan", "parallel")),
            ("step.started", "broken", 700, step("broken", "command")),
            ("step.completed", "broken", 750, failed("broken", "exit 1")),
            ("step.started", "stopped", 750, step("stopped", "command")),
            (
                "step.completed",
                "stopped",
                800,
                failed("stopped", "cancelled"),
            ),
            ("step.started", "hung", 800, step("hung", "command")),
            (
                "run.completed",
                "",
                1000,
                json!({"name": "shaped", "kind": "workflow", "error": "step broken failed"}),
            ),
        ],
    );
}

#[test]
fn bars_follow_the_transcripts_times_and_mark_status() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    shaped_run(&storage);
    let dom = export_and_dump(&browser, &storage, RUN, dir.path());
    let section = timeline(&dom);
    let bars = bars(section);
    let (a, b) = (step_bar(&bars, RUN, "fan.a"), step_bar(&bars, RUN, "fan.b"));
    // 400 ms against 200 ms: twice as wide.
    assert!(
        (a.width / b.width - 2.0).abs() < 0.01,
        "a {a:?} is not twice as wide as b {b:?}"
    );
    // Positions on the run's 1000 ms axis.
    for (bar, left, width) in [(a, 10.0, 40.0), (b, 20.0, 20.0)] {
        assert!((bar.left - left).abs() < 0.01, "{bar:?}");
        assert!((bar.width - width).abs() < 0.01, "{bar:?}");
    }
    // The branches overlap in time, so their bars overlap on the axis.
    assert!(a.left < b.left + b.width && b.left < a.left + a.width);
    for (path, status) in [
        ("broken", "failed"),
        ("stopped", "cancelled"),
        ("hung", "incomplete"),
        ("fan.a", "succeeded"),
    ] {
        let bar = step_bar(&bars, RUN, path);
        assert!(bar.class.split(' ').any(|c| c == status), "{path}: {bar:?}");
        assert!(bar.href.starts_with("#n"), "{bar:?}");
        // Readable without colour: the status is text in the row and in the bar.
        let row_at = section.find(&format!("data-path=\"{path}\"")).unwrap();
        let row_start = section[..row_at].rfind("<div class=\"tl-row\">").unwrap();
        assert!(
            section[row_start..row_at].contains(&format!(">{status}</span>")),
            "{path}: no status text {status}"
        );
    }
    // Every bar links to a section of the page that exists.
    for bar in &bars {
        let id = format!("id=\"{}\"", &bar.href[1..]);
        assert!(dom.contains(&id), "{bar:?} links nowhere");
    }
    // The cancelled class is styled now.
    assert!(dom.contains(".cancelled {"), "no style for .cancelled");
}

#[test]
fn demo_bars_match_every_step_of_every_run() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let dom = export_and_dump(&browser, &storage, DEMO_RUN_ID, dir.path());
    let bars = bars(timeline(&dom));
    // The axis: the root run's start to its end, read from the file.
    let events: Vec<Vec<Value>> = std::fs::read_dir(&storage)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                && !p
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("audit")
        })
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .collect();
    let root = events
        .iter()
        .find(|e| e[0]["run_id"] == DEMO_RUN_ID)
        .unwrap();
    let origin = ms(root[0]["timestamp"].as_str().unwrap());
    let end = ms(root.last().unwrap()["timestamp"].as_str().unwrap());
    let span = (end - origin) as f64;
    let mut checked = 0;
    for run in &events {
        for e in run.iter().filter(|e| e["type"] == "step.completed") {
            let run_id = e["run_id"].as_str().unwrap();
            let path = e["path"].as_str().unwrap();
            let iteration = &e["iteration"];
            // The latest start of this path and iteration before the completion (a nested
            // loop repeats both).
            let started = run
                .iter()
                .take_while(|s| s["seq"] != e["seq"])
                .filter(|s| {
                    s["type"] == "step.started" && s["path"] == path && &s["iteration"] == iteration
                })
                .last()
                .unwrap();
            let (s, c) = (
                ms(started["timestamp"].as_str().unwrap()),
                ms(e["timestamp"].as_str().unwrap()),
            );
            let left = (s - origin) as f64 / span * 100.0;
            let width = (c - s) as f64 / span * 100.0;
            let matching = bars.iter().any(|b| {
                b.class.contains("k-step")
                    && b.run == run_id
                    && b.path == path
                    && (b.left - left).abs() < 0.01
                    && (b.width - width).abs() < 0.01
            });
            assert!(
                matching,
                "no bar at left {left} width {width} for {run_id} {path} #{iteration}"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked}");
    let flaky = step_bar(&bars, DEMO_RUN_ID, "attempts.flaky");
    assert!(flaky.class.split(' ').any(|c| c == "failed"), "{flaky:?}");
}

/// The chart row of `key` (`data-model="…"` or `data-run="…" data-path="…"`): (cost bar
/// width %, cost text, tokens text).
fn money_row(dom: &str, key: &str) -> (f64, String, String) {
    let at = dom
        .find(&format!("<div class=\"money-row\" {key}>"))
        .unwrap_or_else(|| panic!("no chart row {key}"));
    let row = &dom[at..];
    let row = &row[..row[1..]
        .find("<div class=\"money-row\"")
        .map_or(row.len(), |i| i + 1)];
    let cbar = &row[row.find("class=\"cbar\"").unwrap()..];
    let width = pct(&attr(cbar, "style").replace(' ', ""), "width");
    let usd = &row[row.find("<span class=\"usd\">").unwrap() + 18..];
    let (usd, rest) = usd.split_once("</span>").unwrap();
    let tokens = rest.trim_start_matches(" · ");
    let tokens = &tokens[..tokens.find("</div>").unwrap()];
    (width, usd.to_owned(), tokens.to_owned())
}

/// `$0.0004` as the page prints four decimals, `—` for null.
fn usd(v: &Value) -> String {
    v.as_f64().map_or("—".to_owned(), |c| format!("${c:.4}"))
}

#[test]
fn the_money_chart_shows_the_receipts_figures() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    assert!(
        demo_command(&storage, &dir.path().join("ws"))
            .output()
            .unwrap()
            .status
            .success()
    );
    // A house price for the demo's model: real costs on both sides.
    let table = dir.path().join("prices.json");
    std::fs::write(
        &table,
        r#"{"claude-demo-1": {"input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5}}"#,
    )
    .unwrap();
    let receipts = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["receipts", DEMO_RUN_ID, "--json", "--pricing"])
        .arg(&table)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(receipts.status.success());
    let r: Value = serde_json::from_slice(&receipts.stdout).unwrap();
    let page = dir.path().join("run.html");
    let out = Command::new(env!("CARGO_BIN_EXE_transcript"))
        .args(["export", DEMO_RUN_ID, "--format", "html", "--pricing"])
        .arg(&table)
        .arg("-o")
        .arg(&page)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(out.status.success());
    let dom = headless(&browser, &dir.path().join("profile"))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8(dom.stdout).unwrap();
    let receipts = r["receipts"].as_array().unwrap();
    assert!(receipts.len() >= 2);
    let max = receipts
        .iter()
        .filter_map(|x| x["cost_usd"].as_f64())
        .fold(0.0, f64::max);
    assert!(max > 0.0, "{r}");
    for x in receipts {
        let key = format!(
            "data-run=\"{}\" data-path=\"{}\"",
            x["run_id"].as_str().unwrap(),
            x["path"].as_str().unwrap()
        );
        let (width, cost, tokens) = money_row(&dom, &key);
        assert_eq!(cost, usd(&x["cost_usd"]), "{key}");
        let u = &x["usage"];
        assert!(
            tokens.starts_with(&format!(
                "{} in / {} out",
                u["input_tokens"], u["output_tokens"]
            )),
            "{key}: {tokens}"
        );
        let expect = x["cost_usd"].as_f64().map_or(0.0, |c| c / max * 100.0);
        assert!((width - expect).abs() < 0.01, "{key}: {width} vs {expect}");
    }
    for m in r["by_model"].as_array().unwrap() {
        let (_, cost, _) = money_row(
            &dom,
            &format!("data-model=\"{}\"", m["model"].as_str().unwrap()),
        );
        assert_eq!(cost, usd(&m["cost_usd"]), "{m}");
    }
    let total = &dom[dom.find("<span data-total-usd=\"\">").expect("no total") + 24..];
    assert_eq!(&total[..total.find('<').unwrap()], usd(&r["cost_usd"]));
}
