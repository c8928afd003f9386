//! Reading runs back against a real nats-server (#52): a reader cannot hang on a run whose
//! last message is removed while it reads (item 6); reads never create a stream or bucket
//! (item 5).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use transcript_domain::{RunIdGenerator, SequentialRunIds};
use transcript_nats::testing;
use transcript_nats::{
    NatsError, NatsRecorderFactory, NatsStore, StorageUrl, StreamOptions, run_subject,
};

/// A bound no correct read comes near: reaching it means the read hung.
const HUNG: Duration = Duration::from_secs(60);

/// The read's snapshot is taken (the run's last message at stream sequence `last`), then that
/// message is deleted before the consumer reaches it: the race a reader meets when a run is
/// deleted or the stream's limits remove its tail mid-read. The read ends at once, naming the
/// run, instead of waiting for a message that will never come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_last_message_is_deleted_mid_read_ends_with_an_error_naming_it() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let run = SequentialRunIds::with_prefix(0x5261).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let seqs = common::record_all(&factory, run, None, common::drafts(None)).await;
    let last = store.last_stream_seq(run).await.unwrap().unwrap();
    let stream = store.jetstream().get_stream("TRANSCRIPTS").await.unwrap();
    assert!(stream.delete_message(last).await.unwrap());

    let read = tokio::time::timeout(HUNG, store.run_lines_through(run, last))
        .await
        .expect("the read hung on a deleted message");
    let e = read.unwrap_err().to_string();
    assert!(e.contains(&run.to_string()), "{e}");
    assert!(e.contains(&format!("stream sequence {last}")), "{e}");
    assert!(e.contains("removed while the run was read"), "{e}");

    // Read again, the run is what the stream now holds: every line but the deleted one.
    let lines = store.run_lines(run).await.unwrap();
    assert_eq!(lines.len(), seqs.len() - 1);
}

/// Every message of the run removed after the snapshot: the consumer delivers nothing at all,
/// so only the bound ends the read: within `ack_timeout × publish_attempts`, naming the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_purged_mid_read_ends_within_the_ack_budget() {
    let Some(server) = common::server() else {
        return;
    };
    let options = StreamOptions {
        ack_timeout: Duration::from_millis(300),
        publish_attempts: 1,
        ..StreamOptions::default()
    };
    let store = common::store(&server.url(), options).await;
    let run = SequentialRunIds::with_prefix(0x5262).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, run, None, common::drafts(None)).await;
    let last = store.last_stream_seq(run).await.unwrap().unwrap();
    let stream = store.jetstream().get_stream("TRANSCRIPTS").await.unwrap();
    stream.purge().filter(run_subject(&run)).await.unwrap();

    let read = tokio::time::timeout(HUNG, store.run_lines_through(run, last))
        .await
        .expect("the read hung on a purged run");
    let e = read.unwrap_err().to_string();
    assert!(e.contains(&run.to_string()), "{e}");
    assert!(e.contains("no message came within 300ms"), "{e}");
}

/// Item 5: only writers create. A reader on servers without the stream is `NoStore` naming
/// the URL and creates neither the stream nor the runs-index bucket; a reader of a mistyped
/// stream name is told the stream that holds `transcript.run.>`; a stream whose bucket is gone
/// is read from the stream alone, and the bucket is not made again by the read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_create_and_a_mistyped_stream_is_named_with_the_one_holding_the_runs() {
    let Some(server) = common::server() else {
        return;
    };
    let url = StorageUrl::parse(&server.url()).unwrap();
    let e = NatsStore::connect_existing(&url, StreamOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, NatsError::NoStore { .. }), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains(&format!("no transcript store at {url}")),
        "{message}"
    );
    assert!(message.contains("transcript run"), "{message}");
    assert_eq!(
        testing::stream_names(&server.url()).await.unwrap(),
        Vec::<String>::new()
    );

    // A writer creates the stream and its bucket.
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let run = SequentialRunIds::with_prefix(0x5263).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, run, None, common::drafts(None)).await;
    assert_eq!(
        testing::stream_names(&server.url()).await.unwrap(),
        vec!["KV_TRANSCRIPTS_RUNS".to_owned(), "TRANSCRIPTS".to_owned()]
    );

    let typo = StorageUrl::parse(&format!("{}/TRANSCRIPTZ", server.url())).unwrap();
    let e = NatsStore::connect_existing(&typo, StreamOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no stream TRANSCRIPTZ"), "{e}");
    assert!(e.contains("stream TRANSCRIPTS holds the runs"), "{e}");
    assert!(
        e.contains(&format!("--storage {}/TRANSCRIPTS", server.url())),
        "{e}"
    );
    assert_eq!(testing::stream_names(&server.url()).await.unwrap().len(), 2);

    // The bucket deleted: a reader lists the run from the stream and makes no bucket.
    store
        .jetstream()
        .delete_key_value("TRANSCRIPTS_RUNS")
        .await
        .unwrap();
    let reader = NatsStore::connect_existing(&url, StreamOptions::default())
        .await
        .unwrap();
    let runs = reader.runs().await.unwrap();
    assert_eq!(runs.iter().map(|r| r.run_id).collect::<Vec<_>>(), vec![run]);
    assert_eq!(
        testing::stream_names(&server.url()).await.unwrap(),
        vec!["TRANSCRIPTS".to_owned()]
    );
}
