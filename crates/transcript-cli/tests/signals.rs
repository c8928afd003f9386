//! Signals during `transcript run`, checked against the OS: which processes are still
//! running, what a TERM trap recorded, the exit code, and the transcript on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{DEMO_RUN_ID, bin, text};

/// A bound on every wait of these tests (they fail instead of hanging).
const BOUND: Duration = Duration::from_secs(60);

/// The workspace of the runs started in `dir`.
fn ws(dir: &Path) -> PathBuf {
    dir.join("w")
}

/// A `transcript run` of `workflow` whose stderr lines arrive on a channel.
struct Run {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: String,
}

impl Run {
    fn start(dir: &Path, workflow: &str, extra: &[&str]) -> Self {
        std::fs::create_dir_all(ws(dir)).unwrap();
        let wf = dir.join("wf.yaml");
        std::fs::write(&wf, workflow).unwrap();
        let mut child = bin()
            .args(["run", "--color", "never"])
            .args(extra)
            .arg("--storage")
            .arg(dir.join("s"))
            // The workspace beside the storage, not around it (#56: a confined step cannot
            // create entries directly in a workspace that holds the storage).
            .arg("--workspace")
            .arg(ws(dir))
            .arg(&wf)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines() {
                if tx.send(line.unwrap_or_default()).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            seen: String::new(),
        }
    }

    /// Waits for a stderr line containing `what`.
    fn wait_for(&mut self, what: &str) {
        loop {
            match self.lines.recv_timeout(BOUND) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                    if line.contains(what) {
                        return;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no {what:?} on stderr: {}", self.seen);
                }
            }
        }
    }

    fn signal(&self, name: &str) {
        let kill = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
    }

    /// The exit code, within the bound, and everything printed on stderr.
    fn exit_code(mut self) -> (Option<i32>, String) {
        let (tx, rx) = mpsc::channel();
        let pid = self.child.id();
        let mut child = self.child;
        std::thread::spawn(move || tx.send(child.wait().unwrap()));
        let status = match rx.recv_timeout(BOUND) {
            Ok(status) => status,
            Err(_) => {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                panic!("the run did not exit: {}", self.seen);
            }
        };
        while let Ok(line) = self.lines.recv_timeout(BOUND) {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        (status.code(), self.seen)
    }
}

/// Lines written to the FIFO `path` by the run's commands, on a channel: the tests wait on
/// what the commands say they did, not on time.
fn fifo_lines(path: &Path) -> mpsc::Receiver<String> {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        loop {
            // Each writer opens, writes a line and closes: reopen after each end of file.
            let Ok(fifo) = std::fs::File::open(&path) else {
                return;
            };
            for line in BufReader::new(fifo).lines() {
                if tx.send(line.unwrap_or_default()).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// Whether `pid` is running: present and neither a zombie nor dead (nobody reaps orphans
/// here, so a killed orphan can stay a zombie).
fn running(pid: &str) -> bool {
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    state
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next())
        .is_some_and(|s| s != "Z" && s != "X")
}

/// Whether `pid` is gone. A SIGKILLed process exits asynchronously: wait (bounded) for the OS
/// to say it has, so a process still on its way out is not taken for a survivor; a real
/// survivor is reported after 30 s.
fn gone(pid: &str) -> bool {
    common::wait_until_exited(pid, std::time::Duration::from_secs(30));
    !running(pid)
}

/// Kills what a failed test left running.
struct Reaper(Vec<String>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
}

fn pids(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The run's transcript in `dir/s` (the one file named by a run id).
fn transcript(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".jsonl"))
                .is_some_and(|id| transcript_domain::RunId::parse(id).is_ok())
        })
        .collect();
    assert_eq!(files.len(), 1, "one transcript: {files:?}");
    files.pop().unwrap()
}

/// The transcript validates and its last line is a cancelled `run.completed`.
fn assert_cancelled_and_whole(file: &Path, context: &str) {
    let body = std::fs::read_to_string(file).unwrap();
    let last: serde_json::Value = serde_json::from_str(body.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "run.completed", "{context}: {body}");
    assert_eq!(last["payload"]["error"], "cancelled", "{context}: {last}");
    let valid = bin().arg("validate").arg(file).output().unwrap();
    assert!(valid.status.success(), "{context}: {}", text(&valid.stdout));
}

/// Two parallel commands whose process groups ignore SIGTERM (the shell and its background
/// `sleep`), each writing its PIDs to `pids` and then a line to the FIFO `ready`.
const TERM_IGNORING: &str = "name: stubborn\nsteps:\n  - name: wait\n    type: parallel\n    branches:\n      - name: a\n        type: command\n        command: \"trap '' TERM; sleep 300 & echo $! $$ >> pids; echo a > ready; wait\"\n      - name: b\n        type: command\n        command: \"trap '' TERM; sleep 300 & echo $! $$ >> pids; echo b > ready; wait\"\n";

/// The second Ctrl-C does not wait for the kill grace (an hour here): every process group of
/// the run is killed at once, including processes that ignore SIGTERM, the cancelled steps are
/// completed and `run.completed` written, and the command exits 130.
#[test]
fn a_second_ctrl_c_kills_every_process_group_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let ready = fifo_lines(&ws(dir.path()).join("ready"));
    let mut run = Run::start(dir.path(), TERM_IGNORING, &["--kill-grace", "3600"]);
    for _ in 0..2 {
        ready
            .recv_timeout(BOUND)
            .expect("both commands announce their processes");
    }
    let pids = pids(&ws(dir.path()).join("pids"));
    assert_eq!(pids.len(), 4, "{pids:?}");
    let _reaper = Reaper(pids.clone());
    run.signal("INT");
    run.wait_for("cancelling the run");
    // The first signal sent SIGTERM to both groups; they ignore it.
    assert!(pids.iter().all(|p| running(p)), "TERM is ignored");
    run.signal("INT");
    let (code, stderr) = run.exit_code();
    assert_eq!(code, Some(130), "{stderr}");
    for pid in &pids {
        assert!(gone(pid), "process {pid} survived the run: {stderr}");
    }
    assert_cancelled_and_whole(&transcript(dir.path()), &stderr);
}

/// SIGTERM, SIGHUP and SIGINT cancel a run: each command's process group gets SIGTERM (its
/// trap records the arrival), every started step is completed, `run.completed` written, the
/// file valid, no process of the run left, exit 128+N.
#[test]
fn sigterm_and_sighup_cancel_the_run_cleanly() {
    for (signal, code) in [("TERM", 143), ("HUP", 129), ("INT", 130)] {
        let dir = tempfile::tempdir().unwrap();
        let ready = fifo_lines(&ws(dir.path()).join("ready"));
        let branch = |name: &str| {
            format!(
                "      - name: {name}\n        type: command\n        command: \"trap 'echo {name} >> trapped; exit 1' TERM; sleep 60 & echo $! $$ >> pids; echo {name} > ready; wait\"\n"
            )
        };
        let workflow = format!(
            "name: slow\nsteps:\n  - name: wait\n    type: parallel\n    branches:\n{}{}  - name: never\n    type: command\n    command: \"echo unreachable\"\n",
            branch("a"),
            branch("b")
        );
        let run = Run::start(dir.path(), &workflow, &[]);
        for _ in 0..2 {
            ready.recv_timeout(BOUND).expect("both commands started");
        }
        let pids = pids(&ws(dir.path()).join("pids"));
        assert_eq!(pids.len(), 4, "{pids:?}");
        let _reaper = Reaper(pids.clone());
        run.signal(signal);
        let (status, stderr) = run.exit_code();
        assert_eq!(status, Some(code), "SIG{signal}: {stderr}");
        // The OS's account: the TERM reached both shells, and nothing of the run runs on.
        let mut trapped: Vec<String> = pids_or_empty(&ws(dir.path()).join("trapped"));
        trapped.sort();
        assert_eq!(trapped, ["a", "b"], "SIG{signal}: TERM reached each group");
        for pid in &pids {
            assert!(gone(pid), "SIG{signal}: process {pid} survived");
        }
        let file = transcript(dir.path());
        assert_cancelled_and_whole(&file, &format!("SIG{signal}"));
        let tree = bin().args(["tree", "--json"]).arg(&file).output().unwrap();
        let tree = text(&tree.stdout);
        // One status vocabulary: a cancelled run and its cut steps say so.
        assert!(
            tree.contains("\"status\": \"cancelled\""),
            "SIG{signal}: {tree}"
        );
        assert!(
            !tree.contains("never"),
            "SIG{signal}: no step started after the signal"
        );
        assert!(
            !tree.contains("\"incomplete\""),
            "SIG{signal}: every started step completed"
        );
    }
}

fn pids_or_empty(file: &Path) -> Vec<String> {
    if file.exists() {
        pids(file)
    } else {
        Vec::new()
    }
}

/// A signal that comes as soon as the transcript file exists (here: while a durable open
/// syncs the directory) is handled like any other: the handlers were registered before the
/// file was created, so the run is cancelled, `run.completed` written, and the exit code is
/// 143 — never a process killed by the default action with a transcript that has no end.
#[test]
fn a_signal_as_soon_as_the_transcript_exists_still_completes_it() {
    use rustix::process::{Pid, Signal, kill_process};
    let workflow =
        "name: slow\nsteps:\n  - name: wait\n    type: command\n    command: \"sleep 30\"\n";
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        // Deterministic: the file's name is known before it exists.
        let run = Run::start(
            dir.path(),
            workflow,
            &["--deterministic", "--durability", "always"],
        );
        let file = dir.path().join("s").join(format!("{DEMO_RUN_ID}.jsonl"));
        let pid = Pid::from_raw(i32::try_from(run.child.id()).unwrap()).unwrap();
        // Spin (no sleep: the point is to come as early as possible) until the file exists.
        let mut sent = false;
        for _ in 0..50_000_000u64 {
            if file.exists() {
                kill_process(pid, Signal::TERM).unwrap();
                sent = true;
                break;
            }
        }
        assert!(sent, "round {round}: the transcript never appeared");
        let (code, stderr) = run.exit_code();
        assert_eq!(code, Some(143), "round {round}: {stderr}");
        assert_cancelled_and_whole(&file, &format!("round {round}"));
    }
}
