//! Running or abandoned (#52 item 1), through the binary: a run whose runner is alive reads
//! as `running` in `list` (and `list --status running`), `tree`, `show`, `stats` and `tail`;
//! once its runner is SIGKILLed it reads as `abandoned`, and a `tail -f` following it ends
//! with exit 4 saying so instead of waiting. On files the lease is the writer's lock, on NATS
//! a key the runner renews (a real nats-server, the lease shortened to one second).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{DEMO_RUN_ID, bin, finish, text};
use transcript_nats::testing;

/// A workflow whose second step blocks until the test writes to (or closes) `fifo`.
fn gate(dir: &Path) -> (PathBuf, PathBuf) {
    // In the workspace: a confined step (#56) opens nothing outside it.
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let fifo = dir.join("ws").join("gate.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let workflow = dir.join("gate.yaml");
    std::fs::write(
        &workflow,
        "name: gate\ninputs:\n  - name: fifo\nsteps:\n  - name: before\n    type: command\n    command: 'echo before'\n  - name: wait\n    type: command\n    command: 'read line < \"$FIFO\"; echo \"got $line\"'\n    env: { FIFO: \"{{inputs.fifo}}\" }\n  - name: after\n    type: command\n    command: 'echo after'\n",
    )
    .unwrap();
    (workflow, fifo)
}

fn start_run(storage: &str, workflow: &Path, fifo: &Path, dir: &Path) -> Child {
    start_run_with(storage, workflow, fifo, dir, &[])
}

fn start_run_with(
    storage: &str,
    workflow: &Path,
    fifo: &Path,
    dir: &Path,
    env: &[(&str, &str)],
) -> Child {
    bin()
        .args(["run", "--deterministic", "--storage", storage])
        .arg(workflow)
        .arg("--input")
        .arg(format!("fifo={}", fifo.display()))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .current_dir(dir)
        .env("TRANSCRIPT_NATS_LEASE_SECS", "1")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A read command's exit code, stdout and stderr.
fn read(storage: &str, dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = bin()
        .current_dir(dir)
        .args(args)
        .args(["--storage", storage])
        .output()
        .unwrap();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

/// Every view says `state` (`running` or `abandoned`) of the gate run.
fn every_view_says(storage: &str, dir: &Path, state: &str) {
    let (code, list, err) = read(storage, dir, &["list", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["status"], state, "{storage}: {list}");
    let (_, only, _) = read(storage, dir, &["list", "--status", state]);
    assert!(only.contains(DEMO_RUN_ID), "{storage}: {only}");
    let other = if state == "running" {
        "abandoned"
    } else {
        "running"
    };
    let (_, none, _) = read(storage, dir, &["list", "--status", other]);
    assert!(!none.contains(DEMO_RUN_ID), "{storage}: {none}");
    let (_, tree, err) = read(storage, dir, &["tree", DEMO_RUN_ID]);
    let first = tree.lines().next().unwrap_or_default();
    assert!(first.contains(state), "{storage}: {tree}{err}");
    let (_, tree, _) = read(storage, dir, &["tree", "--json", DEMO_RUN_ID]);
    let tree: serde_json::Value = serde_json::from_str(&tree).unwrap();
    assert_eq!(tree["status"], state, "{storage}");
    let (_, show, _) = read(storage, dir, &["show", DEMO_RUN_ID]);
    assert!(show.contains(&format!("━━ {state}")), "{storage}: {show}");
    let (_, stats, _) = read(storage, dir, &["stats", DEMO_RUN_ID]);
    assert!(stats.contains(&format!("{state}: 1")), "{storage}: {stats}");
    let (_, _, tail) = read(storage, dir, &["tail", DEMO_RUN_ID]);
    assert!(
        tail.contains(&format!("no run.completed yet: {state}")),
        "{storage}: {tail}"
    );
}

/// The gate run on `storage`: running while its runner lives, abandoned once it is
/// SIGKILLed, and a follower started while it ran ends with exit 4.
fn a_killed_runner_leaves_an_abandoned_run(storage: &str, tmp: &Path) {
    let (workflow, fifo) = gate(tmp);
    let mut runner = start_run(storage, &workflow, &fifo, tmp);
    // Opening the FIFO for writing returns once the step has opened it: the run is live and
    // mid-step.
    let gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    every_view_says(storage, tmp, "running");
    let follower = bin()
        .current_dir(tmp)
        .args(["tail", "-f", DEMO_RUN_ID, "--storage", storage])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    runner.kill().unwrap();
    runner.wait().unwrap();
    // The step's shell, orphaned, reads end of file and exits.
    drop(gate);
    let o = finish(follower, Duration::from_secs(60), "tail -f");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{storage}: {err}");
    assert!(err.contains("was abandoned"), "{storage}: {err}");
    assert!(text(&o.stdout).contains("step.started"), "{storage}");
    every_view_says(storage, tmp, "abandoned");
}

#[test]
fn on_files_a_sigkilled_runners_run_is_abandoned_and_a_live_one_running() {
    let tmp = tempfile::tempdir().unwrap();
    a_killed_runner_leaves_an_abandoned_run("files", tmp.path());
}

#[test]
fn on_nats_a_sigkilled_runners_run_is_abandoned_once_its_lease_lapses() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    a_killed_runner_leaves_an_abandoned_run(&server.url(), tmp.path());
}

/// The node leading the runs-index bucket's stream (where the lease keys live), by index.
fn bucket_leader(nodes: &[testing::ServerNode]) -> usize {
    let url = transcript_nats::StorageUrl::parse(&testing::urls(nodes)).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = transcript_nats::NatsStore::connect_existing(&url, Default::default())
                .await
                .unwrap();
            let info = store
                .jetstream()
                .get_stream("KV_TRANSCRIPTS_RUNS")
                .await
                .unwrap()
                .get_info()
                .await
                .unwrap();
            let name = info.cluster.unwrap().leader.unwrap();
            nodes.iter().position(|n| n.name == name).unwrap()
        })
}

/// A 3-node cluster, the runs index on three replicas: the node leading the bucket that holds
/// the lease is killed mid-run, and the run still reads as running from the other two past
/// more than a lease (the runner renewed it through them); once the runner is SIGKILLed it
/// reads as abandoned.
#[test]
fn on_a_cluster_the_lease_outlives_its_node_and_lapses_with_the_runner() {
    let Some(mut nodes) = testing::cluster(3).expect("nats-server cluster") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let storage = format!("{}/TRANSCRIPTS", testing::urls(&nodes));
    let (workflow, fifo) = gate(tmp.path());
    let env = [
        ("TRANSCRIPT_NATS_REPLICAS", "3"),
        // Renewed every 5.3 s: the client's reconnect and the bucket's leader election after
        // the kill fit in the 10.7 s before it would lapse, with the whole test suite running
        // beside it on two cores (10 s, with 6.7 s of slack, lapsed once in CI that way).
        ("TRANSCRIPT_NATS_LEASE_SECS", "16"),
    ];
    let mut runner = start_run_with(&storage, &workflow, &fifo, tmp.path(), &env);
    let gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let victim = bucket_leader(&nodes);
    nodes[victim].kill();
    let survivors: Vec<testing::ServerNode> = nodes
        .into_iter()
        .enumerate()
        .filter_map(|(i, n)| (i != victim).then_some(n))
        .collect();
    let rest = format!("{}/TRANSCRIPTS", testing::urls(&survivors));
    // Longer than the lease: a key nobody renewed since the kill would be gone (this wait is
    // the lease's length passing, not a race being won).
    std::thread::sleep(Duration::from_secs(17));
    every_view_says(&rest, tmp.path(), "running");

    runner.kill().unwrap();
    runner.wait().unwrap();
    drop(gate);
    common::await_status(&rest, DEMO_RUN_ID, "abandoned");
    every_view_says(&rest, tmp.path(), "abandoned");
}
