//! Reads never create (#52 item 5), and one transcripts stream per NATS account (#44): only
//! `run` (and `import`) create the stream and the runs-index bucket. Every read command on
//! servers without them says there is no transcript store at that URL (exit 4) and leaves the
//! servers as they were, so a runner asking for its own settings (three replicas) is never
//! refused because a reader made the stream first. Every stream of runs takes the subjects
//! `transcript.run.>`, and JetStream gives a subject to one stream only: a mistyped or second
//! stream name is named with the stream that holds the runs and the URL that reads them.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use common::{DEMO_RUN_ID, bin, demo_command, text};
use transcript_nats::testing;

fn streams(url: &str) -> Vec<String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(testing::stream_names(url))
        .unwrap()
}

#[test]
fn reads_on_servers_without_a_store_say_so_and_create_nothing() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let reads: [&[&str]; 8] = [
        &["list"],
        &["show", "latest"],
        &["tree", DEMO_RUN_ID],
        &["stats", DEMO_RUN_ID],
        &["validate", DEMO_RUN_ID],
        &["export", DEMO_RUN_ID, "--format", "json"],
        &["receipts", "--by", "model"],
        &["mirror", &url, "--to", "mirror"],
    ];
    for args in reads {
        let o = bin()
            .current_dir(tmp.path())
            .args(args)
            .args(["--storage", &url])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(4), "{args:?}: {err}");
        assert!(
            err.contains(&format!("no transcript store at {url}/TRANSCRIPTS")),
            "{args:?}: {err}"
        );
        assert!(err.contains("transcript run"), "{args:?}: {err}");
    }
    assert_eq!(streams(&url), Vec::<String>::new());

    // A follower of a run named in full waits for the store (as for the run), creating
    // nothing; the first run creates both, and the follower ends with it.
    let mut tail = bin()
        .args(["tail", "-f", DEMO_RUN_ID, "--storage", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(tail.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("no transcript store there yet"), "{line}");
    assert_eq!(streams(&url), Vec::<String>::new());

    // The first run creates both.
    let o = demo_command(Path::new(&url), &tmp.path().join("ws"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(streams(&url), ["KV_TRANSCRIPTS_RUNS", "TRANSCRIPTS"]);
    let o = tail.wait_with_output().unwrap();
    assert!(o.status.success(), "{:?}", o.status);
    assert!(
        text(&o.stdout)
            .lines()
            .last()
            .unwrap()
            .contains("run.completed")
    );
}

#[test]
fn a_mistyped_or_second_stream_names_the_one_that_holds_the_runs() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let o = demo_command(Path::new(&url), &tmp.path().join("ws"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A reader of another name: no such store, and where the runs are.
    let o = bin()
        .args(["list", "--storage", &format!("{url}/STAGING")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("no stream STAGING"), "{err}");
    assert!(err.contains(&format!("{url}/TRANSCRIPTS")), "{err}");
    assert!(err.contains("transcript.run.>"), "{err}");
    // A runner of another name: refused the same way (a subject belongs to one stream).
    let o = demo_command(
        Path::new(&format!("{url}/STAGING")),
        &tmp.path().join("ws2"),
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("{url}/TRANSCRIPTS")), "{err}");
    assert!(err.contains("transcript.run.>"), "{err}");
    assert_eq!(streams(&url), ["KV_TRANSCRIPTS_RUNS", "TRANSCRIPTS"]);
}
