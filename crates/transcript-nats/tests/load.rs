//! Load (#44 item 6): 8 runner processes × 50 concurrent runs into one 3-node cluster
//! (replicas 3), then `mirror`: every run valid and gapless, and every file byte-identical to
//! the same runs recorded to files (deterministic clock and ids).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use transcript_nats::testing;
use transcript_nats::{MirrorOptions, StorageUrl, StreamOptions, mirror};

const RUNNERS: u32 = 8;
const RUNS: usize = 50;
const STEPS: &str = "3";

/// The example runner: `TRANSCRIPT_FLEET_RUNNER` when set (`cargo xtask coverage` builds
/// the example apart), else the one cargo builds with the tests.
fn runner() -> PathBuf {
    if let Some(path) = std::env::var_os("TRANSCRIPT_FLEET_RUNNER") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/fleet_runner")
}

fn spawn_runner(storage: &str, prefix: u32) -> std::process::Child {
    Command::new(runner())
        .args([storage, &prefix.to_string(), &RUNS.to_string(), STEPS])
        .env("TRANSCRIPT_NATS_REPLICAS", "3")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn sorted_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_runners_of_fifty_runs_into_a_cluster_mirror_to_the_file_goldens() {
    let Some(nodes) = testing::cluster(3).expect("nats-server cluster") else {
        return;
    };
    let url = format!("{}/TRANSCRIPTS", testing::urls(&nodes));
    // The stream exists before the runners race to create it.
    let options = StreamOptions {
        replicas: Some(3),
        ..StreamOptions::default()
    };
    let store = testing::connect_when_serving(
        &StorageUrl::parse(&url).unwrap(),
        options,
        Duration::from_secs(30),
    )
    .await
    .expect("cluster serves JetStream");

    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let fleet: Vec<_> = (1..=RUNNERS).map(|p| spawn_runner(&url, p)).collect();
    let golden: Vec<_> = (1..=RUNNERS)
        .map(|p| spawn_runner(files.to_str().unwrap(), p))
        .collect();
    for child in fleet.into_iter().chain(golden) {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), RUNS);
    }

    let mirrored = tmp.path().join("mirror");
    let report = mirror(&store, &MirrorOptions::new(&mirrored))
        .await
        .unwrap();
    assert_eq!(report.runs.len(), RUNNERS as usize * RUNS);
    let names = sorted_files(&files);
    assert_eq!(names.len(), RUNNERS as usize * RUNS);
    assert_eq!(sorted_files(&mirrored), names);
    for name in &names {
        let golden = std::fs::read(files.join(name)).unwrap();
        let got = std::fs::read(mirrored.join(name)).unwrap();
        assert!(golden == got, "{name} differs from the file recorder's");
        // Gapless and valid, read by serde_json (outside our decoder).
        for (i, line) in got
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            let v: serde_json::Value = serde_json::from_slice(line).unwrap();
            assert_eq!(v["seq"], i as u64 + 1, "{name}");
        }
        let report = transcript_domain_verify(&mirrored.join(name));
        assert!(report, "{name} does not verify");
    }
    // The index saw every run complete.
    let runs = store.runs().await.unwrap();
    assert_eq!(runs.len(), RUNNERS as usize * RUNS);
    assert!(
        runs.iter()
            .all(|r| r.status == transcript_nats::IndexStatus::Succeeded)
    );
}

/// The infra verifier (the one `transcript validate` runs) on one file.
fn transcript_domain_verify(path: &Path) -> bool {
    transcript_infra::verify_file(path).is_valid()
}
