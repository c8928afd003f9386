//! The runs index is a cache of the stream (#44): the stream is the truth. A runner
//! SIGKILLed after an agent step, and runs whose index entry is gone (the bucket deleted, an
//! entry purged), read the same on NATS as on files: `list`, prefixes, `latest` and fleet-wide
//! `receipts --by` see them, their tokens included.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{bin, demo_command, text};
use transcript_nats::testing;

fn ok(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{:?}: {}\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

fn view(storage: &str, args: &[&str]) -> String {
    let mut c = bin();
    c.current_dir(common::repo())
        .args(args)
        .args(["--storage", storage]);
    ok(c)
}

/// `list --json` without each run's `path` (a file on one side, `url#id` on the other).
fn listed(storage: &str) -> serde_json::Value {
    let mut list: serde_json::Value =
        serde_json::from_str(&view(storage, &["list", "--all", "--json"])).unwrap();
    for run in list.as_array_mut().unwrap() {
        run.as_object_mut().unwrap().remove("path");
    }
    list
}

/// An agent step (a recorded Claude stream with usage), then a step blocked on a FIFO.
fn agent_then_gate(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    // In the workspace: a confined step (#56) opens nothing outside it.
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let fifo = dir.join("ws").join("gate.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let stream = common::repo().join("fixtures/agents/claude-review.jsonl");
    let workflow = dir.join("spend.yaml");
    std::fs::write(
        &workflow,
        format!(
            "name: spend\ninputs:\n  - name: fifo\nsteps:\n  - name: review\n    type: agent\n    provider: claude\n    command: [\"cat\", \"{}\"]\n    prompt: \"Review.\"\n  - name: wait\n    type: command\n    command: 'read line < \"$FIFO\"'\n    env: {{ FIFO: \"{{{{inputs.fifo}}}}\" }}\n",
            stream.display()
        ),
    )
    .unwrap();
    (workflow, fifo)
}

/// Runs the workflow into `storage` and SIGKILLs the runner while its second step waits.
fn run_and_kill(storage: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let (workflow, fifo) = agent_then_gate(dir);
    let mut child = bin()
        .args(["run", "--deterministic", "--storage", storage])
        .arg(&workflow)
        .arg("--input")
        .arg(format!("fifo={}", fifo.display()))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .current_dir(dir)
        .env("TRANSCRIPT_NATS_LEASE_SECS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Opening the FIFO for writing returns once the step has opened it: the agent step's
    // events were acknowledged.
    let gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    drop(gate);
    // Both storages say abandoned (on NATS once the runner's lease lapsed).
    common::await_status(storage, "00000000-0000-4000-8000-000000000001", "abandoned");
}

#[test]
fn a_sigkilled_runners_tokens_count_in_fleet_receipts_as_on_files() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    let nats = server.url();
    run_and_kill(files.to_str().unwrap(), &tmp.path().join("a"));
    run_and_kill(&nats, &tmp.path().join("b"));
    let files = files.display().to_string();
    let by_model = view(&files, &["receipts", "--by", "model", "--json"]);
    assert!(by_model.contains("claude"), "{by_model}");
    for args in [
        &["receipts", "--by", "model", "--json"][..],
        &["receipts", "--by", "day"],
        &["receipts", "--by", "project", "--json"],
        &["receipts", "--json", "latest"],
        &["stats", "--json", "latest"],
        &["show", "latest"],
        &["tree", "latest"],
    ] {
        assert_eq!(view(&nats, args), view(&files, args), "{args:?}");
    }
    assert_eq!(listed(&nats), listed(&files));
    assert_eq!(listed(&nats)[0]["status"], "abandoned");
}

/// Deletes the runs-index bucket (`FLEET_RUNS`) or one key of it.
fn drop_index(url: &str, key: Option<&str>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let url = transcript_nats::StorageUrl::parse(url).unwrap();
            let store = transcript_nats::NatsStore::connect_existing(&url, Default::default())
                .await
                .unwrap();
            let js = store.jetstream();
            match key {
                Some(key) => js
                    .get_key_value("FLEET_RUNS")
                    .await
                    .unwrap()
                    .purge(key)
                    .await
                    .unwrap(),
                None => js.delete_key_value("FLEET_RUNS").await.map(drop).unwrap(),
            }
        });
}

/// Whether the runs index holds an entry for `run` (written back after a listing rebuilt it).
fn indexed(url: &str, run: &str) -> bool {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let url = transcript_nats::StorageUrl::parse(url).unwrap();
            let store = transcript_nats::NatsStore::connect_existing(&url, Default::default())
                .await
                .unwrap();
            let run = transcript_domain::RunId::parse(run).unwrap();
            store.run_entry(run).await.unwrap().is_some()
        })
}

#[test]
fn runs_missing_from_the_index_are_read_from_the_stream() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    let nats = format!("{}/FLEET", server.url());
    ok(demo_command(&files, &tmp.path().join("ws1")));
    ok(demo_command(Path::new(&nats), &tmp.path().join("ws2")));
    let files = files.display().to_string();
    let child = "00000000-0000-4000-8000-000000000002";
    // One child run's entry purged, then the whole bucket deleted.
    for key in [Some(child), None] {
        drop_index(&nats, key);
        assert_eq!(listed(&nats), listed(&files), "{key:?}");
        // Rebuilt from the stream and written back (the next listing reads the index), into
        // the bucket as it is: a deleted bucket is not made again by a reader (#52 item 5),
        // only by the next run.
        assert_eq!(indexed(&nats, child), key.is_some(), "{key:?}");
        for args in [
            &["receipts", "--by", "model", "--json"][..],
            &["receipts", "--by", "day"],
            &["tree", "latest"],
            &["show", "latest"],
            &["tree", child],
        ] {
            assert_eq!(view(&nats, args), view(&files, args), "{key:?} {args:?}");
        }
    }
}
