//! `tree` on something that is not a transcript (#42 item 6) says what is wrong and exits 3,
//! as `validate` does, instead of drawing a placeholder run `00000000-… ? incomplete`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{bin, text};

/// Runs `tree` (text and `--json`) on `target`; both must exit 3 naming the file, with no tree
/// on stdout.
fn assert_rejected(target: &Path) {
    for json in [false, true] {
        let mut cmd = bin();
        cmd.args(["tree", "--color", "never"]).arg(target);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(
            out.status.code(),
            Some(3),
            "{} (json {json}): stdout {stdout:?} stderr {stderr:?}",
            target.display()
        );
        assert!(stdout.is_empty(), "a tree was printed: {stdout}");
        assert!(!stdout.contains("00000000-0000-0000-0000-000000000000"));
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            stderr.contains(&name) && stderr.contains("not a transcript"),
            "stderr does not say what is wrong with {name}: {stderr}"
        );
    }
}

#[test]
fn tree_rejects_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.jsonl");
    std::fs::write(&file, "").unwrap();
    assert_rejected(&file);
}

#[test]
fn tree_rejects_json_that_is_not_events() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("package.json");
    std::fs::write(
        &file,
        "{\"name\": \"x\", \"version\": \"1.0.0\"}\n[1, 2, 3]\n",
    )
    .unwrap();
    assert_rejected(&file);
}

#[test]
fn tree_rejects_binary_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("garbage.bin");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&file, bytes).unwrap();
    assert_rejected(&file);
}

#[test]
fn tree_rejects_a_directory_with_no_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("notes");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("readme.txt"), "hello\n").unwrap();
    assert_rejected(&sub);
}

#[test]
fn tree_still_draws_a_real_run() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let run = common::demo_command(&storage, dir.path()).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let out = bin()
        .args(["tree", "--color", "never", "--storage"])
        .arg(&storage)
        .arg(common::DEMO_RUN_ID)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("run {}", common::DEMO_RUN_ID)));
}
