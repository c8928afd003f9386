//! A path is a file whatever the storage (#52 item 2): with `TRANSCRIPT_STORAGE=nats://…` (or
//! `--storage nats://…`), every command taking a run reads a transcript file path (or a
//! directory, where it takes one) as it does with a storage directory, byte for byte the same
//! output, without connecting to NATS; a path beside run ids of the store reads both.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Output;

use common::{DEMO_RUN_ID, bin, demo_command, text};
use transcript_nats::testing;

fn out(o: &Output) -> (Option<i32>, String, String) {
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

#[test]
fn every_command_taking_a_run_reads_a_transcript_path_on_nats_storage() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    let o = demo_command(&files, &tmp.path().join("ws"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let file = format!("files/{DEMO_RUN_ID}.jsonl");
    let commands: [&[&str]; 12] = [
        &["validate", &file],
        &["validate", "files"],
        &["validate", "--json", &file],
        &["tree", &file],
        &["show", &file],
        &["stats", &file],
        &["stats", "files"],
        &["export", &file, "--format", "json"],
        &["export", &file, "--format", "markdown"],
        &["receipts", &file],
        &["tail", &file],
        &["tail", "-f", &file],
    ];
    // The servers hold no transcript store: a command that connected would fail (exit 4).
    for args in commands {
        let on_files = bin()
            .current_dir(tmp.path())
            .args(args)
            .args(["--storage", "files"])
            .output()
            .unwrap();
        assert_eq!(
            on_files.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&on_files.stderr)
        );
        let on_nats = bin()
            .current_dir(tmp.path())
            .env("TRANSCRIPT_STORAGE", &url)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out(&on_nats), out(&on_files), "{args:?}");
        let flag = bin()
            .current_dir(tmp.path())
            .args(args)
            .args(["--storage", &url])
            .output()
            .unwrap();
        assert_eq!(out(&flag), out(&on_files), "{args:?}");
    }
    assert_eq!(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(testing::stream_names(&url))
            .unwrap(),
        Vec::<String>::new(),
        "no command connected and created anything"
    );

    // A missing transcript is named by its path, as on files, not looked up as a run.
    let o = bin()
        .current_dir(tmp.path())
        .env("TRANSCRIPT_STORAGE", &url)
        .args(["show", "files/missing.jsonl"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("files/missing.jsonl"),
        "{}",
        text(&o.stderr)
    );

    // A path beside a run id of the store: validate reads both.
    let o = demo_command(Path::new(&url), &tmp.path().join("ws2"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = bin()
        .current_dir(tmp.path())
        .env("TRANSCRIPT_STORAGE", &url)
        .args(["validate", &file, DEMO_RUN_ID])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains(&file), "{stdout}");
    // The file and its two child runs, then the stored run and its two.
    assert_eq!(stdout.matches(": ok (").count(), 6, "{stdout}");
}
