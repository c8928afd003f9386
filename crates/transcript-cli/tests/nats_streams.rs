//! One transcripts stream per NATS account (#44): every stream of runs takes the subjects
//! `transcript.run.>`, and JetStream gives a subject to one stream only. A second stream
//! name on the same servers (`nats://host/STAGING` beside the default `TRANSCRIPTS`) is
//! refused naming the stream that holds the runs and the URL that reads them, instead of
//! JetStream's bare "subjects overlap with an existing stream".
#![allow(clippy::unwrap_used)]

mod common;

use common::{bin, text};
use transcript_nats::testing;

#[test]
fn a_second_stream_on_the_same_servers_names_the_one_that_holds_the_runs() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let o = bin().args(["list", "--storage", &url]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = bin()
        .args(["list", "--storage", &format!("{url}/STAGING")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("{url}/TRANSCRIPTS")), "{err}");
    assert!(err.contains("transcript.run.>"), "{err}");
}
