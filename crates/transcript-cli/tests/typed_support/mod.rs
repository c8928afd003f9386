//! Shared by the `typed_values*` tests (issue #48): a sandbox (a temporary directory holding
//! the workflow, the workspace `ws/`, the storage `st/`, a home `home/` and the marker path
//! `MARK`, which is *outside* the workspace), the binary run on it with a bound, and readers of
//! what the run recorded.
#![allow(dead_code, clippy::unwrap_used)]

pub mod attack;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// How long one run may take before it is killed and reported as hanging.
pub const LIMIT: Duration = Duration::from_secs(60);

/// A temporary directory for one run.
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    /// A fresh sandbox with an empty workspace and home.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Self { dir }
    }

    /// The sandbox's directory (`@D@`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The run's workspace.
    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    /// The run's storage.
    pub fn st(&self) -> PathBuf {
        self.dir.path().join("st")
    }

    /// The marker a payload creates when it runs: outside the workspace.
    pub fn marker(&self) -> PathBuf {
        self.dir.path().join("MARK")
    }

    /// `text` with `@M@` (the marker) and `@D@` (the sandbox) filled in.
    pub fn fill(&self, text: &str) -> String {
        text.replace("@M@", &self.marker().display().to_string())
            .replace("@D@", &self.dir.path().display().to_string())
    }

    /// Writes `wf.yaml` (and `child.yaml` beside it) with `@M@`/`@D@` filled in.
    pub fn write_workflow(&self, wf: &str, child: Option<&str>) -> PathBuf {
        let path = self.dir.path().join("wf.yaml");
        std::fs::write(&path, self.fill(wf)).unwrap();
        if let Some(child) = child {
            std::fs::write(self.dir.path().join("child.yaml"), self.fill(child)).unwrap();
        }
        path
    }

    /// Writes a file in the workspace.
    pub fn ws_file(&self, name: &str, contents: &str) {
        std::fs::write(self.ws().join(name), contents).unwrap();
    }

    /// A git repository in the workspace with two commits (the second adds `data.txt`).
    pub fn git_repo(&self) {
        let ws = self.ws();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .current_dir(&ws)
                .env("HOME", self.dir.path().join("home"))
                .args(["-c", "user.email=a@b", "-c", "user.name=a"])
                .args(args)
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "."]);
        git(&["commit", "-q", "--allow-empty", "-m", "one"]);
        if !ws.join("data.txt").exists() {
            std::fs::write(ws.join("data.txt"), "a\nb\n").unwrap();
        }
        git(&["add", "data.txt"]);
        git(&["commit", "-q", "-m", "two"]);
    }

    /// `transcript run wf.yaml` with these `--input`s and extra arguments, bounded by
    /// [`LIMIT`]; `None` when it hung (it is killed).
    pub fn run(&self, inputs: &[(&str, &str)], extra: &[&str]) -> Option<Output> {
        let mut cmd = self.command(inputs, extra);
        bounded(&mut cmd)
    }

    /// The `transcript run` command [`Sandbox::run`] runs.
    pub fn command(&self, inputs: &[(&str, &str)], extra: &[&str]) -> Command {
        let mut cmd = super::common::bin();
        cmd.arg("run")
            .arg(self.dir.path().join("wf.yaml"))
            .arg("--workspace")
            .arg(self.ws())
            .arg("--storage")
            .arg(self.st())
            .args(extra)
            .env("HOME", self.dir.path().join("home"))
            .env("TRANSCRIPT_CLAUDE_BIN", "/bin/false")
            .env("TRANSCRIPT_CODEX_BIN", "/bin/false")
            .env("TRANSCRIPT_GEMINI_BIN", "/bin/false");
        for (k, v) in inputs {
            cmd.arg("--input").arg(format!("{k}={}", self.fill(v)));
        }
        cmd
    }

    /// Every event of every run transcript in the storage.
    pub fn events(&self) -> Vec<Value> {
        let mut events = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.st()) else {
            return events;
        };
        for path in entries.map(|e| e.unwrap().path()) {
            let transcript = path.extension().is_some_and(|x| x == "jsonl")
                && path.file_name().is_some_and(|n| n != "audit.jsonl");
            if transcript {
                let text = std::fs::read_to_string(path).unwrap();
                events.extend(
                    text.lines()
                        .map(|l| serde_json::from_str::<Value>(l).unwrap()),
                );
            }
        }
        events
    }

    /// The recorded output of step `name` (its first completion): a command's stdout, an
    /// agent's answer.
    pub fn stdout_of(&self, name: &str) -> Option<String> {
        self.events()
            .iter()
            .filter(|e| e["type"] == "step.completed" && e["payload"]["name"] == name)
            .find_map(|e| {
                let result = &e["payload"]["result"];
                result["stdout"]
                    .as_str()
                    .or(result.as_str())
                    .map(str::to_owned)
            })
    }

    /// The run id `transcript run` printed.
    pub fn run_id(out: &Output) -> String {
        super::common::printed_run_id(&super::common::text(&out.stdout))
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs `cmd` (stdin closed) and waits at most [`LIMIT`]; past it the process is SIGKILLed by
/// its pid and `None` returned.
pub fn bounded(cmd: &mut Command) -> Option<Output> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(out) => Some(out.unwrap()),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            None
        }
    }
}

/// The last non-empty line of `stderr` (the run's error).
pub fn last_line(out: &Output) -> String {
    super::common::text(&out.stderr)
        .trim()
        .lines()
        .last()
        .unwrap_or("")
        .to_owned()
}

/// `text` indented by `by` spaces, line by line.
pub fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines().map(|l| format!("{pad}{l}\n")).collect()
}
