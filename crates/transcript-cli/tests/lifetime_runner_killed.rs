//! Every process of a run dies with its runner, however the runner dies (#59 item 9): a
//! `transcript run` SIGKILLed while its step runs `sleep` and a grandchild shell's `sleep`
//! leaves nothing running, on the step's own network namespace (`__netns`), on the host's
//! network (`--network all`) and without confinement (`--sandbox off`): each process is
//! started through a guard that watches the runner. Checked against the OS: the processes
//! whose argv carries the test's marker, found in `/proc`, and their exit awaited through
//! pidfds within a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{bin, wait_until_exited};

const BOUND: Duration = Duration::from_secs(60);

/// `(pid, state, argv[0])` of every process whose command line holds `marker` (the guard,
/// the step's shell, its `sleep`, the grandchild shell and its `sleep`).
fn marked(marker: &str) -> Vec<(String, char, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?.to_string();
            let argv = std::fs::read(e.path().join("cmdline")).ok()?;
            let argv = String::from_utf8_lossy(&argv).into_owned();
            if !argv.contains(marker) {
                return None;
            }
            let program = argv.split('\0').next().unwrap_or_default().to_owned();
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let state = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .next()?
                .chars()
                .next()?;
            Some((pid, state, program))
        })
        .collect()
}

/// Kills what a failed test left running.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for (pid, ..) in marked(&self.0) {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    }
}

fn killed_runner_leaves_nothing(extra: &[&str], tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("w");
    std::fs::create_dir_all(&ws).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(ws.join("ready"))
            .status()
            .unwrap()
            .success()
    );
    // A marker no other process carries: this test's pid and case, as `sleep`'s fraction.
    let marker = format!("600.{}{tag}", std::process::id());
    let _cleanup = Cleanup(marker.clone());
    let wf = dir.path().join("wf.yaml");
    std::fs::write(
        &wf,
        format!(
            "name: doomed\nsteps:\n  - name: s\n    type: command\n    command: \"sleep {marker} & sh -c 'sleep {marker} & wait' {marker} & echo up > ready; wait\"\n"
        ),
    )
    .unwrap();
    let mut runner = bin()
        .args(["run", "--color", "never"])
        .args(extra)
        .arg("--storage")
        .arg(dir.path().join("s"))
        .arg("--workspace")
        .arg(&ws)
        .arg(&wf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let ready = ws.join("ready");
    std::thread::spawn(move || tx.send(std::fs::read_to_string(ready).unwrap_or_default()));
    if rx.recv_timeout(BOUND).is_err() {
        let _ = runner.kill();
        panic!("{tag}: the step never started");
    }
    // Both sleeps run (the grandchild shell may still be starting its own).
    let sleeps = |procs: &[(String, char, String)]| procs.iter().filter(|p| p.2 == "sleep").count();
    let deadline = Instant::now() + BOUND;
    let mut seen = marked(&marker);
    while sleeps(&seen) < 2 && Instant::now() < deadline {
        std::thread::yield_now();
        seen = marked(&marker);
    }
    assert_eq!(sleeps(&seen), 2, "{tag}: {seen:?}");
    assert!(seen.len() >= 4, "{tag}: the shells too: {seen:?}");
    runner.kill().unwrap();
    runner.wait().unwrap();
    for (pid, ..) in &seen {
        wait_until_exited(pid, Duration::from_secs(10));
    }
    let left: Vec<_> = marked(&marker)
        .into_iter()
        .filter(|(_, state, _)| *state != 'Z')
        .collect();
    assert!(left.is_empty(), "{tag}: survived the runner: {left:?}");
}

#[test]
fn a_sigkilled_runner_takes_its_steps_with_it_in_their_namespace() {
    killed_runner_leaves_nothing(&[], "1");
}

#[test]
fn a_sigkilled_runner_takes_its_steps_with_it_on_the_host_network() {
    killed_runner_leaves_nothing(&["--network", "all"], "2");
}

#[test]
fn a_sigkilled_runner_takes_its_steps_with_it_without_confinement() {
    killed_runner_leaves_nothing(&["--sandbox", "off"], "3");
}
