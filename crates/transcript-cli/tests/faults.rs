//! Faults as inputs, through the binary: a full disk, secrets in failure messages, unbounded
//! and hostile inputs. Every case asserts the exit code, that the message names the cause, that
//! the files on disk validate, and that nothing acknowledged is missing.
//!
//! The full-disk cases mount a small tmpfs, which needs root (CI runs as root); elsewhere they
//! say they are skipped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, repo, text};

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Leaves `free` bytes (about) on the disk.
    fn fill_leaving(&self, free: u64) {
        let stat = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(self.path())
            .output()
            .unwrap();
        let avail: u64 = text(&stat.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let fill = avail.saturating_sub(free);
        std::fs::write(self.path().join("filler"), vec![0u8; fill as usize]).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Under CI=true (CI runs as root) a skip is a failure.
fn require_mount() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

fn transcripts(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .and_then(|n| n.strip_suffix(".jsonl"))
                        .is_some_and(|s| transcript_domain::RunId::parse(s).is_ok())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The progress lines on stderr name events only after they are written (write, then
/// broadcast): every `seq` shown for the root run must be in its file.
fn shown_seqs(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter(|l| !l.starts_with('[') && !l.starts_with("transcript:"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn a_full_disk_fails_the_run_with_its_cause_and_keeps_what_was_written_valid() {
    let Some(disk) = SmallDisk::mount("64k") else {
        assert!(!require_mount(), "CI runs as root: the tmpfs must mount");
        return;
    };
    let storage = disk.path().join("st");
    std::fs::create_dir(&storage).unwrap();
    disk.fill_leaving(12 * 1024);
    let work = tempfile::tempdir().unwrap();
    let out = bin()
        .current_dir(repo())
        .args([
            "run",
            "fixtures/workflows/demo.yaml",
            "--color",
            "never",
            "--storage",
        ])
        .arg(&storage)
        .arg("--workspace")
        .arg(work.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "storage failure: {stderr}");
    assert!(
        stderr.contains("No space left on device") || stderr.contains("os error 28"),
        "the cause is named: {stderr}"
    );
    assert!(
        !stderr.contains(" succeeded"),
        "never reports success: {stderr}"
    );
    let incomplete = stderr
        .matches("error: the transcript is incomplete")
        .count();
    assert_eq!(incomplete, 1, "reported once: {stderr}");
    // What is on disk validates, and holds every event the progress view showed.
    let root = transcripts(&storage)
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(p)
                .map(|t| {
                    t.lines()
                        .next()
                        .is_some_and(|l| !l.contains("parent_run_id"))
                })
                .unwrap_or(false)
        })
        .expect("the root transcript exists");
    let lines = std::fs::read_to_string(&root).unwrap();
    for (i, line) in lines.lines().enumerate() {
        let decoded = transcript_domain::decode_str(line).unwrap();
        assert_eq!(decoded.event.seq, i as u64 + 1, "gapless from 1");
    }
    let written = lines.lines().count() as u64;
    for seq in shown_seqs(&stderr) {
        assert!(
            seq <= written,
            "seq {seq} was shown but not written ({written} lines)"
        );
    }
    let v = bin().arg("validate").arg(&root).output().unwrap();
    assert!(!text(&v.stdout).contains("INVALID"), "{}", text(&v.stdout));
}

#[test]
fn a_full_disk_during_import_writes_nothing_invalid() {
    let Some(disk) = SmallDisk::mount("64k") else {
        assert!(!require_mount(), "CI runs as root: the tmpfs must mount");
        return;
    };
    let storage = disk.path().join("st");
    std::fs::create_dir(&storage).unwrap();
    // A Claude stream-json capture of our own, repeated until it is larger than the disk.
    let one = std::fs::read_to_string(
        repo().join("fixtures/providers/claude/scenario-stream-json.jsonl"),
    )
    .unwrap();
    let input = tempfile::NamedTempFile::new().unwrap();
    let body: String = std::iter::repeat_n(one.as_str(), 200).collect();
    std::fs::write(input.path(), body).unwrap();
    disk.fill_leaving(8 * 1024);
    let out = bin()
        .args(["import", "claude"])
        .arg(input.path())
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("No space left on device") || stderr.contains("os error 28"),
        "the cause is named: {stderr}"
    );
    for file in transcripts(&storage) {
        let v = bin().arg("validate").arg(&file).output().unwrap();
        assert!(!text(&v.stdout).contains("INVALID"), "{}", text(&v.stdout));
    }
}

#[test]
fn messages_about_a_redacted_run_are_masked_too() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH";
    let wf = dir.path().join("leak.yaml");
    std::fs::write(
        &wf,
        format!("name: leak\nsteps:\n  - name: fail\n    type: command\n    command: \"echo key={secret} >&2; exit 3\"\n"),
    )
    .unwrap();
    let storage = dir.path().join("s");
    let out = bin()
        .args(["run", "--redact", "--color", "never", "--storage"])
        .arg(&storage)
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("sk-ant-"),
        "the kind stays visible: {stderr}"
    );
    assert!(!stderr.contains("AAAABBBB"), "secret on stderr: {stderr}");
    for file in std::fs::read_dir(&storage).unwrap() {
        let body = std::fs::read_to_string(file.unwrap().path()).unwrap();
        assert!(!body.contains("AAAABBBB"), "secret on disk");
    }
}

#[test]
fn validate_refuses_what_is_not_a_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, vec![b'x'; 3 * 1024 * 1024]).unwrap();
    for file in [&empty, &junk] {
        let out = bin().arg("validate").arg(file).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {}",
            file.display(),
            text(&out.stdout)
        );
        assert!(
            text(&out.stdout).contains("INVALID"),
            "{}",
            text(&out.stdout)
        );
    }
}
