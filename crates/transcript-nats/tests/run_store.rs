//! The read port on NATS ([`transcript_nats::NatsRunStore`]) against a real nats-server: it
//! lists, resolves (full id, prefix, `latest`) and reads runs byte for byte as recorded, says
//! running while the runner holds its lease and abandoned once it lapsed, answers "no such
//! run" with `None`, and is callable from inside an async runtime as from plain threads.
#![allow(clippy::unwrap_used)]

mod common;

use transcript_domain::run_store::{FollowEnd, FollowItem, RunState, RunStore};
use transcript_domain::{RecorderFactory, RunIdGenerator, SequentialRunIds};
use transcript_nats::{NatsRecorderFactory, NatsRunStore, StreamOptions};

fn options() -> StreamOptions {
    StreamOptions {
        lease: std::time::Duration::from_secs(3600),
        ..StreamOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_port_lists_resolves_and_reads_runs_as_recorded() {
    let Some(server) = common::server() else {
        return;
    };
    let store = common::store(&server.url(), options()).await;
    let ids = SequentialRunIds::with_prefix(0x5210);
    let (done, open) = (
        ids.next_run_id(),
        SequentialRunIds::with_prefix(0x5211).next_run_id(),
    );
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let drafts = common::drafts(None);
    let recorder = factory.create(done, None).await.unwrap();
    for d in &drafts {
        recorder.record(d.clone()).await.unwrap();
    }
    recorder.close().await.unwrap();
    let running = factory.create(open, None).await.unwrap();
    running.record(drafts[0].clone()).await.unwrap();

    let port = NatsRunStore::connect(store.url(), options()).unwrap();
    // Called from inside this runtime: the port waits on its own thread's runtime.
    let runs = port.runs().unwrap();
    assert_eq!(runs.len(), 2);
    let state = |id| runs.iter().find(|r| r.run_id == id).map(|r| r.state);
    // The recorded run ends with a failed `run.completed`.
    assert_eq!(state(done), Some(RunState::Failed));
    assert_eq!(state(open), Some(RunState::Running));
    assert_eq!(port.resolve(&done.to_string()).unwrap(), done);
    assert_eq!(port.resolve(&done.to_string()[..8]).unwrap(), done);
    let both = port.resolve("0000521").unwrap_err().to_string();
    assert!(both.contains("ambiguous: 2 runs match"), "{both}");
    assert!(port.resolve("ffff").is_err());

    let read = port.read(done).unwrap().unwrap();
    let lines = store.run_lines(done).await.unwrap();
    assert_eq!(read.state, RunState::Failed);
    assert_eq!(read.location, format!("{}#{done}", store.url()));
    let bytes = read.into_bytes().unwrap();
    assert_eq!(bytes, lines.concat());
    assert_eq!(
        String::from_utf8(bytes).unwrap().lines().count(),
        drafts.len()
    );
    assert_eq!(port.read(open).unwrap().unwrap().state, RunState::Running);

    // The runner is gone: its lease lapses, and the run is abandoned.
    store.release_lease(open).await.unwrap();
    assert_eq!(port.read(open).unwrap().unwrap().state, RunState::Abandoned);
    let never = ids.next_run_id();
    assert!(port.read(never).unwrap().is_none());

    // From plain threads, at once.
    let port = std::sync::Arc::new(port);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let port = port.clone();
            std::thread::spawn(move || {
                port.read(done)
                    .unwrap()
                    .unwrap()
                    .into_bytes()
                    .unwrap()
                    .len()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), lines.concat().len());
    }
}

#[test]
fn a_url_without_a_store_is_refused_and_creates_nothing() {
    let Some(server) = common::server() else {
        return;
    };
    let url = transcript_nats::StorageUrl::parse(&format!("{}/NOSUCH", server.url())).unwrap();
    let err = NatsRunStore::connect(&url, options()).unwrap_err();
    assert!(err.to_string().contains("no transcript store"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_port_follows_a_run_live_and_says_when_its_runner_is_gone() {
    let Some(server) = common::server() else {
        return;
    };
    // The runner's lease is long (its renewals never come during the test: the test releases
    // it itself); the follower's is short, so it confirms a lapse within about a second.
    let store = common::store(&server.url(), options()).await;
    let options = StreamOptions {
        lease: std::time::Duration::from_secs(1),
        ..StreamOptions::default()
    };
    let run = SequentialRunIds::with_prefix(0x5212).next_run_id();
    let factory = NatsRecorderFactory::new(store.clone(), common::clock());
    let recorder = factory.create(run, None).await.unwrap();
    let drafts = common::drafts(None);
    recorder.record(drafts[0].clone()).await.unwrap();

    let port = std::sync::Arc::new(NatsRunStore::connect(store.url(), options).unwrap());
    assert!(port.contains(run).unwrap());
    // The follower runs on a plain thread; it tells us each line it gets.
    let (seen, lines) = std::sync::mpsc::channel();
    let follower = {
        let port = port.clone();
        std::thread::spawn(move || {
            port.follow(run, true, &mut |item| {
                if let FollowItem::Line(l) = item {
                    let _ = seen.send(String::from_utf8_lossy(l).into_owned());
                }
                std::ops::ControlFlow::Continue(())
            })
        })
    };
    let first = lines.recv().unwrap();
    assert!(first.contains("\"seq\":1"), "{first}");
    // Live: a line recorded after the follower started reaches it.
    recorder.record(drafts[1].clone()).await.unwrap();
    let second = lines.recv().unwrap();
    assert!(second.contains("\"seq\":2"), "{second}");
    assert!(!second.ends_with('\n'));
    // The runner is gone without run.completed: the follow ends, abandoned.
    store.release_lease(run).await.unwrap();
    let end = tokio::task::spawn_blocking(move || follower.join().unwrap())
        .await
        .unwrap();
    assert_eq!(end, Ok(FollowEnd::Abandoned));

    // A caller that stops is let go at once, and the store keeps answering.
    let end = port.follow(run, false, &mut |item| match item {
        FollowItem::Line(_) => std::ops::ControlFlow::Break(()),
        _ => std::ops::ControlFlow::Continue(()),
    });
    assert_eq!(end, Ok(FollowEnd::Stopped));
    assert_eq!(port.runs().unwrap().len(), 1);
    drop(recorder);
}
