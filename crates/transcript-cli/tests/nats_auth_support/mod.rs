//! Shared by `nats_auth.rs` and `nats_auth_creds.rs` (#44 item 3, credentials the NATS way):
//! a real `nats-server` started with a configuration file the test writes, and the two
//! outcomes every credential must have through the binary:
//!
//! - [`accepted`]: `run` records (exit 0) and `list` and `mirror` read the store; while a step
//!   runs, no process of the run (the `transcript` process and every descendant) holds a
//!   secret in its argv (`/proc/<pid>/cmdline`); no secret is in stdout, stderr or any file
//!   the run, `list` and `mirror` left (workspace, local audit trail, mirrored transcripts).
//! - [`refused`]: with a wrong or missing credential, `run`, `list` and `mirror` exit 4
//!   (storage failure, the README's table) naming the URL, print no secret, and no step ran
//!   (the first step, which writes a file, did not).
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{DEMO_RUN_ID, bin, text};
use transcript_nats::testing::{self, ServerNode};

/// A JetStream server reading `conf` (written to `dir/server.conf`), or `None` to skip when
/// nats-server is absent (a failure under `CI=true`).
pub fn server_with_config(dir: &Path, conf: &str) -> Option<ServerNode> {
    let path = dir.join("server.conf");
    std::fs::write(&path, conf).unwrap();
    testing::single_with(&["-c", path.to_str().unwrap()]).unwrap()
}

/// A workflow: `first` writes `ran.txt` into the workspace (through the tools router, so the
/// local audit trail records it), `wait` blocks until the test writes a line to `fifo`.
fn gate(dir: &Path) -> (PathBuf, PathBuf) {
    // In the workspace: a confined step (#56) opens nothing outside it.
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let fifo = dir.join("ws").join("gate.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let workflow = dir.join("gate.yaml");
    std::fs::write(
        &workflow,
        "name: gate\ninputs:\n  - name: fifo\nsteps:\n  - name: first\n    type: operation\n    tool: write_file\n    input: { path: ran.txt, content: \"first step ran\" }\n  - name: wait\n    type: command\n    command: 'read line < \"$FIFO\"; echo \"got $line\"'\n    env: { FIFO: \"{{inputs.fifo}}\" }\n",
    )
    .unwrap();
    (workflow, fifo)
}

fn run_command(url: &str, dir: &Path, env: &[(&str, String)]) -> (Command, PathBuf) {
    let (workflow, fifo) = gate(dir);
    let mut c = with_env(bin(), env);
    c.current_dir(dir)
        .args(["run", "--deterministic", "--storage", url])
        .arg(&workflow)
        .arg("--input")
        .arg(format!("fifo={}", fifo.display()))
        .arg("--workspace")
        .arg(dir.join("ws"));
    (c, fifo)
}

/// `c` with exactly the NATS credentials of `env` (none inherited from the test's own).
fn with_env(mut c: Command, env: &[(&str, String)]) -> Command {
    for name in [
        "NATS_CREDS",
        "NATS_USER",
        "NATS_PASSWORD",
        "NATS_TOKEN",
        "NATS_CA",
        "NATS_CERT",
        "NATS_KEY",
    ] {
        c.env_remove(name);
    }
    c.envs(env.iter().map(|(k, v)| (*k, v)));
    c
}

/// Every descendant of `root` (itself included), from the parent ids in `/proc/*/stat`.
fn process_tree(root: u32) -> BTreeSet<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid …": comm may hold spaces and parentheses; split after the last ')'.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        parents.push((pid, ppid));
    }
    let mut tree = BTreeSet::from([root]);
    loop {
        let before = tree.len();
        for (pid, ppid) in &parents {
            if tree.contains(ppid) {
                tree.insert(*pid);
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

/// Asserts that no secret occurs in `bytes` (`what` names them in the failure).
pub fn assert_no_secret(bytes: &[u8], secrets: &[Vec<u8>], what: &str) {
    for secret in secrets {
        assert!(!secret.is_empty());
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_slice()),
            "a secret ({:?}…) is in {what}",
            String::from_utf8_lossy(&secret[..secret.len().min(6)])
        );
    }
}

/// Every regular file under `dir` (FIFOs and symlinks skipped).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.is_dir() {
            out.extend(files(&entry.path()));
        } else if meta.is_file() {
            out.push(entry.path());
        }
    }
    out
}

/// With `env`, the store at `url` records a run and serves `list` and `mirror`; no secret in
/// any process's argv, in any output or in any file left behind.
pub fn accepted(url: &str, env: &[(&str, String)], secrets: &[Vec<u8>]) {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, fifo) = run_command(url, tmp.path(), env);
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Opening the FIFO for writing returns once the `wait` step has opened it: the run (and
    // its shell) is alive now. Bounded: a run that never gets there fails the test.
    let (tx, rx) = std::sync::mpsc::channel();
    let fifo_path = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::OpenOptions::new().write(true).open(&fifo_path));
    });
    let Ok(writer) = rx.recv_timeout(Duration::from_secs(60)) else {
        let out = crate::common::finish(child, Duration::from_secs(1), "the run");
        panic!("the step never started: {}", text(&out.stderr));
    };
    let tree = process_tree(child.id());
    assert!(
        tree.len() >= 2,
        "the step's shell is a descendant: {tree:?}"
    );
    for pid in &tree {
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            assert_no_secret(&cmdline, secrets, &format!("/proc/{pid}/cmdline"));
        }
    }
    writeln!(writer.unwrap(), "go").unwrap();
    let out = crate::common::finish(child, Duration::from_secs(60), "the run");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        tmp.path().join("ws/ran.txt").is_file(),
        "the first step ran"
    );
    assert!(
        tmp.path().join("storage/transcripts/audit.jsonl").is_file(),
        "the local audit trail was written (and is scanned below)"
    );
    assert_no_secret(&out.stdout, secrets, "run's stdout");
    assert_no_secret(&out.stderr, secrets, "run's stderr");

    let list = with_env(bin(), env)
        .current_dir(tmp.path())
        .args(["list", "--storage", url])
        .output()
        .unwrap();
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert!(
        text(&list.stdout).contains(DEMO_RUN_ID),
        "{}",
        text(&list.stdout)
    );
    assert_no_secret(&list.stdout, secrets, "list's stdout");
    assert_no_secret(&list.stderr, secrets, "list's stderr");

    let mirror = with_env(bin(), env)
        .current_dir(tmp.path())
        .args(["mirror", url, "--to"])
        .arg(tmp.path().join("mirror"))
        .output()
        .unwrap();
    assert!(mirror.status.success(), "{}", text(&mirror.stderr));
    let mirrored = tmp
        .path()
        .join("mirror")
        .join(format!("{DEMO_RUN_ID}.jsonl"));
    let transcript = std::fs::read_to_string(&mirrored).unwrap();
    assert!(transcript.contains("got go"), "{transcript}");
    assert_no_secret(&mirror.stdout, secrets, "mirror's stdout");
    assert_no_secret(&mirror.stderr, secrets, "mirror's stderr");
    for file in files(tmp.path()) {
        assert_no_secret(
            &std::fs::read(&file).unwrap(),
            secrets,
            &file.display().to_string(),
        );
    }
}

/// With `env` (a wrong or missing credential), `run` and `list` fail with exit 4 naming the
/// URL, print no secret, and no step runs.
pub fn refused(url: &str, env: &[(&str, String)], secrets: &[Vec<u8>]) {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, _fifo) = run_command(url, tmp.path(), env);
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = crate::common::finish(child, Duration::from_secs(60), "the run");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(url), "the URL is named: {stderr}");
    assert_no_secret(&out.stdout, secrets, "run's stdout");
    assert_no_secret(&out.stderr, secrets, "run's stderr");
    assert!(
        !tmp.path().join("ws/ran.txt").exists(),
        "no step ran: {stderr}"
    );
    let list = with_env(bin(), env)
        .current_dir(tmp.path())
        .args(["list", "--storage", url])
        .output()
        .unwrap();
    assert_eq!(list.status.code(), Some(4), "{}", text(&list.stderr));
    assert!(text(&list.stderr).contains(url), "{}", text(&list.stderr));
    assert_no_secret(&list.stdout, secrets, "list's stdout");
    assert_no_secret(&list.stderr, secrets, "list's stderr");
    let mirror = with_env(bin(), env)
        .current_dir(tmp.path())
        .args(["mirror", url, "--to"])
        .arg(tmp.path().join("mirror"))
        .output()
        .unwrap();
    assert_eq!(mirror.status.code(), Some(4), "{}", text(&mirror.stderr));
    assert!(
        text(&mirror.stderr).contains(url),
        "{}",
        text(&mirror.stderr)
    );
    assert_no_secret(&mirror.stdout, secrets, "mirror's stdout");
    assert_no_secret(&mirror.stderr, secrets, "mirror's stderr");
    for file in files(tmp.path()) {
        assert_no_secret(
            &std::fs::read(&file).unwrap(),
            secrets,
            &file.display().to_string(),
        );
    }
}
