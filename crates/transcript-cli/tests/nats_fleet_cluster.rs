//! A fresh 3-node cluster and runners started together (#59 items 1 and 2): three `run`s
//! released by one barrier onto a cluster just started all find no stream and all create it;
//! every one succeeds (creation converges, and a cluster still electing its meta leader is
//! waited out). With no `TRANSCRIPT_NATS_REPLICAS` the stream is made with the cluster's three
//! replicas, and the runner that made it says so on stderr; a node killed afterwards (the
//! stream's leader) loses no run: every run reads back whole through the two left.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Barrier};

use common::{bin, repo, text};
use transcript_nats::testing;

/// `run` of the demo workflow on `storage`, with a fresh run id.
fn runner(storage: &str, workspace: &Path) -> std::process::Command {
    let mut c = bin();
    c.current_dir(repo())
        .args(["run", "fixtures/workflows/demo.yaml", "--storage", storage])
        .arg("--workspace")
        .arg(workspace)
        .env_remove("TRANSCRIPT_NATS_REPLICAS");
    c
}

/// The stream's replicas and its leader's name, read with the library.
fn stream_info(url: &str) -> (usize, String) {
    let url = transcript_nats::StorageUrl::parse(url).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = transcript_nats::NatsStore::connect_existing(&url, Default::default())
                .await
                .unwrap();
            let mut stream = store.jetstream().get_stream("TRANSCRIPTS").await.unwrap();
            let info = stream.info().await.unwrap();
            let leader = info
                .cluster
                .clone()
                .and_then(|c| c.leader)
                .unwrap_or_default();
            (info.config.num_replicas, leader)
        })
}

/// The run id a runner's stderr names (`transcript: run <id> → …`).
fn run_id(o: &Output) -> String {
    let err = text(&o.stderr);
    err.lines()
        .find_map(|l| l.strip_prefix("transcript: run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run id in: {err}"))
        .to_owned()
}

#[test]
fn three_runners_started_together_on_a_fresh_cluster_all_record_on_three_replicas() {
    let Some(mut nodes) = testing::cluster(3).expect("nats-server cluster") else {
        return;
    };
    let url = testing::urls(&nodes);
    let tmp = tempfile::tempdir().unwrap();
    let barrier = Arc::new(Barrier::new(3));
    let started = std::time::Instant::now();
    let handles: Vec<_> = (0..3)
        .map(|i| {
            let mut c = runner(&url, &tmp.path().join(format!("ws{i}")));
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                c.output().unwrap()
            })
        })
        .collect();
    let outputs: Vec<Output> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    eprintln!("three runners on a fresh cluster: {:?}", started.elapsed());
    for o in &outputs {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    // Exactly one made the stream, and said with how many copies and why.
    let notes: Vec<String> = outputs
        .iter()
        .map(|o| text(&o.stderr))
        .filter(|e| e.contains("created stream TRANSCRIPTS"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("keeping 3 copies"), "{}", notes[0]);
    assert!(notes[0].contains("of 3 servers"), "{}", notes[0]);
    let (replicas, leader) = stream_info(&url);
    assert_eq!(replicas, 3);

    // The stream's leader killed: every run is read back whole from the two left.
    let victim = nodes.iter().position(|n| n.name == leader).unwrap();
    nodes[victim].kill();
    let rest: Vec<String> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, n)| n.url())
        .collect();
    let rest = rest.join(",");
    for o in &outputs {
        let id = run_id(o);
        common::await_status(&rest, &id, "succeeded");
        let shown = bin()
            .args(["validate", &id, "--storage", &rest])
            .output()
            .unwrap();
        assert!(shown.status.success(), "{}", text(&shown.stderr));
    }
}
