//! `transcript mirror` SIGKILLed at random moments (#44 item 4: "a mirror killed at any point
//! and restarted produces the same files"). A stream holds several runs, two of them large;
//! a seeded loop starts `transcript mirror nats://… --to <dir>`, waits until the files have
//! grown past a seeded byte count (observed from outside, by polling the directory with a
//! bounded wait), SIGKILLs it, checks that every file is still a prefix of its golden, and
//! starts it again, 8 times per copy of the store; then lets it finish. Every file is then
//! byte-identical to what the file recorder writes for the same events (no line missing, none
//! twice, seqs 1..=n), and one more mirror changes nothing. The second test does the same with
//! `mirror --follow` while another thread is still recording the runs (interleaved).
//!
//! The kill points are reproducible from the seed; the exact instant is not (the byte count
//! is observed by polling, so a kill lands at the first poll past its point).
//!
//! The seed is printed; `TRANSCRIPT_MIRROR_KILL_SEED=<seed>` replays a failing sequence and
//! `TRANSCRIPT_MIRROR_KILL_TRIALS=<n>` runs more kills (default 8, one copy, well under a
//! minute; more kills make more copies, each into a fresh directory with its own consumer).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bin, text};
use transcript_domain::{
    ContentBlock, EventDraft, Fidelity, ManualClock, MessagePayload, Payload, RecorderFactory,
    Role, RunId, RunIdGenerator, SequentialRunIds, StepPayload, Timestamp,
};
use transcript_nats::{NatsRecorderFactory, NatsStore, StorageUrl, StreamOptions, testing};

/// splitmix64: a seeded, reproducible sequence of kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `lo..hi` (`lo` when the range is empty).
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next() % (hi - lo)
        }
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::stepping(
        Timestamp::parse("2026-03-04T05:06:07.890Z").unwrap(),
        3,
    ))
}

/// A run of `turns` assistant messages of `size` bytes of text each (distinct per run and turn).
fn drafts(run: usize, turns: usize, size: usize) -> Vec<EventDraft> {
    let mut drafts = vec![
        EventDraft::run_level(Payload::RunStarted(StepPayload::new("mirror", "workflow"))),
        EventDraft::new(
            "agent",
            0,
            Payload::StepStarted(StepPayload::new("claude", "agent")),
        ),
    ];
    for turn in 0..turns {
        let unit = format!("run {run} turn {turn}: héllo \"quoted\" \u{2028}\n");
        let body: String = unit.chars().cycle().take(size).collect();
        let message = MessagePayload::new(
            Role::Assistant,
            vec![ContentBlock::text(Fidelity::AgentEmitted, body)],
        );
        drafts.push(EventDraft::new(
            "agent",
            0,
            Payload::MessageAssistant(message),
        ));
    }
    drafts.push(EventDraft::new(
        "agent",
        0,
        Payload::StepCompleted(StepPayload::new("claude", "agent")),
    ));
    drafts.push(EventDraft::run_level(Payload::RunCompleted(
        StepPayload::new("mirror", "workflow"),
    )));
    drafts
}

async fn record(factory: &dyn RecorderFactory, run_id: RunId, drafts: Vec<EventDraft>) {
    let recorder = factory.create(run_id, None).await.unwrap();
    for d in drafts {
        recorder.record(d).await.unwrap();
    }
    recorder.close().await.unwrap();
}

/// (turns, bytes per turn) of each run: small runs and two large ones (~6 MB each).
const SHAPES: [(usize, usize); 5] = [(3, 200), (40, 2_000), (150, 40_000), (5, 100), (90, 70_000)];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The runs' ids, in [`SHAPES`] order.
fn run_ids() -> Vec<RunId> {
    let ids = SequentialRunIds::with_prefix(0x4444);
    SHAPES.iter().map(|_| ids.next_run_id()).collect()
}

/// What the file recorder writes for the runs: each file's name and bytes (the goldens).
fn goldens() -> BTreeMap<String, Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        for (run, (run_id, (turns, size))) in run_ids().into_iter().zip(SHAPES).enumerate() {
            let files = transcript_infra::JsonlRecorderFactory::new(dir.path()).with_clock(clock());
            record(&files, run_id, drafts(run, turns, size)).await;
        }
    });
    let out: BTreeMap<String, Vec<u8>> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl"))
        .map(|name| {
            let bytes = std::fs::read(dir.path().join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    assert_eq!(out.len(), SHAPES.len(), "{:?}", out.keys());
    out
}

/// Records the runs to the stream at `url`, all at once (their events interleave).
fn record_to(url: &str) {
    runtime().block_on(async {
        let store = NatsStore::connect(&StorageUrl::parse(url).unwrap(), StreamOptions::default())
            .await
            .unwrap();
        let mut runs = tokio::task::JoinSet::new();
        for (run, (run_id, (turns, size))) in run_ids().into_iter().zip(SHAPES).enumerate() {
            let nats = NatsRecorderFactory::new(store.clone(), clock());
            runs.spawn(async move { record(&nats, run_id, drafts(run, turns, size)).await });
        }
        while let Some(done) = runs.join_next().await {
            done.unwrap();
        }
    });
}

/// The bytes of the mirrored run files (by name) in `dir`.
fn mirrored(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// The total size of the files in `dir` (0 before it exists).
fn size(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}

/// `transcript mirror url --to dir`, with the durable consumer named after the directory (one
/// consumer per mirror directory).
fn mirror_command(url: &str, dir: &Path, follow: bool) -> Command {
    let consumer = dir.file_name().unwrap().to_str().unwrap();
    let mut c = bin();
    c.args(["mirror", url, "--consumer", consumer, "--to"])
        .arg(dir);
    if follow {
        c.arg("--follow");
    }
    c
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

/// The seed (fresh each run from std's randomly keyed hasher, or the one given to replay)
/// and the number of kills.
fn seed_and_trials(what: &str, total: u64) -> (u64, u64) {
    let seed = env_number("TRANSCRIPT_MIRROR_KILL_SEED").unwrap_or_else(|| {
        std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 44)
    });
    let trials = env_number("TRANSCRIPT_MIRROR_KILL_TRIALS").unwrap_or(8);
    println!(
        "{what}: seed {seed} (TRANSCRIPT_MIRROR_KILL_SEED={seed} replays it), {trials} kills, {total} bytes"
    );
    (seed, trials)
}

/// Starts the mirror `trials` times, SIGKILLing it at seeded points (see the module docs).
fn kill_loop(
    (url, dir, follow): (&str, &Path, bool),
    goldens: &BTreeMap<String, Vec<u8>>,
    (seed, trials): (u64, u64),
) {
    let total: u64 = goldens.values().map(|b| b.len() as u64).sum();
    let mut rng = Rng(seed);
    // Seeded kill points spread over the whole copy, in order: each trial kills the mirror
    // once the files hold its point (or at its first new byte when they already do).
    let mut points: Vec<u64> = (0..trials).map(|_| rng.between(1, total)).collect();
    points.sort_unstable();
    let mut kills = 0;
    for (trial, point) in points.into_iter().enumerate() {
        // Never past the end: once everything is there, the kill lands at start-up.
        let target = point.max(size(dir) + 1).min(total);
        let mut child = mirror_command(url, dir, follow)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let killed = loop {
            if let Some(status) = child.try_wait().unwrap() {
                // Finished (or failed) before the point was reached.
                let mut stderr = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
                assert!(status.success(), "trial {trial}: {stderr}");
                break false;
            }
            if size(dir) >= target {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                break true;
            }
            assert!(
                Instant::now() < deadline,
                "trial {trial} (seed {seed}): the mirror made no progress to {target} bytes in 30 s"
            );
            // A poll interval, not a race: the kill point is the byte count, whenever reached.
            std::thread::sleep(Duration::from_micros(200));
        };
        kills += u32::from(killed);
        // Whatever the moment, each file is a prefix of its golden (a torn last line is one
        // too): nothing duplicated, reordered or foreign.
        for (name, bytes) in mirrored(dir) {
            let golden = goldens
                .get(&name)
                .unwrap_or_else(|| panic!("trial {trial} (seed {seed}): a stray file {name}"));
            assert!(
                golden.starts_with(&bytes),
                "trial {trial} (seed {seed}): {name} ({} bytes) is not a prefix of its golden",
                bytes.len()
            );
        }
        println!(
            "trial {trial}: target {target}, {} bytes, {}",
            size(dir),
            if killed { "SIGKILLed" } else { "finished" }
        );
    }
    assert!(
        trials == 0 || kills > 0,
        "seed {seed}: no trial killed the mirror mid-way (it always finished first)"
    );
}

/// Lets the mirror finish, then checks every file against its golden, and that one more
/// mirror changes nothing.
fn finish_and_compare(url: &str, dir: &Path, goldens: &BTreeMap<String, Vec<u8>>, seed: u64) {
    // Let it finish: the file recorder's bytes exactly.
    let o = mirror_command(url, dir, false).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let got = mirrored(dir);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        goldens.keys().collect::<Vec<_>>()
    );
    for (name, golden) in goldens {
        let bytes = &got[name];
        // Seqs 1..=n, each once, in order (what "no duplicate or missing line" means here).
        let seqs: Vec<u64> = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                serde_json::from_slice::<serde_json::Value>(l).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{name}");
        assert!(
            bytes == golden,
            "seed {seed}: {name} differs from the file recorder's bytes"
        );
    }

    // Once more: nothing written, nothing changed.
    let o = mirror_command(url, dir, false).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(": 0 lines written, 0 already there"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(mirrored(dir), got);
}

/// Kills per copy: many kills are spread over several whole copies (each into a directory and
/// consumer of its own, from the start of the stream) rather than piled up at the end of one.
const KILLS_PER_COPY: u64 = 8;

/// Copies the store `trials / KILLS_PER_COPY` times (at least once), each copy killed at its
/// own seeded points then finished and compared; `after_first` runs once the first copy's
/// kills are done (the live test waits for its writer there).
fn copies(
    (url, tmp, follow): (&str, &Path, bool),
    goldens: &BTreeMap<String, Vec<u8>>,
    (seed, trials): (u64, u64),
    mut after_first: impl FnMut(),
) {
    for copy in 0..trials.div_ceil(KILLS_PER_COPY).max(1) {
        let dir = tmp.join(format!("mirror-{copy}"));
        let kills = KILLS_PER_COPY.min(trials - (copy * KILLS_PER_COPY).min(trials));
        kill_loop(
            (url, &dir, follow),
            goldens,
            (seed.wrapping_add(copy), kills),
        );
        if copy == 0 {
            after_first();
        }
        finish_and_compare(url, &dir, goldens, seed);
    }
}

#[test]
fn a_mirror_sigkilled_at_random_moments_ends_with_the_file_recorders_bytes() {
    let Some(server) = testing::single().unwrap() else {
        return;
    };
    let url = server.url();
    record_to(&url);
    let goldens = goldens();
    let total = goldens.values().map(|b| b.len() as u64).sum();
    let (seed, trials) = seed_and_trials("stored runs", total);
    let tmp = tempfile::tempdir().unwrap();
    copies((&url, tmp.path(), false), &goldens, (seed, trials), || {});
}

/// The same while the runs are being recorded: `mirror --follow` SIGKILLed at seeded points
/// as the runs' files grow, the runs recorded at once (interleaved) by another thread.
#[test]
fn a_following_mirror_sigkilled_while_runs_are_recorded_ends_with_the_same_bytes() {
    let Some(server) = testing::single().unwrap() else {
        return;
    };
    let url = server.url();
    let goldens = goldens();
    let total = goldens.values().map(|b| b.len() as u64).sum();
    let (seed, trials) = seed_and_trials("live runs", total);
    let tmp = tempfile::tempdir().unwrap();
    let mut writer = Some({
        let url = url.clone();
        std::thread::spawn(move || record_to(&url))
    });
    copies((&url, tmp.path(), true), &goldens, (seed, trials), || {
        if let Some(w) = writer.take() {
            w.join().unwrap();
        }
    });
}
