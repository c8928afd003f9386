//! A runner asking for replicated events gets them or does not run (#44). Any command creates
//! the stream on first use with its own settings, and an existing stream is used as it is: a
//! `list` run first (no `TRANSCRIPT_NATS_REPLICAS`) made a one-copy stream on a 3-node
//! cluster, and runners asking for 3 copies then recorded into it, each ack "durable" on one
//! node only. Now a run whose stream keeps fewer copies than it asks for is refused before any
//! step runs, naming both numbers.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, demo_command, text};
use transcript_nats::testing;

#[test]
fn a_run_asking_for_more_replicas_than_the_stream_keeps_is_refused() {
    let Some(nodes) = testing::cluster(3).expect("nats-server cluster") else {
        return;
    };
    let url = testing::urls(&nodes);
    let o = bin()
        .args(["list", "--storage", &url])
        .env_remove("TRANSCRIPT_NATS_REPLICAS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let tmp = tempfile::tempdir().unwrap();
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
