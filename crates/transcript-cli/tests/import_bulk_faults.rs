//! A full disk during a store import (issue #29 item 4), on a small tmpfs (root, or
//! passwordless sudo; skipped elsewhere, a failure under `CI=true`): the failed file is
//! named with its cause, the command fails, the index claims only files whose transcripts
//! are whole and durable, no half run is left beside them (one that the next import would
//! duplicate), and a run that was being appended to keeps exactly what it held.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{bin, text};
use serde_json::Value;

/// A tmpfs of `size` on a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
    sudo: bool,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        for sudo in [false, true] {
            let mut cmd = Command::new(if sudo { "sudo" } else { "mount" });
            if sudo {
                cmd.args(["-n", "mount"]);
            }
            let mounted = cmd
                .args([
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={size},mode=1777"),
                    "tmpfs",
                ])
                .arg(dir.path())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if mounted {
                return Some(Self { dir, sudo });
            }
        }
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI (root or passwordless sudo) the tmpfs must mount"
        );
        eprintln!("skipped: cannot mount a tmpfs here (needs root or passwordless sudo)");
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let mut cmd = Command::new(if self.sudo { "sudo" } else { "umount" });
        if self.sudo {
            cmd.args(["-n", "umount"]);
        }
        let _ = cmd.arg(self.dir.path()).status();
    }
}

/// A Claude Code session `id`: a prompt and a reply of `reply_bytes` bytes of text.
fn session(id: &str, reply_bytes: usize) -> String {
    let reply = "x".repeat(reply_bytes);
    format!(
        r#"{{"type":"user","message":{{"role":"user","content":"Prompt of {id}"}},"uuid":"p-{id}","sessionId":"{id}","parentUuid":null,"timestamp":"2026-01-02T10:00:00.000Z"}}
{{"type":"assistant","requestId":"req_{id}","message":{{"id":"msg_{id}","model":"claude-sonnet-4-5","role":"assistant","content":[{{"type":"text","text":"{reply}"}}],"usage":{{"input_tokens":5,"output_tokens":9}}}},"uuid":"a-{id}","sessionId":"{id}","parentUuid":"p-{id}","timestamp":"2026-01-02T10:00:01.000Z"}}
"#
    )
}

fn import(config: &Path, storage: &Path) -> Output {
    bin()
        .args(["import", "claude", "--store", "--storage"])
        .arg(storage)
        .env("CLAUDE_CONFIG_DIR", config)
        .env_remove("CODEX_HOME")
        .output()
        .unwrap()
}

/// Index key (canonical session path) → run id.
fn indexed(storage: &Path) -> Vec<(String, String)> {
    let Ok(bytes) = std::fs::read(storage.join("import-index.json")) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, e)| (k.clone(), e["run_id"].as_str().unwrap().to_owned()))
        .collect()
}

/// The run ids of the transcripts in `storage`.
fn run_files(storage: &Path) -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(storage)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".jsonl").map(str::to_owned)
        })
        .collect();
    runs.sort();
    runs
}

fn valid(storage: &Path, run: &str) {
    let v = bin()
        .args(["validate", run, "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", text(&v.stdout));
}

fn project(home: &Path) -> (PathBuf, PathBuf) {
    let config = home.join("claude");
    let project = config.join("projects/-work-demo");
    std::fs::create_dir_all(&project).unwrap();
    (config, project)
}

#[test]
fn a_full_disk_fails_the_file_and_the_index_claims_only_whole_durable_runs() {
    let Some(disk) = Tmpfs::mount("256k") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let (config, project) = project(home.path());
    std::fs::write(project.join("a.jsonl"), session("a", 100)).unwrap();
    std::fs::write(project.join("b.jsonl"), session("b", 600 * 1024)).unwrap();
    std::fs::write(project.join("c.jsonl"), session("c", 100)).unwrap();
    let storage = disk.dir.path().join("st");
    let out = import(&config, &storage);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "fails: {stderr}");
    assert!(
        stderr.contains("b.jsonl") && stderr.contains("No space left on device"),
        "names the file and the cause: {stderr}"
    );
    assert!(
        stderr.contains("1 of 3 session files not imported"),
        "{stderr}"
    );
    let index = indexed(&storage);
    let names: Vec<&str> = index
        .iter()
        .map(|(k, _)| k.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(names, ["a.jsonl", "c.jsonl"], "only what was imported");
    let mut runs: Vec<String> = index.iter().map(|(_, r)| r.clone()).collect();
    runs.sort();
    assert_eq!(run_files(&storage), runs, "no half run beside them");
    for run in &runs {
        valid(&storage, run);
    }
    // Once the session fits, the next import takes it, and only it.
    std::fs::write(project.join("b.jsonl"), session("b", 1000)).unwrap();
    let again = import(&config, &storage);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let out = text(&again.stdout);
    assert_eq!(out.matches("\tnew").count(), 1, "{out}");
    assert_eq!(out.matches("\tunchanged").count(), 2, "{out}");
    assert_eq!(run_files(&storage).len(), 3);
}

#[test]
fn a_full_disk_while_appending_leaves_the_run_as_it_was() {
    let Some(disk) = Tmpfs::mount("256k") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let (config, project) = project(home.path());
    let log = project.join("a.jsonl");
    std::fs::write(&log, session("a", 100)).unwrap();
    let storage = disk.dir.path().join("st");
    assert!(import(&config, &storage).status.success());
    let (run, before, index_before) = {
        let index = indexed(&storage);
        let run = index[0].1.clone();
        let bytes = std::fs::read(storage.join(format!("{run}.jsonl"))).unwrap();
        let raw = std::fs::read(storage.join("import-index.json")).unwrap();
        (run, bytes, raw)
    };
    // The session grows by a new prompt (written first) and a reply the disk cannot hold.
    let grown = session("a", 100) + &session("a2", 600 * 1024);
    std::fs::write(&log, &grown).unwrap();
    let out = import(&config, &storage);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("No space left on device"));
    let transcript = storage.join(format!("{run}.jsonl"));
    assert_eq!(std::fs::read(&transcript).unwrap(), before, "as it was");
    assert_eq!(
        std::fs::read(storage.join("import-index.json")).unwrap(),
        index_before,
        "the index still says what the run holds"
    );
    // Once it fits, the new prompt is appended once.
    std::fs::write(&log, session("a", 100) + &session("a2", 1000)).unwrap();
    let again = import(&config, &storage);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let after = std::fs::read_to_string(&transcript).unwrap();
    assert_eq!(after.matches("Prompt of a2").count(), 1, "{after}");
    assert_eq!(run_files(&storage), vec![run.clone()]);
    valid(&storage, &run);
}
