//! `tail -f` ends with the run it follows (#42 item 5): a real `transcript run` followed from
//! another process exits 0 when the run succeeded, 1 when it failed, 5 when it was cancelled;
//! `--forever` keeps today's wait-forever behaviour. The run's step waits on a file the test
//! creates once the follower has shown the running step, so no sleep decides an order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::bin;

/// A bound on every wait (the test fails instead of hanging).
const BOUND: Duration = Duration::from_secs(30);

/// The parent calls a child run whose step waits for `go` in the workspace, then ends with
/// `end` (a shell command: `true` or `exit 3`).
fn workflows(dir: &Path, end: &str) -> PathBuf {
    std::fs::write(
        dir.join("child.yaml"),
        format!(
            "name: waiter\nsteps:\n  - name: wait\n    type: command\n    command: \"while [ ! -e go ]; do sleep 0.05; done; {end}\"\n"
        ),
    )
    .unwrap();
    let parent = dir.join("parent.yaml");
    std::fs::write(
        &parent,
        "name: caller\nsteps:\n  - name: call\n    type: call_workflow\n    workflow: child.yaml\n",
    )
    .unwrap();
    parent
}

/// A process whose stdout (or stderr) lines arrive on a channel.
struct Lines {
    rx: mpsc::Receiver<String>,
    seen: String,
}

impl Lines {
    fn of(stream: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                if tx.send(line.unwrap_or_default()).is_err() {
                    return;
                }
            }
        });
        Self {
            rx,
            seen: String::new(),
        }
    }

    /// The first line containing `what`.
    fn wait_for(&mut self, what: &str) -> String {
        loop {
            let line = self
                .rx
                .recv_timeout(BOUND)
                .unwrap_or_else(|_| panic!("no {what:?} in: {}", self.seen));
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.contains(what) {
                return line;
            }
        }
    }
}

/// Waits for `child` to exit (at most [`BOUND`]); `None` if it is still running then (it is
/// killed).
fn exit_code(mut child: Child) -> Option<i32> {
    let (tx, rx) = mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait().unwrap().code());
    });
    match rx.recv_timeout(BOUND) {
        Ok(code) => code,
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            None
        }
    }
}

/// Starts the run of `parent` and a `tail -f` of its transcript (with `extra` flags); returns
/// once the follower has shown the call step running.
fn run_and_follow(dir: &Path, parent: &Path, extra: &[&str]) -> (Child, Child, Lines, PathBuf) {
    let mut run = bin()
        .args(["run", "--color", "never", "--storage"])
        .arg(dir.join("s"))
        .arg("--workspace")
        .arg(dir)
        .arg(parent)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run_err = Lines::of(run.stderr.take().unwrap());
    let started = run_err.wait_for("transcript: run ");
    let path = started.rsplit("→ ").next().unwrap().trim().to_owned();
    let mut tail = bin()
        .args(["tail", "-f", "--color", "never"])
        .args(extra)
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = Lines::of(tail.stdout.take().unwrap());
    out.wait_for("[call_workflow]");
    (run, tail, out, PathBuf::from(path))
}

#[test]
fn tail_f_exits_0_when_the_run_and_its_child_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let parent = workflows(dir.path(), "true");
    let (run, tail, mut out, _) = run_and_follow(dir.path(), &parent, &[]);
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(exit_code(run), Some(0));
    assert_eq!(exit_code(tail), Some(0), "tail -f kept waiting");
    out.wait_for("run.completed");
}

#[test]
fn tail_f_exits_1_when_the_run_failed() {
    let dir = tempfile::tempdir().unwrap();
    let parent = workflows(dir.path(), "exit 3");
    let (run, tail, mut out, _) = run_and_follow(dir.path(), &parent, &[]);
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(exit_code(run), Some(1));
    assert_eq!(
        exit_code(tail),
        Some(1),
        "tail -f did not say the run failed"
    );
    assert!(out.wait_for("run.completed").contains("failed"));
}

#[test]
fn tail_f_exits_5_when_the_run_was_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let parent = workflows(dir.path(), "true");
    let (run, tail, mut out, _) = run_and_follow(dir.path(), &parent, &[]);
    let kill = std::process::Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert_eq!(exit_code(run), Some(130));
    assert_eq!(
        exit_code(tail),
        Some(5),
        "tail -f did not say the run was cancelled"
    );
    assert!(out.wait_for("run.completed").contains("cancelled"));
}

#[test]
fn tail_f_forever_keeps_following_after_the_run_completed() {
    let dir = tempfile::tempdir().unwrap();
    let parent = workflows(dir.path(), "true");
    let (run, mut tail, mut out, file) = run_and_follow(dir.path(), &parent, &["--forever"]);
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(exit_code(run), Some(0));
    out.wait_for("run.completed");
    // A line appended after the completion is still shown: the follower did not stop.
    let first = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(f, "{first}").unwrap();
    out.wait_for("run.started");
    tail.kill().unwrap();
    tail.wait().unwrap();
}

#[test]
fn tail_f_waits_for_a_child_run_that_has_not_completed() {
    let dir = tempfile::tempdir().unwrap();
    let parent = workflows(dir.path(), "true");
    std::fs::write(dir.path().join("go"), "").unwrap();
    let mut run = bin()
        .args(["run", "--color", "never", "--storage"])
        .arg(dir.path().join("s"))
        .arg("--workspace")
        .arg(dir.path())
        .arg(&parent)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Lines::of(run.stderr.take().unwrap()).wait_for("transcript: run ");
    let root = PathBuf::from(started.rsplit("→ ").next().unwrap().trim());
    assert_eq!(exit_code(run), Some(0));
    // The child's file loses its `run.completed`: the child has not ended yet.
    let child = std::fs::read_dir(root.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            // A run's file is named by its id (other files: the runs index).
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            p != &root && p.extension().is_some_and(|e| e == "jsonl") && stem.len() == 36
        })
        .expect("the child run's transcript");
    let body = std::fs::read_to_string(&child).unwrap();
    let (head, last) = body.trim_end().rsplit_once('\n').unwrap();
    assert!(last.contains("run.completed"), "{last}");
    std::fs::write(&child, format!("{head}\n")).unwrap();
    // The child is still running: its writer holds the run's lease (#52: a run without
    // `run.completed` whose lease nobody holds is abandoned, and `tail -f` ends on it).
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&child)
        .unwrap();
    let lease = transcript_infra::WriterLease::hold(&f).unwrap();
    let mut tail = bin()
        .args(["tail", "-f", "--color", "never"])
        .arg(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Lines::of(tail.stderr.take().unwrap()).wait_for("waiting for child run");
    writeln!(f, "{last}").unwrap();
    drop(lease);
    assert_eq!(exit_code(tail), Some(0));
}

#[test]
fn tail_f_on_a_directory_says_it_follows_one_run() {
    let dir = tempfile::tempdir().unwrap();
    for follow in [true, false] {
        let mut cmd = bin();
        cmd.args(["tail", "--color", "never"]);
        if follow {
            cmd.arg("-f");
        }
        let out = cmd.arg(dir.path()).output().unwrap();
        let stderr = common::text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains("follows one run"), "{stderr}");
    }
}
