//! The error paths of the runs index, the mirror and the connection against a real
//! nats-server (#44 leftovers item 3): what a stream or bucket holding something else than
//! our own writes does to `runs` and `mirror`, and settings the server cannot honour.
#![allow(clippy::unwrap_used)]

mod common;

use transcript_domain::{RunIdGenerator, SequentialRunIds};
use transcript_nats::{MirrorOptions, NatsError, NatsRecorderFactory, StreamOptions, mirror};

/// Publishes `payload` on `subject` and waits for the ack.
async fn publish_raw(store: &transcript_nats::NatsStore, subject: &str, payload: &[u8]) {
    store
        .jetstream()
        .publish(subject.to_owned(), payload.to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

/// The `n`th line (1-based, with its `\n`) of `bytes`.
fn line(bytes: &[u8], n: usize) -> Vec<u8> {
    let mut l = bytes.split(|b| *b == b'\n').nth(n - 1).unwrap().to_vec();
    l.push(b'\n');
    l
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_index_skips_entries_that_do_not_decode_and_names_a_run_asked_for() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let ids = SequentialRunIds::with_prefix(0x4410);
    let (good, bad) = (ids.next_run_id(), ids.next_run_id());
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, good, None, common::drafts(None)).await;
    // Another writer's (or another version's) entries in the bucket: a value that is not an
    // entry under a run id, and a key that is not a run id.
    let bucket = store
        .jetstream()
        .get_key_value("TRANSCRIPTS_RUNS")
        .await
        .unwrap();
    bucket
        .put(bad.to_string(), b"{not json".to_vec().into())
        .await
        .unwrap();
    bucket
        .put("not-a-run", b"{}".to_vec().into())
        .await
        .unwrap();
    let runs = store.runs().await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.run_id).collect::<Vec<_>>(),
        vec![good],
        "the listing goes on past entries it cannot read"
    );
    // Asked for by id, the bad entry is an error naming the run.
    let e = store.run_entry(bad).await.unwrap_err();
    assert!(e.to_string().contains(&bad.to_string()), "{e}");
    assert!(store.run_entry(good).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_skips_subjects_that_name_no_run_and_writes_only_run_files() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let run = SequentialRunIds::with_prefix(0x4411).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, run, None, common::drafts(None)).await;
    let golden = common::file_bytes(run, None, common::drafts(None)).await;
    // Subjects under the prefix that name no run: several tokens, not a uuid, a dot-dot-like
    // token. Their payloads are valid lines, so only the subject can make them be skipped.
    let first = line(&golden, 1);
    for subject in [
        "transcript.run.x.y",
        "transcript.run.not-a-uuid",
        "transcript.run.%2E%2E",
        "transcript.run.__",
    ] {
        publish_raw(&store, subject, &first).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let report = mirror(&store, &MirrorOptions::new(&out)).await.unwrap();
    assert_eq!(report.runs.len(), 1);
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![run.file_name()]);
    assert_eq!(std::fs::read(out.join(run.file_name())).unwrap(), golden);
    let beside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(
        beside.len(),
        1,
        "nothing written beside the mirror directory"
    );
}

/// A run with events missing from the stream (removed by the stream's `max_age` or
/// `max_bytes`, or deleted) cannot be mirrored byte for byte: its file keeps the lines before
/// the gap, the run is reported incomplete with the gap, and the other runs are mirrored all
/// the same; a restart does not stop there again (the mirror would otherwise be stuck on the
/// gap for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_reports_runs_with_gaps_and_goes_on_with_the_others() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let ids = SequentialRunIds::with_prefix(0x4412);
    let (gappy, headless, good, junk) = (
        ids.next_run_id(),
        ids.next_run_id(),
        ids.next_run_id(),
        ids.next_run_id(),
    );
    let golden = common::file_bytes(gappy, None, common::drafts(None)).await;
    // Lines 1 and 3 of a run, published raw: line 2 is missing from the stream. Another run
    // has lost its first line. A complete run is recorded after both.
    let subject = format!("transcript.run.{gappy}");
    publish_raw(&store, &subject, &line(&golden, 1)).await;
    publish_raw(&store, &subject, &line(&golden, 3)).await;
    let headless_golden = common::file_bytes(headless, None, common::drafts(None)).await;
    publish_raw(
        &store,
        &format!("transcript.run.{headless}"),
        &line(&headless_golden, 2),
    )
    .await;
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    common::record_all(&factory, good, None, common::drafts(None)).await;
    let good_golden = common::file_bytes(good, None, common::drafts(None)).await;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let report = mirror(&store, &MirrorOptions::new(&out)).await.unwrap();
    assert_eq!(
        report.incomplete.keys().copied().collect::<Vec<_>>(),
        vec![gappy, headless]
    );
    assert!(
        report.incomplete[&gappy].contains("line 3 follows line 1"),
        "{:?}",
        report.incomplete
    );
    assert!(
        report.incomplete[&headless].contains("line 2 follows line 0"),
        "{:?}",
        report.incomplete
    );
    // The line before the gap is kept, nothing after it invented; no file for a run whose
    // first line is gone; the complete run mirrored byte for byte.
    assert_eq!(
        std::fs::read(out.join(gappy.file_name())).unwrap(),
        line(&golden, 1)
    );
    assert!(!out.join(headless.file_name()).exists());
    assert_eq!(
        std::fs::read(out.join(good.file_name())).unwrap(),
        good_golden
    );
    // A restart is not stuck on the gap: nothing new, the files unchanged.
    let again = mirror(&store, &MirrorOptions::new(&out)).await.unwrap();
    assert_eq!((again.written, again.incomplete.len()), (0, 0));
    assert_eq!(
        std::fs::read(out.join(gappy.file_name())).unwrap(),
        line(&golden, 1)
    );
    assert_eq!(
        std::fs::read(out.join(good.file_name())).unwrap(),
        good_golden
    );

    // A message that is not a transcript line, in a mirror of its own: named by its subject
    // (the stream is trusted storage: this is corruption, and the mirror stops at it).
    let server2 = common::server().unwrap();
    let store2 = common::store(&server2.url(), StreamOptions::default()).await;
    let junk_subject = format!("transcript.run.{junk}");
    publish_raw(&store2, &junk_subject, b"{\"not\":\"a line\"}\n").await;
    let out2 = dir.path().join("m2");
    let e = mirror(&store2, &MirrorOptions::new(&out2))
        .await
        .unwrap_err();
    assert!(e.to_string().contains(&junk_subject), "{e}");
    assert!(e.to_string().contains("not a transcript line"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_into_a_file_and_more_replicas_than_servers_are_errors_naming_them() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"keep").unwrap();
    let e = mirror(&store, &MirrorOptions::new(&file))
        .await
        .unwrap_err();
    assert!(e.to_string().contains(&file.display().to_string()), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");

    // Three replicas asked of one server, on a stream of its own: refused, naming the URL.
    let url = format!("{}/THREE", server.url());
    let options = StreamOptions {
        replicas: Some(3),
        ..StreamOptions::default()
    };
    let e = transcript_nats::NatsStore::connect(
        &transcript_nats::StorageUrl::parse(&url).unwrap(),
        options,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, NatsError::JetStream { .. }), "{e:?}");
    assert!(e.to_string().contains(&url), "{e}");
    assert!(e.to_string().contains("opening stream THREE"), "{e}");
}

/// An event larger than the servers' `max_payload` (1 MiB by default) can never be stored:
/// `record` fails at once with the sizes and the setting to raise, not after retrying for the
/// whole ack budget with "its outcome is unknown" (the client refuses it before sending), and
/// every later `record` of the run fails too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_above_max_payload_fails_at_once_naming_the_limit() {
    use transcript_domain::{
        ContentBlock, EventDraft, Fidelity, MessagePayload, Payload, RecorderFactory, Role,
        StepPayload,
    };
    let Some(server) = common::server() else {
        return;
    };
    let options = StreamOptions {
        ack_timeout: std::time::Duration::from_secs(10),
        publish_attempts: 3,
        ..StreamOptions::default()
    };
    let store = common::store(&server.url(), options).await;
    let run = SequentialRunIds::with_prefix(0x4413).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    recorder
        .record(EventDraft::run_level(Payload::RunStarted(
            StepPayload::new("big", "workflow"),
        )))
        .await
        .unwrap();
    let huge = MessagePayload::new(
        Role::Assistant,
        vec![ContentBlock::text(
            Fidelity::AgentEmitted,
            "a".repeat(2 << 20),
        )],
    );
    let started = std::time::Instant::now();
    let e = recorder
        .record(EventDraft::new("s", 0, Payload::MessageAssistant(huge)))
        .await
        .unwrap_err()
        .to_string();
    // Well inside one ack timeout: it was not sent, so there is nothing to wait for.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{e}"
    );
    assert!(e.contains("max_payload"), "{e}");
    assert!(e.contains("1048576"), "{e}");
    assert!(!e.contains("outcome is unknown"), "{e}");
    // The run cannot go on past the lost event; what was stored stays.
    let next = recorder
        .record(EventDraft::run_level(Payload::RunCompleted(
            StepPayload::new("big", "workflow"),
        )))
        .await
        .unwrap_err();
    assert!(next.to_string().contains("max_payload"), "{next}");
    assert_eq!(store.run_lines(run).await.unwrap().len(), 1);

    // The README's advice: a server with `max_payload: 8MB` stores the same event.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("server.conf");
    std::fs::write(&conf, "max_payload: 8MB\n").unwrap();
    let big = transcript_nats::testing::single_with(&["-c", conf.to_str().unwrap()])
        .unwrap()
        .unwrap();
    let store = common::store(&big.url(), StreamOptions::default()).await;
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let huge = MessagePayload::new(
        Role::Assistant,
        vec![ContentBlock::text(
            Fidelity::AgentEmitted,
            "a".repeat(2 << 20),
        )],
    );
    recorder
        .record(EventDraft::new("s", 0, Payload::MessageAssistant(huge)))
        .await
        .unwrap();
    recorder.close().await.unwrap();
    assert!(store.run_lines(run).await.unwrap()[0].len() > 2 << 20);
}

/// The runs index lost mid-run (its bucket deleted): the events still go to the stream, and
/// `close` says the index was not updated instead of succeeding quietly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_runs_index_fails_close_but_keeps_every_event() {
    use transcript_domain::RecorderFactory;
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), StreamOptions::default()).await;
    let run = SequentialRunIds::with_prefix(0x4414).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let mut drafts = common::drafts(None).into_iter();
    recorder.record(drafts.next().unwrap()).await.unwrap();
    store
        .jetstream()
        .delete_key_value("TRANSCRIPTS_RUNS")
        .await
        .unwrap();
    let mut recorded = 1;
    for d in drafts {
        recorder.record(d).await.unwrap();
        recorded += 1;
    }
    let e = recorder.close().await.unwrap_err().to_string();
    assert!(e.contains("the runs index was not updated"), "{e}");
    assert!(e.contains(&run.to_string()), "{e}");
    let golden = common::file_bytes(run, None, common::drafts(None)).await;
    assert_eq!(store.run_lines(run).await.unwrap().concat(), golden);
    assert_eq!(recorded, golden.iter().filter(|b| **b == b'\n').count());
}
