//! Recorder benchmark (`cargo bench -p transcript-infra --bench recorder`,
//! run by `cargo xtask bench`). Plain `main`, prints a table.
//!
//! Every figure is a ratio to baselines measured in the same run on a file
//! in the target directory (a real disk; never tmpfs): (1a) one `write(2)`
//! per pre-serialized 377-byte line on an O_APPEND file, (1b) 64 KiB
//! buffered writes, (1c) write + fdatasync per line, (1d) write + fdatasync
//! per 64 lines. Cases run in interleaved rounds; a ratio is the median of
//! each round's ratio to the baseline measured in that same round (paired,
//! so drift between rounds cancels out), and every round's ratio of the
//! recorder cases is printed under the table.
//!
//! The `scale` group (`scale.rs`, measured once, after the rounds) shows
//! what the polling costs with many recorders: CPU time of 200 idle
//! recorders, and 1 vs 200 concurrent recorders flat out and at an agent's
//! pace.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use transcript_domain::{
    EventDraft, Fidelity, Payload, PreEncoded, RawJson, Recorder, RunId, RunIdGenerator,
    SequentialRunIds, Timestamp, ToolPayload,
};
use transcript_infra::{Durability, JsonlRecorder, ReadItem, SystemClock, TranscriptReader};

#[path = "recorder/scale.rs"]
mod scale;

const N: usize = 200_000;
const LINE: usize = 377;
/// Interleaved rounds (`TRANSCRIPT_BENCH_ROUNDS` overrides, for tuning:
/// these 2-core machines move ±30% between runs).
const ROUNDS: usize = 5;

fn rounds() -> usize {
    std::env::var("TRANSCRIPT_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(ROUNDS)
}

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("bench-transcript-infra");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A tool call whose canonical line is 377 bytes at a 6-digit seq.
fn draft(i: u64, pad: usize) -> EventDraft {
    let input =
        RawJson::from_value(&serde_json::json!({"cmd": "x".repeat(pad), "i": i % 10})).unwrap();
    EventDraft::new(
        "agent.step",
        0,
        Payload::ToolCall(ToolPayload::call(
            "bash",
            "call-0001",
            input,
            Fidelity::Router,
        )),
    )
}

fn padding(run: RunId) -> usize {
    let probe = |pad| {
        let mut out = Vec::new();
        PreEncoded::new(run, None, &draft(1, pad))
            .unwrap()
            .write_line(100_000, Timestamp::UNIX_EPOCH, &mut out);
        out.len()
    };
    LINE - probe(0)
}

fn lines(run: RunId, pad: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut out = Vec::with_capacity(LINE + 8);
            PreEncoded::new(run, None, &draft(i as u64, pad))
                .unwrap()
                .write_line(i as u64 + 1, Timestamp::UNIX_EPOCH, &mut out);
            out
        })
        .collect()
}

/// Writes back whatever earlier cases left dirty, outside any timing, so
/// every case starts from the same disk state.
fn settle() {
    rustix::fs::sync();
}

fn append_file(path: &Path) -> File {
    let _ = std::fs::remove_file(path);
    settle();
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .unwrap()
}

/// Events per second.
fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

fn base_1a(path: &Path, lines: &[Vec<u8>]) -> f64 {
    let mut f = append_file(path);
    let t = Instant::now();
    for l in lines {
        f.write_all(l).unwrap();
    }
    let r = rate(lines.len(), t.elapsed());
    let _ = std::fs::remove_file(path);
    r
}

fn base_1b(path: &Path, lines: &[Vec<u8>]) -> f64 {
    let f = append_file(path);
    let t = Instant::now();
    let mut w = BufWriter::with_capacity(64 * 1024, f);
    for l in lines {
        w.write_all(l).unwrap();
    }
    w.flush().unwrap();
    let r = rate(lines.len(), t.elapsed());
    let _ = std::fs::remove_file(path);
    r
}

fn base_sync_every(path: &Path, lines: &[Vec<u8>], every: usize) -> f64 {
    let mut f = append_file(path);
    let t = Instant::now();
    let mut buf = Vec::with_capacity(every * LINE);
    for chunk in lines.chunks(every) {
        buf.clear();
        for l in chunk {
            buf.extend_from_slice(l);
        }
        f.write_all(&buf).unwrap();
        f.sync_data().unwrap();
    }
    let r = rate(lines.len(), t.elapsed());
    let _ = std::fs::remove_file(path);
    r
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn open(dir: &Path, run: RunId, durability: Durability) -> Arc<JsonlRecorder> {
    open_buffered(
        dir,
        run,
        durability,
        transcript_infra::DEFAULT_SUBSCRIBER_BUFFER,
    )
}

/// Subscriber buffer of the keeping-up fan-out case: consumers that keep up
/// on average still lag in bursts when 2 cores run a producer and 4
/// consumers; a deeper buffer (a configuration, not a code path) absorbs it.
const KEEP_UP_BUFFER: usize = 4096;

fn open_buffered(
    dir: &Path,
    run: RunId,
    durability: Durability,
    buffer: usize,
) -> Arc<JsonlRecorder> {
    let _ = std::fs::remove_file(dir.join(run.file_name()));
    settle();
    Arc::new(
        JsonlRecorder::builder(dir, run)
            .clock(Arc::new(SystemClock))
            .durability(durability)
            .subscriber_buffer(buffer)
            .open()
            .unwrap(),
    )
}

/// `producers` tasks record `n` events in total; returns events/s.
fn record(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    run: RunId,
    pad: usize,
    producers: usize,
    n: usize,
    durability: Durability,
) -> f64 {
    let rec = open(dir, run, durability);
    let per = n / producers;
    let drafts: Vec<Vec<EventDraft>> = (0..producers)
        .map(|p| (0..per).map(|i| draft((p * per + i) as u64, pad)).collect())
        .collect();
    let took = rt.block_on(async {
        let t = Instant::now();
        if producers == 1 {
            for d in drafts.into_iter().flatten() {
                rec.record(d).await.unwrap();
            }
        } else {
            let mut tasks = Vec::new();
            for ds in drafts {
                let rec = Arc::clone(&rec);
                tasks.push(tokio::spawn(async move {
                    for d in ds {
                        rec.record(d).await.unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
        let took = t.elapsed();
        rec.close().await.unwrap();
        if std::env::var_os("TRANSCRIPT_BENCH_VERBOSE").is_some() {
            let s = rec.write_stats();
            eprintln!(
                "  {producers} producers: {} batches, {:.1} per batch",
                s.batches,
                s.entries as f64 / s.batches as f64
            );
        }
        took
    });
    // Every case starts from the same disk state: earlier cases' files do
    // not pile up (hundreds of MB of them measurably slowed later writes).
    let _ = std::fs::remove_file(rec.path());
    rate(per * producers, took)
}

/// Who consumes the live stream while one producer records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Consumers {
    /// Nobody: recording alone.
    None,
    /// This many subscribers that keep up.
    KeepingUp(usize),
    /// No subscriber, but the slow subscriber's 1 ms pacing task runs: the
    /// control of the slow case. A task woken every millisecond changes how
    /// the runtime's workers park, which alone cost the producer 0.62x of
    /// recording alone in A/B runs (0.55x with the slow subscriber, 0.81x
    /// for a subscriber that never reads and has no timer).
    Pacer,
    /// One subscriber that reads a tenth of the events, paced every 1 ms.
    Slow,
}

/// One producer task with `consumers`. Returns (events/s, delivered,
/// dropped).
fn record_with_subscribers(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    run: RunId,
    pad: usize,
    n: usize,
    consumers: Consumers,
) -> (f64, u64, u64) {
    let (subs, buffer) = match consumers {
        Consumers::None | Consumers::Pacer => (0, transcript_infra::DEFAULT_SUBSCRIBER_BUFFER),
        Consumers::KeepingUp(k) => (k, KEEP_UP_BUFFER),
        Consumers::Slow => (1, transcript_infra::DEFAULT_SUBSCRIBER_BUFFER),
    };
    let paced = matches!(consumers, Consumers::Pacer | Consumers::Slow);
    let rec = open_buffered(dir, run, Durability::None, buffer);
    let drafts: Vec<EventDraft> = (0..n).map(|i| draft(i as u64, pad)).collect();
    rt.block_on(async {
        let mut tasks = Vec::new();
        // The slow subscriber paces itself from this counter (1 ms ticks),
        // so the producer pays nothing for the pacing.
        let produced = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        if consumers == Consumers::Pacer {
            let done = Arc::clone(&done);
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(1));
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    tick.tick().await;
                }
                (0, 0)
            }));
        }
        for _ in 0..subs {
            let mut sub = rec.subscribe(None).await.unwrap();
            let (produced, done) = (Arc::clone(&produced), Arc::clone(&done));
            tasks.push(tokio::spawn(async move {
                let mut got = 0u64;
                if paced {
                    let mut tick = tokio::time::interval(Duration::from_millis(1));
                    while !done.load(std::sync::atomic::Ordering::Acquire) {
                        tick.tick().await;
                        let target = produced.load(std::sync::atomic::Ordering::Relaxed) / 10;
                        while got < target {
                            if sub.next().await.is_none() {
                                return (got, sub.dropped());
                            }
                            got += 1;
                        }
                    }
                }
                while sub.next().await.is_some() {
                    got += 1;
                }
                (got, sub.dropped())
            }));
        }
        // The producer is a task, as the executor's emitters are.
        let producer = {
            let rec = Arc::clone(&rec);
            let produced = Arc::clone(&produced);
            tokio::spawn(async move {
                let t = Instant::now();
                for d in drafts {
                    rec.record(d).await.unwrap();
                    produced.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                t.elapsed()
            })
        };
        let took = producer.await.unwrap();
        done.store(true, std::sync::atomic::Ordering::Release);
        rec.close().await.unwrap();
        let (mut delivered, mut dropped) = (0, 0);
        for c in tasks {
            let (g, d) = c.await.unwrap();
            delivered += g;
            dropped += d;
        }
        let _ = std::fs::remove_file(rec.path());
        (rate(n, took), delivered, dropped)
    })
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PlainEvent<'a> {
    seq: u64,
    run_id: String,
    parent_run_id: Option<String>,
    child_run_id: Option<String>,
    #[serde(rename = "type")]
    ty: String,
    path: String,
    iteration: u64,
    timestamp: String,
    #[serde(borrow)]
    payload: PlainTool<'a>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PlainTool<'a> {
    name: String,
    call_id: String,
    #[serde(borrow)]
    input: &'a RawValue,
    #[serde(borrow)]
    output: &'a RawValue,
    error: Option<String>,
    fidelity: String,
}

fn read_plain(path: &Path) -> (f64, u64) {
    let t = Instant::now();
    let mut r = BufReader::with_capacity(64 * 1024, File::open(path).unwrap());
    let mut line = Vec::new();
    let mut n = 0u64;
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).unwrap() == 0 {
            break;
        }
        let ev: PlainEvent<'_> = serde_json::from_slice(&line).unwrap();
        n += u64::from(ev.seq > 0);
    }
    (rate(n as usize, t.elapsed()), n)
}

fn read_ours(path: &Path) -> (f64, u64) {
    let t = Instant::now();
    let mut n = 0u64;
    for item in TranscriptReader::open(path).unwrap() {
        if let Ok(ReadItem::Event(e)) = item {
            n += u64::from(e.event.seq > 0);
        }
    }
    (rate(n as usize, t.elapsed()), n)
}

fn write_file(path: &Path, run: RunId, pad: usize, bytes: u64) {
    let mut w = BufWriter::with_capacity(1 << 20, append_file(path));
    let mut written = 0u64;
    let mut seq = 1u64;
    let pre = PreEncoded::new(run, None, &draft(1, pad)).unwrap();
    let mut buf = Vec::new();
    while written < bytes {
        buf.clear();
        pre.write_line(seq, Timestamp::UNIX_EPOCH, &mut buf);
        w.write_all(&buf).unwrap();
        written += buf.len() as u64;
        seq += 1;
    }
    w.flush().unwrap();
}

/// Child mode: read the file with the tolerant reader, print VmHWM (KiB).
fn reader_child(path: &str) {
    let mut n = 0u64;
    for item in TranscriptReader::open(path).unwrap() {
        if let Ok(ReadItem::Event(_)) = item {
            n += 1;
        }
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap();
    println!("{n} {hwm}");
}

fn child_hwm_kib(path: &Path) -> (u64, u64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env("TRANSCRIPT_BENCH_READER_CHILD", path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut it = text.split_whitespace().map(|v| v.parse::<u64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Row {
    case: String,
    value: String,
    ratio: String,
    target: String,
    verdict: &'static str,
}

fn row(case: &str, value: String, ratio: f64, target: &str, pass: bool) -> Row {
    Row {
        case: case.to_owned(),
        value,
        ratio: if ratio < 0.01 {
            format!("{ratio:.4}")
        } else {
            format!("{ratio:.2}")
        },
        target: target.to_owned(),
        verdict: if pass { "PASS" } else { "MISS" },
    }
}

fn main() {
    if let Ok(path) = std::env::var("TRANSCRIPT_BENCH_READER_CHILD") {
        reader_child(&path);
        return;
    }
    let dir = bench_dir();
    let ids = SequentialRunIds::with_prefix(0xbe7c);
    let run = ids.next_run_id();
    let pad = padding(run);
    let all_lines = lines(run, pad, N);
    println!(
        "transcript-infra recorder bench: {N} events of {} bytes, files in {}",
        all_lines[100_000].len(),
        dir.display()
    );
    let rt = runtime();
    let base = dir.join("baseline.jsonl");
    let mut m: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut fan = (0u64, 0u64, 0u64, 0u64);
    // TRANSCRIPT_BENCH_ONLY=record,fan,... runs a subset (for tuning);
    // the table then shows only what was measured.
    let only = std::env::var("TRANSCRIPT_BENCH_ONLY").ok();
    let want = |group: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|g| g == group))
    };
    let rounds = rounds();
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        m.entry("1a").or_default().push(base_1a(&base, &all_lines));
        m.entry("1b").or_default().push(base_1b(&base, &all_lines));
        if want("always") {
            m.entry("1c")
                .or_default()
                .push(base_sync_every(&base, &all_lines[..200], 1));
            m.entry("1d")
                .or_default()
                .push(base_sync_every(&base, &all_lines[..12_800], 64));
        }
        if want("record") || want("r1") {
            m.entry("r1").or_default().push(record(
                &rt,
                &dir,
                ids.next_run_id(),
                pad,
                1,
                N,
                Durability::None,
            ));
        }
        if want("record") || want("r8") {
            m.entry("r8").or_default().push(record(
                &rt,
                &dir,
                ids.next_run_id(),
                pad,
                8,
                N,
                Durability::None,
            ));
        }
        if want("always") {
            m.entry("r64a").or_default().push(record(
                &rt,
                &dir,
                ids.next_run_id(),
                pad,
                64,
                12_800,
                Durability::Always,
            ));
        }
        if want("fan") {
            let n_fan = 100_000;
            let fan_case = |c| record_with_subscribers(&rt, &dir, ids.next_run_id(), pad, n_fan, c);
            let (alone, _, _) = fan_case(Consumers::None);
            let (four, delivered, dropped) = fan_case(Consumers::KeepingUp(4));
            let (paced, _, _) = fan_case(Consumers::Pacer);
            let (slow, sdel, sdrop) = fan_case(Consumers::Slow);
            m.entry("f0").or_default().push(alone);
            m.entry("f4").or_default().push(four);
            m.entry("f0p").or_default().push(paced);
            m.entry("fslow").or_default().push(slow);
            fan = (
                fan.0 + delivered,
                fan.1 + dropped,
                fan.2 + sdel,
                fan.3 + sdrop,
            );
        }
    }
    // Many recorders: idle CPU, 1 vs 200 flat out and paced.
    let scaled = want("scale").then(|| {
        eprintln!("scale: idle, flat out, paced");
        let d = |i| draft(i, pad);
        let idle = scale::idle_cpu(&rt, &dir, &ids, d);
        let one = scale::flat_out(&rt, &dir, &ids, 1, N, d);
        let many = scale::flat_out(&rt, &dir, &ids, scale::MANY, N, d);
        let paced_one = scale::paced(&rt, &dir, &ids, 1, d);
        let paced_many = scale::paced(&rt, &dir, &ids, scale::MANY, d);
        (idle, one, many, paced_one, paced_many)
    });
    // Reader throughput on a 200k-line file written by the recorder's encoder.
    let read_path = dir.join("read.jsonl");
    let mut plain = Vec::new();
    let mut ours = Vec::new();
    if want("read") {
        write_file(&read_path, run, pad, (N * LINE) as u64);
    }
    for _ in 0..if want("read") { rounds } else { 0 } {
        plain.push(read_plain(&read_path).0);
        ours.push(read_ours(&read_path).0);
    }
    // Reader peak memory on 100 MB and 400 MB files.
    let small = dir.join("mem-100.jsonl");
    let large = dir.join("mem-400.jsonl");
    let ((n_small, hwm_small), (n_large, hwm_large)) = if want("mem") {
        write_file(&small, run, pad, 100 << 20);
        write_file(&large, run, pad, 400 << 20);
        (child_hwm_kib(&small), child_hwm_kib(&large))
    } else {
        ((0, 0), (0, 0))
    };
    let _ = std::fs::remove_file(&small);
    let _ = std::fs::remove_file(&large);

    let g = |k: &str| m.get(k).map_or(f64::NAN, |v| median(v.clone()));
    // A ratio is the median of each round's ratio to the baseline measured
    // in that same round (paired, so drift between rounds cancels out).
    let paired = |k: &str, base: &str| match (m.get(k), m.get(base)) {
        (Some(v), Some(b)) => median(v.iter().zip(b).map(|(v, b)| v / b).collect()),
        _ => f64::NAN,
    };
    let (a, b, c, d) = (g("1a"), g("1b"), g("1c"), g("1d"));
    let k = |r: f64| {
        if r < 10_000.0 {
            format!("{:.2}k ev/s", r / 1000.0)
        } else {
            format!("{:.0}k ev/s", r / 1000.0)
        }
    };
    let mut rows = vec![
        row("1a write(2) per line (baseline)", k(a), 1.0, "-", true),
        row("1b 64 KiB buffered writes", k(b), b / a, "-", true),
        row("1c write + fdatasync per line", k(c), c / a, "-", true),
        row("1d write + fdatasync per 64 lines", k(d), d / a, "-", true),
    ];
    let (r1, r1a) = (g("r1"), paired("r1", "1a"));
    rows.push(row(
        "record, 1 producer, None (vs 1a)",
        k(r1),
        r1a,
        ">= 0.45",
        r1a >= 0.45,
    ));
    // Reported, no longer a target (issue 23 retired it).
    let (r8, r8a) = (g("r8"), paired("r8", "1a"));
    rows.push(row(
        "record, 8 producers, None (vs 1a)",
        k(r8),
        r8a,
        "-",
        true,
    ));
    let (r64, r64d) = (g("r64a"), paired("r64a", "1d"));
    rows.push(row(
        "record, 64 producers, Always (vs 1d)",
        k(r64),
        r64d,
        ">= 0.50",
        r64d >= 0.5,
    ));
    let (p, o, op) = if ours.is_empty() {
        (f64::NAN, f64::NAN, f64::NAN)
    } else {
        let op = median(ours.iter().zip(&plain).map(|(o, p)| o / p).collect());
        (median(plain), median(ours), op)
    };
    rows.push(row(
        "reader, tolerant (vs plain derive struct)",
        format!("{} vs {}", k(o), k(p)),
        op,
        ">= 0.80",
        op >= 0.8,
    ));
    let diff_mib = (hwm_large as f64 - hwm_small as f64) / 1024.0;
    rows.push(Row {
        case: format!("reader VmHWM 100 MB ({n_small} ev) vs 400 MB ({n_large} ev)"),
        value: format!(
            "{:.1} / {:.1} MiB",
            hwm_small as f64 / 1024.0,
            hwm_large as f64 / 1024.0
        ),
        ratio: format!("{diff_mib:+.1} MiB"),
        target: "< 8 MiB".to_owned(),
        verdict: if diff_mib.abs() < 8.0 { "PASS" } else { "MISS" },
    });
    let (f4, fs) = (g("f4"), g("fslow"));
    let time_ratio = paired("f0", "f4"); // time with 4 subscribers / time alone
    // The slow subscriber against recording with the same pacing task and
    // no subscriber: what the subscriber itself costs the producer.
    let slow_ratio = paired("fslow", "f0p");
    rows.push(row(
        &format!(
            "fan-out to 4 keeping-up subscribers, buffer {KEEP_UP_BUFFER}: time vs record alone (delivered {}, dropped {})",
            fan.0, fan.1
        ),
        k(f4),
        time_ratio,
        "<= 1.25",
        time_ratio <= 1.25 && fan.1 == 0,
    ));
    rows.push(row(
        &format!(
            "record with one slow (10%) subscriber vs none, same 1 ms pacing task (delivered {}, dropped {}; vs no pacing task {:.2})",
            fan.2,
            fan.3,
            paired("fslow", "f0")
        ),
        k(fs),
        slow_ratio,
        ">= 0.90",
        slow_ratio >= 0.9,
    ));
    if let Some((idle, one, many, p1, pm)) = scaled {
        let m = scale::MANY;
        let idle_ms = idle.as_secs_f64() * 1e3;
        // Idle recorders cost nothing: their threads block.
        rows.push(Row {
            case: format!(
                "{m} idle recorders (Interval 10 ms, a subscriber each): CPU over {} s",
                scale::IDLE.as_secs()
            ),
            value: format!("{idle_ms:.2} ms"),
            ratio: format!("{:.3}%", idle_ms / scale::IDLE.as_secs_f64() / 10.0),
            target: "< 0.1%".to_owned(),
            verdict: if idle_ms < scale::IDLE.as_secs_f64() {
                "PASS"
            } else {
                "MISS"
            },
        });
        // Whether they slow each other down: CPU per event (what polling
        // wastes shows here), and latency at an agent's pace.
        let cpu = many.1 / one.1;
        rows.push(row(
            &format!(
                "{m} recorders flat out vs 1: CPU per event ({:.1} vs {:.1} us; {:.0}k ev/s in total vs {:.0}k)",
                many.1,
                one.1,
                many.0 / 1e3,
                one.0 / 1e3
            ),
            format!("{:.2}k ev/s each", many.0 / m as f64 / 1e3),
            cpu,
            "<= 2.00",
            cpu <= 2.0,
        ));
        let p50 = pm.0 / p1.0;
        rows.push(row(
            &format!(
                "{m} vs 1 recorder at 1 ev/{} ms each: record p50 latency (p50 {:.0} vs {:.0} us, p99 {:.0} vs {:.0} us; CPU {:.1} vs {:.1} us/ev)",
                scale::PACE.as_millis(),
                pm.0,
                p1.0,
                pm.1,
                p1.1,
                pm.2,
                p1.2
            ),
            format!("{:.0} us", pm.0),
            p50,
            "<= 3.00",
            p50 <= 3.0,
        ));
    }
    let w = rows.iter().map(|r| r.case.len()).max().unwrap_or(10);
    println!();
    println!(
        "| {:w$} | {:>22} | {:>9} | {:>8} | result |",
        "case", "measured", "ratio", "target"
    );
    println!(
        "|{}|{}|{}|{}|--------|",
        "-".repeat(w + 2),
        "-".repeat(24),
        "-".repeat(11),
        "-".repeat(10)
    );
    for r in rows
        .iter()
        .filter(|r| !r.value.contains("NaN") && !r.value.starts_with("0.0 / 0.0"))
    {
        println!(
            "| {:w$} | {:>22} | {:>9} | {:>8} | {}   |",
            r.case, r.value, r.ratio, r.target, r.verdict
        );
    }
    // The spread behind each median: every round's ratio to the baseline
    // measured in that same round.
    println!();
    for (case, key, base) in [
        ("record, 1 producer (vs 1a)", "r1", "1a"),
        ("record, 8 producers (vs 1a)", "r8", "1a"),
        ("record, 64 producers, Always (vs 1d)", "r64a", "1d"),
        ("fan-out to 4, time vs record alone", "f0", "f4"),
        ("one slow subscriber vs none, paced", "fslow", "f0p"),
        ("one slow subscriber vs none, no pacing task", "fslow", "f0"),
    ] {
        if let (Some(v), Some(b)) = (m.get(key), m.get(base)) {
            let per: Vec<String> = v
                .iter()
                .zip(b)
                .map(|(v, b)| format!("{:.2}", v / b))
                .collect();
            println!("per round, {case}: {}", per.join(" "));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
