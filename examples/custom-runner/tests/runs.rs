//! The example runs, and what it prints live equals what it reads back.
#![allow(clippy::unwrap_used)]

#[test]
fn the_example_records_a_valid_run_and_sees_every_event_live() {
    let dir = std::env::temp_dir().join(format!("custom-runner-{}", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_custom-runner"))
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("valid = true"), "{stdout}");
    let live = stdout.lines().filter(|l| l.starts_with("live")).count();
    let file = stdout.lines().filter(|l| l.starts_with("file")).count();
    assert_eq!(live, file, "{stdout}");
    assert!(stdout.contains("message.assistant"), "{stdout}");
    let _ = std::fs::remove_dir_all(dir);
}
