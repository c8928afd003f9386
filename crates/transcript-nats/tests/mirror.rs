//! `mirror` against a real nats-server: the file layout, byte for byte the file recorder's;
//! idempotent; resumable from every crash state (torn last line, lines written but not
//! acknowledged, a file lost).
#![allow(clippy::unwrap_used)]

mod common;

use transcript_domain::{RunIdGenerator, SequentialRunIds};
use transcript_nats::{MirrorOptions, NatsRecorderFactory, StreamOptions, mirror};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_writes_the_file_recorders_bytes_and_resumes_from_any_crash_state() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let ids = SequentialRunIds::with_prefix(0x4403);
    let (root, child) = (ids.next_run_id(), ids.next_run_id());
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, root, None, common::drafts(Some(child))).await;
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, child, Some(root), common::drafts(None)).await;
    let expected = [
        (
            root,
            common::file_bytes(root, None, common::drafts(Some(child))).await,
        ),
        (
            child,
            common::file_bytes(child, Some(root), common::drafts(None)).await,
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let options = MirrorOptions::new(dir.path().join("m"));
    let check = || {
        for (run, bytes) in &expected {
            let got = std::fs::read(options.dir.join(run.file_name())).unwrap();
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(bytes.clone()).unwrap()
            );
        }
    };
    let total = (expected[0].1.iter().filter(|b| **b == b'\n').count()
        + expected[1].1.iter().filter(|b| **b == b'\n').count()) as u64;

    let first = mirror(&store, &options).await.unwrap();
    assert_eq!((first.written, first.skipped), (total, 0));
    check();
    // Private, as the file recorder's files are.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(options.dir.join(root.file_name()))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Again: nothing new, nothing rewritten.
    let again = mirror(&store, &options).await.unwrap();
    assert_eq!((again.written, again.skipped), (0, 0));
    check();

    // A crash after writing but before the ack: everything is delivered again and skipped.
    store
        .jetstream()
        .get_stream("TRANSCRIPTS")
        .await
        .unwrap()
        .reset_consumer(&options.consumer, Some(1))
        .await
        .unwrap();
    let redelivered = mirror(&store, &options).await.unwrap();
    assert_eq!((redelivered.written, redelivered.skipped), (0, total));
    check();

    // A crash inside a write (torn last line) and a lost file, then everything again.
    let root_file = options.dir.join(root.file_name());
    let len = std::fs::metadata(&root_file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&root_file)
        .unwrap()
        .set_len(len - 17)
        .unwrap();
    std::fs::remove_file(options.dir.join(child.file_name())).unwrap();
    store
        .jetstream()
        .get_stream("TRANSCRIPTS")
        .await
        .unwrap()
        .reset_consumer(&options.consumer, Some(1))
        .await
        .unwrap();
    let repaired = mirror(&store, &options).await.unwrap();
    assert_eq!(repaired.written + repaired.skipped, total);
    assert!(repaired.written > 1);
    check();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_refuses_a_symlink_planted_at_a_run_path() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let run = SequentialRunIds::with_prefix(0x4404).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, run, None, common::drafts(None)).await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("victim");
    std::fs::write(&target, b"keep").unwrap();
    let out = dir.path().join("m");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&target, out.join(run.file_name())).unwrap();
    let e = mirror(&store, &MirrorOptions::new(&out)).await.unwrap_err();
    assert!(e.to_string().contains(&run.to_string()), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
}
