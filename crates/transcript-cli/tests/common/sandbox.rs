//! The layout and probes of the containment tests (#56): a workspace, a storage and an
//! outside directory holding a secret, side by side; what a run wrote, searched for it.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use super::{bin, describe, text};

/// A run's layout: the workspace, the storage and an outside directory holding the secret,
/// side by side in one temporary directory.
pub struct Layout {
    _root: tempfile::TempDir,
    /// The workspace.
    pub ws: PathBuf,
    /// The storage (beside the workspace).
    pub storage: PathBuf,
    /// Outside both: holds `secret.txt`.
    pub outside: PathBuf,
}

pub const SECRET: &str = "TOPSECRET-4f9a1c-do-not-leak";

impl Layout {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let (ws, storage, outside) = (base.join("ws"), base.join("storage"), base.join("outside"));
        for d in [&ws, &storage, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        Self {
            _root: root,
            ws,
            storage,
            outside,
        }
    }

    pub fn secret(&self) -> String {
        self.outside.join("secret.txt").display().to_string()
    }

    pub fn marker(&self) -> String {
        self.outside.join("MARKER").display().to_string()
    }

    /// Runs `workflow`, written to `file`, from the workspace (the default workspace) into
    /// `storage`, with `args`.
    pub fn run_at(&self, file: &Path, workflow: &str, storage: &Path, args: &[&str]) -> Output {
        std::fs::write(file, workflow).unwrap();
        bin()
            .current_dir(&self.ws)
            .arg("run")
            .arg(file)
            .arg("--storage")
            .arg(storage)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `workflow` (written into the workspace's parent) with `args`.
    pub fn run(&self, workflow: &str, args: &[&str]) -> Output {
        let file = self.ws.parent().unwrap().join("wf.yaml");
        std::fs::write(&file, workflow).unwrap();
        bin()
            .current_dir(&self.ws)
            .arg("run")
            .arg(&file)
            .arg("--storage")
            .arg(&self.storage)
            .arg("--workspace")
            .arg(&self.ws)
            .args(if args.contains(&"--sandbox") {
                &[][..]
            } else {
                &["--sandbox", "on"][..]
            })
            .args(args)
            .output()
            .unwrap()
    }

    /// Every byte the run wrote: the storage (transcripts, audit), the workspace, stdout and
    /// stderr.
    pub fn everything(&self, out: &Output) -> String {
        let mut all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        for dir in [&self.storage, &self.ws] {
            for entry in walk(dir) {
                all.push_str(&String::from_utf8_lossy(
                    &std::fs::read(entry).unwrap_or_default(),
                ));
            }
        }
        all
    }

    /// The run left nothing outside and read nothing of the secret.
    pub fn assert_contained(&self, what: &str, out: &Output) {
        assert!(
            !Path::new(&self.marker()).exists(),
            "{what}: a marker was written outside the workspace\n{}",
            describe(out)
        );
        let all = self.everything(out);
        assert!(
            !all.contains(SECRET) && !all.contains(&SECRET[..12]),
            "{what}: the secret outside the workspace was read\n{}",
            describe(out)
        );
    }
}

pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        let kind = e.file_type().unwrap();
        if kind.is_dir() {
            out.extend(walk(&p));
        } else if kind.is_file() {
            out.push(p);
        }
    }
    out
}

/// The shell payload: copy the secret into the workspace and touch the marker outside.
pub fn sh_payload(l: &Layout) -> String {
    format!(
        "cat {s} > leak.txt; cat {s}; touch {m}; cp {s} {m} ; echo ran",
        s = l.secret(),
        m = l.marker()
    )
}

/// Quotes `s` as a YAML double-quoted scalar.
pub fn yq(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

pub fn events(storage: &Path) -> Vec<Value> {
    walk(storage)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

pub fn step_event(storage: &Path, step: &str, kind: &str) -> Value {
    events(storage)
        .into_iter()
        .find(|e| e["type"] == kind && e["path"] == step)
        .unwrap_or_else(|| panic!("no {kind} for {step}"))
}

pub fn step_started(storage: &Path, step: &str) -> Value {
    step_event(storage, step, "step.started")
}

pub fn step_completed(storage: &Path, step: &str) -> Value {
    step_event(storage, step, "step.completed")
}
