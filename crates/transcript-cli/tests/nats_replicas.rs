//! A runner asking for replicated events gets them or does not run (#44, #52 item 5). A `list`
//! run first (no `TRANSCRIPT_NATS_REPLICAS`) used to make a one-copy stream on a 3-node
//! cluster, and runners asking for 3 copies then recorded into it, each ack "durable" on one
//! node only. Now reads never create: the `list` says there is no store, and the first runner
//! makes the stream with the three copies it asks for. A run whose existing stream keeps fewer
//! copies than it asks for (made by an earlier runner) is refused before any step runs, naming
//! both numbers.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, demo_command, text};
use transcript_nats::testing;

/// The stream's replicas, read with a bare client.
fn replicas(url: &str) -> usize {
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
            stream.info().await.unwrap().config.num_replicas
        })
}

#[test]
fn a_list_first_no_longer_makes_a_one_copy_stream_under_a_runner_asking_for_three() {
    let Some(nodes) = testing::cluster(3).expect("nats-server cluster") else {
        return;
    };
    let url = testing::urls(&nodes);
    let o = bin()
        .args(["list", "--storage", &url])
        .env_remove("TRANSCRIPT_NATS_REPLICAS")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("no transcript store at"));
    let tmp = tempfile::tempdir().unwrap();
    let o = demo_command(Path::new(&url), &tmp.path().join("ws"))
        .env("TRANSCRIPT_NATS_REPLICAS", "3")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(replicas(&url), 3);
}

#[test]
fn a_run_asking_for_more_replicas_than_the_stream_keeps_is_refused() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    // An earlier runner made the stream with one copy of each event.
    let o = demo_command(Path::new(&url), &tmp.path().join("ws1"))
        .env_remove("TRANSCRIPT_NATS_REPLICAS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ws = tmp.path().join("ws");
    let o = demo_command(Path::new(&url), &ws)
        .env("TRANSCRIPT_NATS_REPLICAS", "3")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("TRANSCRIPT_NATS_REPLICAS"), "{err}");
    assert!(err.contains("1 cop"), "{err}");
    // No step ran: the first one writes greeting.txt into the workspace.
    assert!(!ws.join("greeting.txt").exists());
}
