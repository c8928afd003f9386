//! `transcript mirror` over a run whose events were removed from the stream (what its
//! `max_age`/`max_bytes` limits do, here one message deleted through JetStream's API): the
//! run is named on stderr with the gap, its file keeps the lines before it, the other runs are
//! mirrored all the same, and the exit code is 4; a second mirror is not stuck on the gap.
//! With `--follow` the run is named as found and mirroring goes on.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{DEMO_RUN_ID, bin, text};
use transcript_nats::{NatsStore, StorageUrl, StreamOptions, testing};

fn workflow(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("three.yaml");
    std::fs::write(
        &path,
        "name: three\nsteps:\n  - name: a\n    type: command\n    command: 'echo a'\n  - name: b\n    type: command\n    command: 'echo b'\n",
    )
    .unwrap();
    path
}

/// The stored lines of `run` (what its mirrored file must hold).
fn stream_lines(url: &str, run: &str) -> Vec<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = NatsStore::connect(&StorageUrl::parse(url).unwrap(), StreamOptions::default())
            .await
            .unwrap();
        let id = transcript_domain::RunId::parse(run).unwrap();
        store.run_lines(id).await.unwrap().concat()
    })
}

fn delete_stream_message(url: &str, seq: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = NatsStore::connect(&StorageUrl::parse(url).unwrap(), StreamOptions::default())
            .await
            .unwrap();
        let stream = store.jetstream().get_stream("TRANSCRIPTS").await.unwrap();
        assert!(stream.delete_message(seq).await.unwrap());
    });
}

#[test]
fn a_run_with_events_removed_is_named_and_the_others_are_mirrored() {
    let Some(server) = testing::single().unwrap() else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let wf = workflow(tmp.path());
    let run = |deterministic: bool| {
        let mut c = bin();
        c.current_dir(tmp.path()).arg("run").arg(&wf);
        if deterministic {
            c.arg("--deterministic");
        }
        let o = c
            .args(["--storage", &url, "--workspace"])
            .arg(tmp.path().join("ws"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("run_id: ").map(str::to_owned))
            .unwrap()
    };
    // The first run's events are stream messages 1..; its second one is removed.
    assert_eq!(run(true), DEMO_RUN_ID);
    let full = stream_lines(&url, DEMO_RUN_ID);
    delete_stream_message(&url, 2);
    let other = run(false);
    let other_lines = stream_lines(&url, &other);

    let dir = tmp.path().join("mirror");
    let o = bin()
        .args(["mirror", &url, "--to"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!("run {DEMO_RUN_ID} is incomplete")),
        "{stderr}"
    );
    assert!(stderr.contains("line 3 follows line 1"), "{stderr}");
    assert!(
        text(&o.stdout).contains("mirrored 2 runs"),
        "{}",
        text(&o.stdout)
    );
    let first_line = full.split_inclusive(|b| *b == b'\n').next().unwrap();
    assert_eq!(
        std::fs::read(dir.join(format!("{DEMO_RUN_ID}.jsonl"))).unwrap(),
        first_line
    );
    assert_eq!(
        std::fs::read(dir.join(format!("{other}.jsonl"))).unwrap(),
        other_lines
    );
    // Not stuck: a second mirror has nothing to do.
    let o = bin()
        .args(["mirror", &url, "--to"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("0 lines written"),
        "{}",
        text(&o.stdout)
    );

    // --follow into a fresh directory (so with a consumer of its own): the run is named as found, the other run is mirrored,
    // and the mirror is still running.
    let dir2 = tmp.path().join("follow");
    let mut child = bin()
        .args([
            "mirror",
            &url,
            "--follow",
            "--consumer",
            "second-mirror",
            "--to",
        ])
        .arg(&dir2)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let named = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(
        named.contains(&format!("run {DEMO_RUN_ID} is incomplete")),
        "{named}"
    );
    // The other run's file is complete once its last line is there (bounded poll).
    let other_file = dir2.join(format!("{other}.jsonl"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read(&other_file).unwrap_or_default() != other_lines {
        assert!(
            std::time::Instant::now() < deadline,
            "the other run was not mirrored"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(child.try_wait().unwrap().is_none(), "--follow goes on");
    child.kill().unwrap();
    child.wait().unwrap();
}
