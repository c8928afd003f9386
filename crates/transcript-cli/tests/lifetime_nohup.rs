//! A signal ignored when the runner starts stays ignored (#59 item 10): `nohup transcript run`
//! (here `trap '' HUP; exec transcript run …`, what `nohup` does to the disposition) is not
//! cancelled by a hangup. Checked against the OS: the runner's `SigIgn` mask while its step
//! runs, its exit code and the transcript on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{bin, text};

const BOUND: Duration = Duration::from_secs(60);

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// The `SigIgn` and `SigCgt` masks of process `pid`.
fn masks(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"));
        u64::from_str_radix(line.trim(), 16).unwrap()
    };
    (field("SigIgn:"), field("SigCgt:"))
}

/// Kills the runner when the test fails before it was reaped.
struct KillOnFail(Option<u32>);

impl Drop for KillOnFail {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

#[test]
fn a_hangup_ignored_at_start_does_not_cancel_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("w");
    std::fs::create_dir_all(&ws).unwrap();
    mkfifo(&ws.join("ready"));
    mkfifo(&ws.join("go"));
    let wf = dir.path().join("wf.yaml");
    std::fs::write(
        &wf,
        "name: hangup\nsteps:\n  - name: wait\n    type: command\n    command: \"echo up > ready; read x < go; echo released $x\"\n  - name: after\n    type: command\n    command: \"echo after\"\n",
    )
    .unwrap();
    let transcript = bin();
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg("trap '' HUP; exec \"$0\" \"$@\"")
        .arg(transcript.get_program())
        .args(["run", "--color", "never", "--storage"])
        .arg(dir.path().join("s"))
        .arg("--workspace")
        .arg(&ws)
        .arg(&wf)
        .env_remove("NO_COLOR")
        .env_remove("TRANSCRIPT_STORAGE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut armed = KillOnFail(Some(pid));
    // The step says it runs: the runner has registered whatever handlers it registers.
    let (tx, rx) = mpsc::channel();
    let ready = ws.join("ready");
    std::thread::spawn(move || tx.send(std::fs::read_to_string(ready).unwrap_or_default()));
    let said = rx.recv_timeout(BOUND);
    if said.is_err() {
        let _ = child.kill();
    }
    assert_eq!(said.expect("the step started").trim(), "up");
    let (ignored, caught) = masks(pid);
    assert_ne!(ignored & 1, 0, "SIGHUP is still ignored: {ignored:x}");
    assert_eq!(caught & 1, 0, "no handler for SIGHUP: {caught:x}");
    // SIGINT and SIGTERM, not ignored at start, are still handled.
    assert_ne!(caught & (1 << 1), 0, "SIGINT handled: {caught:x}");
    assert_ne!(caught & (1 << 14), 0, "SIGTERM handled: {caught:x}");
    let hup = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    // An ignored signal is discarded when it is sent: releasing the step now is no race.
    std::fs::OpenOptions::new()
        .write(true)
        .open(ws.join("go"))
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    let out = rx.recv_timeout(BOUND).expect("the run ends");
    armed.0 = None;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let file = std::fs::read_dir(dir.path().join("s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".jsonl"))
                .is_some_and(|id| transcript_domain::RunId::parse(id).is_ok())
        })
        .unwrap();
    let body = std::fs::read_to_string(file).unwrap();
    let last: serde_json::Value = serde_json::from_str(body.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "run.completed", "{body}");
    assert!(last["payload"].get("error").is_none(), "{last}");
    assert!(body.contains("released go"), "{body}");
    assert!(body.contains("\"after\""), "{body}");
}
