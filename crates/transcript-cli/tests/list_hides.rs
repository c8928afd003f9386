//! `list` says what it hides (#59 item 11): `-n N` under the number of runs ends with "N of M
//! runs (-n N for more)"; a running run's duration is the time since it started (not to its
//! last event); `--all` is documented as with child runs; `mirror --help` lists only the options
//! it reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;

fn transcript(args: &[&str]) -> std::process::Output {
    common::bin().args(args).output().unwrap()
}

#[test]
fn list_says_how_many_it_does_not_show() {
    let dir = tempfile::tempdir().unwrap();
    let (st, ws) = (dir.path().join("s"), dir.path());
    let wf = dir.path().join("w.yaml");
    std::fs::write(
        &wf,
        "name: w\nsteps:\n  - name: s\n    type: command\n    command: 'true'\n",
    )
    .unwrap();
    for _ in 0..3 {
        let out = transcript(&[
            "run",
            wf.to_str().unwrap(),
            "--storage",
            st.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", common::describe(&out));
    }
    let list = |n: &str| {
        common::text(&transcript(&["list", "-n", n, "--storage", st.to_str().unwrap()]).stdout)
    };
    let two = list("2");
    assert_eq!(two.lines().count(), 4, "{two}");
    assert_eq!(two.lines().last().unwrap(), "2 of 3 runs (-n N for more)");
    let all = list("3");
    assert!(!all.contains(" of 3 runs"), "{all}");
    assert!(common::text(&transcript(&["list", "--help"]).stdout).contains("With child runs"));
    let mirror = common::text(&transcript(&["mirror", "--help"]).stdout);
    assert!(
        mirror.contains("--to") && mirror.contains("--consumer"),
        "{mirror}"
    );
    assert!(
        !mirror.contains("--storage") && !mirror.contains("--color"),
        "{mirror}"
    );
}

#[test]
fn a_running_runs_duration_counts_to_now() {
    let dir = tempfile::tempdir().unwrap();
    let (st, ws) = (dir.path().join("s"), dir.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let wf = dir.path().join("w.yaml");
    // The step waits for a file the test creates: the run is running, its last event is the
    // step's start, and time passes.
    std::fs::write(
        &wf,
        "name: w\nsteps:\n  - name: wait\n    type: command\n    \
         command: 'while [ ! -e go ]; do sleep 0.05; done'\n",
    )
    .unwrap();
    let mut runner = common::bin()
        .args([
            "run",
            wf.to_str().unwrap(),
            "--storage",
            st.to_str().unwrap(),
        ])
        .args(["--workspace", ws.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = None;
    while Instant::now() < deadline {
        let out = transcript(&["list", "--json", "--storage", st.to_str().unwrap()]);
        let runs: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let run = runs.get(0).cloned().unwrap_or(Value::Null);
        if run["status"] == "running" && run["duration_ms"].as_i64().unwrap_or(0) >= 1500 {
            seen = Some(run);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::write(ws.join("go"), "").unwrap();
    assert!(runner.wait().unwrap().success());
    let run = seen.expect("a running run whose duration grows past its last event");
    assert_eq!(run["events"], 2, "{run}");
}
