//! Issue #39 item 7: every descendant is the run's. A command step that escapes its process
//! group (`setsid`), double-forks, `nohup`s, daemonizes (closing its fds) or clears its
//! environment (`env -i setsid …`) used to outlive the run. Now the step's own processes die
//! when the step ends (success too), and nothing of the run is left when it ends.
//!
//! The truth is the process table: each escapee runs `sleep <tag>` with a tag unique to this
//! test run, and `/proc/*/cmdline` is read for it, by a later step of the same run (at a
//! step's end) and by the test after the binary has exited (at the run's end).
#![allow(clippy::unwrap_used)]

mod common;

use common::{bin, text};

/// The pids whose command line is exactly `sleep <tag>`.
fn sleeping(tag: &str) -> Vec<u32> {
    let want = format!("sleep\0{tag}\0");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| c == want.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Kills what a failed assertion would otherwise leave behind (test hygiene only).
fn cleanup(tags: &[String]) {
    for tag in tags {
        for pid in sleeping(tag) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// A tag unique to this test process: `sleep` parses it as seconds.
fn tag(n: u32) -> String {
    format!("{}{n:02}.5", 3000 + std::process::id() % 1000)
}

/// The escape shapes: (name, shell source starting `sleep <tag>` in the background, killed
/// at the step's end (false: only at the run's end, its environment is cleared)).
fn shapes() -> Vec<(&'static str, String, bool)> {
    vec![
        (
            "setsid",
            format!("setsid sleep {} >/dev/null 2>&1 &", tag(1)),
            true,
        ),
        (
            "double fork",
            format!("sh -c '(sleep {} >/dev/null 2>&1 &) &' ", tag(2)),
            true,
        ),
        (
            "nohup",
            format!("nohup sleep {} >/dev/null 2>&1 &", tag(3)),
            true,
        ),
        (
            "daemon closing its fds",
            format!(
                "python3 -c 'import os\nif os.fork() == 0:\n  os.setsid()\n  if os.fork() == 0:\n    [os.close(f) for f in (0, 1, 2)]\n    os.execvp(\"sleep\", [\"sleep\", \"{}\"])\n'",
                tag(4)
            ),
            true,
        ),
        (
            "env -i setsid",
            format!("env -i setsid sleep {} >/dev/null 2>&1 &", tag(5)),
            false,
        ),
    ]
}

#[test]
fn no_pid_of_a_run_survives_its_step_or_the_run() {
    let shapes = shapes();
    let tags: Vec<String> = (1..=5).map(tag).collect();
    let mut steps = String::new();
    for (i, (name, start, at_step_end)) in shapes.iter().enumerate() {
        // The step ends once its escapee runs `sleep` (not before it has exec'd).
        let start = format!(
            "{start}\nuntil pgrep -xf 'sleep {}' >/dev/null; do sleep 0.01; done",
            tags[i]
        );
        steps.push_str(&format!(
            "  - name: start{i}\n    type: command\n    command: {start:?}\n"
        ));
        if *at_step_end {
            // The step that started it has ended: nothing of it is left.
            steps.push_str(&format!(
                "  - name: gone{i}\n    type: command\n    command: [\"sh\", \"-c\", \"if pgrep -xf \\\"sleep $1\\\" >/dev/null; then echo '{name}: survived its step' >&2; exit 1; fi\", \"sh\", \"{}\"]\n",
                tags[i]
            ));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, format!("name: escape\nsteps:\n{steps}")).unwrap();
    let out = bin()
        .arg("run")
        .arg(&wf)
        .arg("--workspace")
        .arg(dir.path())
        .arg("--storage")
        .arg(dir.path().join("st"))
        .output()
        .unwrap();
    let survivors: Vec<(String, Vec<u32>)> = tags
        .iter()
        .map(|t| (t.clone(), sleeping(t)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    cleanup(&tags);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        survivors.is_empty(),
        "processes of the run outlived it: {survivors:?}"
    );
}

#[test]
fn parallel_steps_do_not_end_each_others_processes() {
    // Branch b leaves an escapee and ends; its end kills the escapee. Branch a is still
    // running then: it waits for b's escapee to appear and to be gone, and must survive
    // b's end to print "alive".
    let t = tag(9);
    let yaml = format!(
        r#"name: par
steps:
  - name: both
    type: parallel
    branches:
      - name: a
        type: command
        timeout_ms: 30000
        command: ["sh", "-c", "until [ -e started ]; do sleep 0.01; done; while pgrep -xf \"sleep $1\" >/dev/null; do sleep 0.01; done; echo alive", "sh", "{t}"]
      - name: b
        type: command
        command: "setsid sleep {t} >/dev/null 2>&1 & until pgrep -xf 'sleep {t}' >/dev/null; do sleep 0.01; done; touch started"
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, yaml).unwrap();
    let store = tempfile::tempdir().unwrap();
    let out = bin()
        .arg("run")
        .arg(&wf)
        .arg("--workspace")
        .arg(dir.path())
        // The storage beside the workspace (#56: a confined step creates no entry directly in
        // a workspace that holds the storage).
        .arg("--storage")
        .arg(store.path())
        .output()
        .unwrap();
    let left = sleeping(&t);
    cleanup(std::slice::from_ref(&t));
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(left.is_empty(), "b's escapee outlived the run: {left:?}");
}
