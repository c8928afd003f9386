//! NATS recorder benchmark (`cargo bench -p transcript-nats --bench nats`, run by
//! `cargo xtask bench`). Plain `main`, prints a table.
//!
//! Events/s for one run and for 64 concurrent runs, through a 1-node server and a 3-node
//! cluster (replicas 3), each as ratios to two baselines measured in the same rounds:
//! raw `async-nats` JetStream publishes of the same lines, each awaiting its ack before the
//! next (the engine's own limit for "ack before the next event"), and the file recorder
//! (`transcript-infra`, default durability) on the target directory's disk. Rounds are
//! interleaved; a ratio is the median of each round's paired ratio. Target: ≥ 0.5× the raw
//! publish rate at 64 runs. Pipelined raw publishes (every ack awaited at the end) are shown
//! for reference: what a recorder that did not wait for each ack could reach.
//!
//! Imports (#52 item 3): [`PipelinedPublisher`] publishing [`IMPORT_RUNS`] runs of
//! [`IMPORT_PER_RUN`] events one after the other (as `transcript import` publishes a staged
//! import), against raw pipelined publishes of the same lines (all sent, then every ack
//! awaited), in the same interleaved rounds. Target: ≥ 0.5× the raw pipelined rate.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use transcript_domain::{
    EventDraft, Fidelity, Payload, PreEncoded, RawJson, RecorderFactory, RunId, RunIdGenerator,
    Timestamp, ToolPayload,
};
use transcript_nats::testing::{self, ServerNode};
use transcript_nats::{
    DEFAULT_WINDOW, NatsRecorderFactory, NatsStore, PipelinedPublisher, StorageUrl, StreamOptions,
    run_subject,
};

const ROUNDS: usize = 3;
/// Events of the one-run case, and per run of the 64-run case.
const ONE_RUN: usize = 2000;
const RUNS: usize = 64;
const PER_RUN: usize = 100;
const TARGET: f64 = 0.5;
/// Runs of the import case, and events per run.
const IMPORT_RUNS: usize = 20;
const IMPORT_PER_RUN: usize = 2000;
/// Raw pipelined publishes' acks in flight (the client context's limit in `NatsStore`).
const RAW_WINDOW: usize = 4000;

fn draft() -> EventDraft {
    let input = RawJson::from_value(&serde_json::json!({
        "path": "src/lib.rs", "content": "x".repeat(240), "mode": "overwrite"
    }))
    .unwrap();
    EventDraft::new(
        "agent.edit",
        0,
        Payload::ToolCall(ToolPayload::call(
            "write_file",
            "call-1",
            input,
            Fidelity::Router,
        )),
    )
}

fn line() -> Bytes {
    let run = transcript_infra::RandomRunIds.next_run_id();
    let mut out = Vec::new();
    PreEncoded::new(run, None, &draft())
        .unwrap()
        .write_line(1, Timestamp::UNIX_EPOCH, &mut out);
    Bytes::from(out)
}

#[derive(Clone, Copy)]
enum Case {
    Raw,
    Pipelined,
    Ours,
    Files,
}

/// Events/s of `runs` concurrent writers of `per_run` events each.
async fn measure(case: Case, store: &NatsStore, dir: &Path, runs: usize, per_run: usize) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..runs {
        let run = transcript_infra::RandomRunIds.next_run_id();
        let (store, dir) = (store.clone(), dir.to_path_buf());
        tasks.push(tokio::spawn(async move {
            writer(case, &store, &dir, run, per_run).await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (runs * per_run) as f64 / started.elapsed().as_secs_f64()
}

async fn writer(case: Case, store: &NatsStore, dir: &Path, run: RunId, events: usize) {
    let js = store.jetstream();
    let line = line();
    match case {
        Case::Raw => {
            for _ in 0..events {
                js.publish(run_subject(&run), line.clone())
                    .await
                    .unwrap()
                    .await
                    .unwrap();
            }
        }
        Case::Pipelined => {
            // The client allows 4,096 acks in flight across the connection: a writer holding
            // more than its share un-awaited while the others do too would wait forever for a
            // permit (64 writers x 100 did, now and then), so each awaits its oldest past it.
            let share = RAW_WINDOW / RUNS;
            let mut acks = std::collections::VecDeque::with_capacity(events);
            for _ in 0..events {
                if acks.len() == share {
                    let ack: async_nats::jetstream::context::PublishAckFuture =
                        acks.pop_front().unwrap();
                    ack.await.unwrap();
                }
                acks.push_back(js.publish(run_subject(&run), line.clone()).await.unwrap());
            }
            for ack in acks {
                ack.await.unwrap();
            }
        }
        Case::Ours | Case::Files => {
            let clock = Arc::new(transcript_infra::SystemClock);
            let factory: Arc<dyn RecorderFactory> = match case {
                Case::Ours => Arc::new(NatsRecorderFactory::new(store.clone(), clock)),
                _ => Arc::new(transcript_infra::JsonlRecorderFactory::new(dir).with_clock(clock)),
            };
            let recorder = factory.create(run, None).await.unwrap();
            for _ in 0..events {
                recorder.record(draft()).await.unwrap();
            }
            recorder.close().await.unwrap();
        }
    }
}

/// Events/s of an import of `IMPORT_RUNS` × `IMPORT_PER_RUN` events: through the
/// [`PipelinedPublisher`] (`ours`), or raw pipelined publishes of the same lines.
async fn import(ours: bool, store: &NatsStore) -> f64 {
    let line = line();
    let runs: Vec<RunId> = (0..IMPORT_RUNS)
        .map(|_| transcript_infra::RandomRunIds.next_run_id())
        .collect();
    let started = Instant::now();
    if ours {
        let mut publisher = PipelinedPublisher::new(store.clone(), DEFAULT_WINDOW);
        for run in &runs {
            for seq in 1..=IMPORT_PER_RUN as u64 {
                publisher.publish(*run, seq, line.clone()).await.unwrap();
            }
        }
        let done = publisher.finish().await.unwrap();
        assert_eq!(done.events as usize, IMPORT_RUNS * IMPORT_PER_RUN);
    } else {
        // As many acks in flight as the client allows (its context's 4,096), the oldest
        // awaited first: what an import that checks nothing could reach.
        let js = store.jetstream();
        let mut acks: std::collections::VecDeque<async_nats::jetstream::context::PublishAckFuture> =
            std::collections::VecDeque::with_capacity(RAW_WINDOW);
        for run in &runs {
            for _ in 0..IMPORT_PER_RUN {
                if acks.len() == RAW_WINDOW {
                    acks.pop_front().unwrap().await.unwrap();
                }
                acks.push_back(js.publish(run_subject(run), line.clone()).await.unwrap());
            }
        }
        for ack in acks {
            ack.await.unwrap();
        }
    }
    (IMPORT_RUNS * IMPORT_PER_RUN) as f64 / started.elapsed().as_secs_f64()
}

/// The import case of one topology; returns whether the target held.
async fn import_case(name: &str, store: &NatsStore) -> bool {
    let (mut ours, mut raw, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let r = import(false, store).await;
        let o = import(true, store).await;
        ours.push(o);
        raw.push(r);
        ratio.push(o / r);
    }
    let ratio = median(ratio);
    let ok = ratio >= TARGET;
    println!(
        "{name:<7} import   pipelined publisher {:>9.0} ev/s | raw pipelined {:>9.0} | publisher/raw {ratio:>5.2}x (target >= {TARGET}: {})",
        median(ours),
        median(raw),
        if ok { "ok" } else { "MISS" }
    );
    ok
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One topology: every case in interleaved rounds; returns whether the target held.
async fn topology(name: &str, url: &str, replicas: usize, dir: &Path) -> bool {
    let options = StreamOptions {
        replicas: Some(replicas),
        ..StreamOptions::default()
    };
    let mut store = None;
    for _ in 0..20 {
        if let Ok(s) = NatsStore::connect(&StorageUrl::parse(url).unwrap(), options.clone()).await {
            store = Some(s);
            break;
        }
    }
    let store = store.expect("JetStream answers");
    let mut pass = true;
    for (label, runs, per_run) in [("1 run", 1, ONE_RUN), ("64 runs", RUNS, PER_RUN)] {
        let mut rows: [Vec<f64>; 4] = Default::default();
        let (mut vs_raw, mut vs_files) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let mut round = [0.0; 4];
            for (i, case) in [Case::Raw, Case::Pipelined, Case::Ours, Case::Files]
                .into_iter()
                .enumerate()
            {
                round[i] = measure(case, &store, dir, runs, per_run).await;
                rows[i].push(round[i]);
            }
            vs_raw.push(round[2] / round[0]);
            vs_files.push(round[2] / round[3]);
        }
        let (raw, files) = (median(vs_raw), median(vs_files));
        let target = runs == RUNS;
        let ok = !target || raw >= TARGET;
        pass &= ok;
        println!(
            "{name:<7} {label:<8} ours {:>9.0} ev/s | raw acked {:>9.0} | raw pipelined {:>9.0} | file recorder {:>9.0} | ours/raw {raw:>5.2}x{} | ours/files {files:>5.2}x",
            median(rows[2].clone()),
            median(rows[0].clone()),
            median(rows[1].clone()),
            median(rows[3].clone()),
            if target {
                format!(" (target >= {TARGET}: {})", if ok { "ok" } else { "MISS" })
            } else {
                String::new()
            },
        );
    }
    pass & import_case(name, &store).await
}

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("bench-transcript-nats");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn main() {
    let servers: Option<(ServerNode, Vec<ServerNode>)> =
        match (testing::single(), testing::cluster(3)) {
            (Ok(Some(one)), Ok(Some(three))) => Some((one, three)),
            (Err(e), _) | (_, Err(e)) => panic!("{e}"),
            _ => None,
        };
    let Some((one, three)) = servers else {
        println!("skipped: nats-server not found (set TRANSCRIPT_NATS_SERVER)");
        return;
    };
    let dir = bench_dir();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pass = runtime.block_on(async {
        let a = topology("1-node", &one.url(), 1, &dir).await;
        let b = topology("3-node", &testing::urls(&three), 3, &dir).await;
        a && b
    });
    let _ = std::fs::remove_dir_all(&dir);
    drop((one, three));
    if !pass {
        std::process::exit(1);
    }
}
