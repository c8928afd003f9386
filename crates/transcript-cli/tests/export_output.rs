//! `export -o` (issue 28 item 5): the output file is 0600 in every format
//! (whatever the transcript's mode, an existing file's mode or the umask),
//! a symlink at the output path is refused and never followed, and so is
//! anything that is not a regular file (a FIFO fails at once, no hang).
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use common::{DEMO_RUN_ID, bin, demo_command, text};

const FORMATS: [&str; 4] = ["markdown", "json", "html", "otlp-json"];

fn demo(dir: &Path) -> PathBuf {
    let storage = dir.join("transcripts");
    let out = demo_command(&storage, &dir.join("workspace"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    storage
}

fn export(storage: &Path, format: &str, output: &Path) -> std::process::Output {
    bin()
        .args([
            "export",
            DEMO_RUN_ID,
            "--format",
            format,
            "--capture-content",
            "-o",
        ])
        .arg(output)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn every_format_writes_0600_files() {
    let dir = tempfile::tempdir().unwrap();
    let storage = demo(dir.path());
    // A transcript someone made world-readable does not widen the export.
    let transcript = storage.join(format!("{DEMO_RUN_ID}.jsonl"));
    std::fs::set_permissions(&transcript, std::fs::Permissions::from_mode(0o644)).unwrap();
    for format in FORMATS {
        let fresh = dir.path().join(format!("fresh.{format}"));
        let out = export(&storage, format, &fresh);
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        assert_eq!(mode(&fresh), 0o600, "{format}: a new file");
        assert!(std::fs::metadata(&fresh).unwrap().len() > 0, "{format}");

        let existing = dir.path().join(format!("existing.{format}"));
        std::fs::write(&existing, "old content that is much longer than nothing").unwrap();
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o666)).unwrap();
        let out = export(&storage, format, &existing);
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        assert_eq!(mode(&existing), 0o600, "{format}: an existing file");
        assert_eq!(
            std::fs::read(&existing).unwrap(),
            std::fs::read(&fresh).unwrap(),
            "{format}: the old content is gone"
        );
    }
}

#[test]
fn a_symlink_at_the_output_path_is_refused_and_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let storage = demo(dir.path());
    for format in FORMATS {
        // To an existing file: it keeps its content and mode.
        let victim = dir.path().join(format!("victim.{format}"));
        std::fs::write(&victim, "precious").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join(format!("link.{format}"));
        symlink(&victim, &link).unwrap();
        let out = export(&storage, format, &link);
        assert!(!out.status.success(), "{format}: followed the symlink");
        assert!(
            text(&out.stderr).contains(link.to_str().unwrap()),
            "{format}: the error names the path: {}",
            text(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious",
            "{format}"
        );
        assert_eq!(mode(&victim), 0o644, "{format}");

        // Dangling: nothing is created at its target.
        let target = dir.path().join(format!("planted.{format}"));
        let dangling = dir.path().join(format!("dangling.{format}"));
        symlink(&target, &dangling).unwrap();
        let out = export(&storage, format, &dangling);
        assert!(!out.status.success(), "{format}");
        assert!(!target.exists(), "{format}: created the symlink's target");
    }
}

#[test]
fn a_fifo_or_a_directory_at_the_output_path_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let storage = demo(dir.path());
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let a_dir = dir.path().join("adir");
    std::fs::create_dir(&a_dir).unwrap();
    for format in FORMATS {
        for path in [&fifo, &a_dir] {
            // No reader on the FIFO: an open without O_NONBLOCK would hang,
            // so coreutils' timeout bounds the attempt (exit 124).
            let out = std::process::Command::new("timeout")
                .arg("20")
                .arg(env!("CARGO_BIN_EXE_transcript"))
                .args(["export", DEMO_RUN_ID, "--format", format, "-o"])
                .arg(path)
                .arg("--storage")
                .arg(&storage)
                .output()
                .unwrap();
            assert_ne!(
                out.status.code(),
                Some(124),
                "{format}: hung on {}",
                path.display()
            );
            assert!(!out.status.success(), "{format} {}", path.display());
        }
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo_like());
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_fifo()
    }
}

#[test]
fn a_file_with_other_hard_links_is_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let storage = demo(dir.path());
    let elsewhere = dir.path().join("elsewhere.txt");
    std::fs::write(&elsewhere, "precious").unwrap();
    let linked = dir.path().join("linked.md");
    std::fs::hard_link(&elsewhere, &linked).unwrap();
    for format in FORMATS {
        let out = export(&storage, format, &linked);
        assert!(!out.status.success(), "{format}: wrote through a hard link");
        assert_eq!(
            std::fs::read_to_string(&elsewhere).unwrap(),
            "precious",
            "{format}"
        );
    }
}
