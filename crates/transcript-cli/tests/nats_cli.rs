//! The CLI on NATS storage (#44), through the binary against real nats-server processes: the
//! demo recorded to NATS equals the demo recorded to files (mirror byte for byte, every view),
//! `list` from the runs index, `tail -f` from another process, NATS down at start, credentials
//! from the environment only.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{DEMO_RUN_ID, bin, demo_command, text};
use transcript_nats::testing::{self, ServerNode};

fn server() -> Option<ServerNode> {
    testing::single().expect("nats-server")
}

fn ok(mut c: Command) -> Output {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{:?}: {}\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

fn view(storage: &str, args: &[&str]) -> String {
    let mut c = bin();
    c.current_dir(common::repo())
        .args(args)
        .args(["--storage", storage]);
    text(&ok(c).stdout)
}

/// Run files of a directory (not the audit trail), sorted.
fn run_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") && n != "audit.jsonl")
        .collect();
    names.sort();
    names
}

#[test]
fn the_demo_on_nats_equals_the_demo_on_files_mirror_and_views_included() {
    let Some(server) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    let nats = format!("{}/FLEET", server.url());
    ok(demo_command(&files, &tmp.path().join("ws1")));
    let o = ok(demo_command(Path::new(&nats), &tmp.path().join("ws2")));
    assert!(text(&o.stdout).contains(&format!("transcript: {nats}#{DEMO_RUN_ID}")));

    // mirror: the same files, byte for byte (root and child runs).
    let mirror = tmp.path().join("mirror");
    let mut c = bin();
    c.args(["mirror", &nats, "--to"]).arg(&mirror);
    let o = ok(c);
    assert!(
        text(&o.stdout).contains("mirrored 3 runs"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(run_files(&files), run_files(&mirror));
    assert_eq!(run_files(&files).len(), 3);
    for name in run_files(&files) {
        assert_eq!(
            text(&std::fs::read(files.join(&name)).unwrap()),
            text(&std::fs::read(mirror.join(&name)).unwrap()),
            "{name}"
        );
    }

    // Every view reads the same run, by id, prefix or `latest`, child runs included.
    let files = files.display().to_string();
    for args in [
        &["tree", "--json", "latest"][..],
        &["tree", "00000000-0000-4000-8000-000000000001"],
        &["show", "latest"],
        &["stats", "--json", "latest"],
        &["export", "--format", "json", "latest"],
        &["export", "--format", "markdown", "latest"],
        &["receipts", "--json", "latest"],
        &["receipts", "--by", "model", "--json"],
        &["receipts", "--by", "day"],
        &["receipts", "--by", "month", "--json"],
        &["receipts", "--by", "session", "--json"],
        &["receipts", "--by", "project"],
        &["tail", "latest"],
        &["list", "--all"],
    ] {
        assert_eq!(view(&nats, args), view(&files, args), "{args:?}");
    }
    // The whole store, named by its URL as a directory is by its path (the read port).
    assert_eq!(
        view(&nats, &["stats", "--json", &nats]),
        view(&files, &["stats", "--json", &files])
    );
    let mut c = bin();
    c.args(["validate", "latest", &nats, "--storage", &nats]);
    ok(c);

    // Fleet-wide receipts come from the runs index: with every stream message purged, the
    // same receipts still (the stream is not read).
    let by_model = view(&nats, &["receipts", "--by", "model", "--json"]);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let url = transcript_nats::StorageUrl::parse(&nats).unwrap();
            let store = transcript_nats::NatsStore::connect(&url, Default::default())
                .await
                .unwrap();
            let stream = store.jetstream().get_stream("FLEET").await.unwrap();
            stream.purge().await.unwrap();
        });
    assert_eq!(
        view(&nats, &["receipts", "--by", "model", "--json"]),
        by_model
    );
    assert!(!by_model.contains("\"groups\": []"), "{by_model}");
}

#[test]
fn tail_f_from_another_process_replays_then_follows_live() {
    let Some(server) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let nats = server.url();
    // Started before the run exists: it says it waits, then follows.
    let mut tail = bin()
        .args([
            "tail",
            "-f",
            "--until-complete",
            DEMO_RUN_ID,
            "--storage",
            &nats,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(tail.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(
        line.contains("waiting for run") && line.contains(&nats),
        "{line}"
    );
    ok(demo_command(Path::new(&nats), &tmp.path().join("ws")));
    let o = tail.wait_with_output().unwrap();
    assert!(o.status.success());
    let followed = text(&o.stdout);
    assert_eq!(followed.lines().count(), 64);
    assert!(followed.lines().last().unwrap().contains("run.completed"));
    assert_eq!(followed, view(&nats, &["tail", DEMO_RUN_ID]));
}

#[test]
fn nats_down_at_start_fails_before_any_step_naming_the_url() {
    let Some(mut server) = server() else { return };
    let url = server.url();
    server.kill();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let o = demo_command(Path::new(&url), &ws).output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("cannot connect to NATS at {url}/TRANSCRIPTS")),
        "{err}"
    );
    // No step ran: the first one writes greeting.txt into the workspace.
    assert!(!ws.join("greeting.txt").exists());
    for args in [
        &["list"][..],
        &["show", "latest"],
        &["tail", "-f", DEMO_RUN_ID],
    ] {
        let o = bin().args(args).args(["--storage", &url]).output().unwrap();
        assert_eq!(o.status.code(), Some(4), "{args:?}");
        assert!(text(&o.stderr).contains(&url));
    }
}

#[test]
fn credentials_come_from_the_environment_never_from_argv() {
    let Some(server) = testing::single_with(&["--user", "fleet", "--pass", "s3cret-pw"]).unwrap()
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url();
    // In the URL: refused before connecting, the secret not echoed.
    let with_secret = url.replace("nats://", "nats://fleet:s3cret-pw@");
    let o = demo_command(Path::new(&with_secret), &tmp.path().join("ws0"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !text(&o.stderr).contains("s3cret-pw"),
        "{}",
        text(&o.stderr)
    );
    assert!(text(&o.stderr).contains("NATS_USER"));
    // Without credentials: the server refuses (exit 4, naming the URL).
    let o = demo_command(Path::new(&url), &tmp.path().join("ws1"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains(&url));
    // From the environment: recorded.
    let mut c = demo_command(Path::new(&url), &tmp.path().join("ws2"));
    c.env("NATS_USER", "fleet")
        .env("NATS_PASSWORD", "s3cret-pw");
    ok(c);
    let mut c = bin();
    c.args(["list", "--storage", &url])
        .env("NATS_USER", "fleet")
        .env("NATS_PASSWORD", "s3cret-pw");
    assert!(text(&ok(c).stdout).contains(DEMO_RUN_ID));
}

/// `tail -f` on NATS ends with the run as on files (#42 item 5): a run that failed after its
/// child run completed exits 1, once the child's `run.completed` is in too; `--forever` is the
/// only way to keep following. The child's events are waited for, not printed.
#[test]
fn tail_f_on_nats_exits_with_a_failed_runs_status_after_its_children() {
    let Some(server) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let nats = server.url();
    let wf = tmp.path().join("fails.yaml");
    let child = common::repo().join("fixtures/workflows/child.yaml");
    std::fs::write(
        &wf,
        format!(
            "name: fails\nsteps:\n  - name: child\n    type: call_workflow\n    workflow: {}\n    inputs: {{ text: \"hello\" }}\n  - name: boom\n    type: command\n    command: [\"false\"]\n",
            child.display()
        ),
    )
    .unwrap();
    // In the temporary directory: the runner's local audit trail stays out of the crate.
    let o = bin()
        .current_dir(tmp.path())
        .args(["run"])
        .arg(&wf)
        .args(["--deterministic", "--storage", &nats, "--workspace"])
        .arg(tmp.path().join("ws"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let o = bin()
        .args(["tail", "-f", DEMO_RUN_ID, "--storage", &nats])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let shown = text(&o.stdout);
    assert!(
        shown.lines().last().unwrap().contains("run.completed"),
        "{shown}"
    );
    // Only the root's events: each line of the plain replay, and no more.
    assert_eq!(
        shown.lines().count(),
        text(
            &bin()
                .args(["tail", DEMO_RUN_ID, "--storage", &nats])
                .output()
                .unwrap()
                .stdout
        )
        .lines()
        .count()
    );
}
