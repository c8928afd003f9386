//! Many recorders in one process (one per run, as a busy runner has): what
//! the polling in `record` and on the writer thread costs when nothing
//! happens, and whether 200 recorders slow each other down.
//!
//! CPU time comes from the OS: `/proc/self/task/*/schedstat` (nanoseconds
//! on CPU per thread) for the idle interval, where no thread exits, and
//! `/proc/self/stat` (utime + stime of the whole process, exited threads
//! included, in 10 ms ticks) around the busy cases.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use transcript_domain::{EventDraft, Recorder, RunIdGenerator, SequentialRunIds};
use transcript_infra::{Durability, JsonlRecorder, SystemClock};

/// Recorders in the many-recorder cases.
pub const MANY: usize = 200;
/// The idle interval.
pub const IDLE: Duration = Duration::from_secs(2);
/// Pace of the paced cases: one record per recorder every 10 ms (100
/// events/s per run, far above an agent's event rate).
pub const PACE: Duration = Duration::from_millis(10);
/// Records per recorder in the paced cases.
pub const PACED: usize = 200;

/// CPU time of every live thread of this process but the calling one,
/// whose reading of these files is not the recorders' cost (ns resolution).
fn threads_cpu() -> Duration {
    let me = std::fs::read_link("/proc/thread-self").unwrap();
    let me = me.file_name().unwrap().to_owned();
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if task.file_name() == me {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

/// CPU time of this process, exited threads included (USER_HZ = 100 ticks
/// per second, as /proc always reports).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which may hold spaces): state is
    // field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn open_many(
    dir: &Path,
    ids: &SequentialRunIds,
    k: usize,
    d: Durability,
) -> Vec<Arc<JsonlRecorder>> {
    (0..k)
        .map(|_| {
            Arc::new(
                JsonlRecorder::builder(dir, ids.next_run_id())
                    .clock(Arc::new(SystemClock))
                    .durability(d)
                    .open()
                    .unwrap(),
            )
        })
        .collect()
}

fn close_all(rt: &tokio::runtime::Runtime, recs: Vec<Arc<JsonlRecorder>>) {
    rt.block_on(async {
        for rec in &recs {
            rec.close().await.unwrap();
            let _ = std::fs::remove_file(rec.path());
        }
    });
}

/// CPU time the whole process spends while [`MANY`] recorders that have
/// recorded (under `Interval(10 ms)`, so their background sync ran), each
/// with a live subscriber that got the event, sit idle for [`IDLE`].
pub fn idle_cpu(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    ids: &SequentialRunIds,
    draft: impl Fn(u64) -> EventDraft,
) -> Duration {
    let recs = open_many(
        dir,
        ids,
        MANY,
        Durability::Interval(Duration::from_millis(10)),
    );
    let subs = rt.block_on(async {
        let mut subs = Vec::new();
        for (i, rec) in recs.iter().enumerate() {
            let mut sub = rec.subscribe(None).await.unwrap();
            rec.record(draft(i as u64)).await.unwrap();
            sub.next().await.unwrap();
            subs.push(sub);
        }
        // Past every background sync (10 ms after each first write).
        tokio::time::sleep(Duration::from_millis(100)).await;
        subs
    });
    let before = threads_cpu();
    std::thread::sleep(IDLE);
    let spent = threads_cpu().saturating_sub(before);
    drop(subs);
    close_all(rt, recs);
    spent
}

/// `k` recorders, one producer task each, record `total` events between
/// them flat out. Returns (events/s in total, CPU µs per event).
pub fn flat_out(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    ids: &SequentialRunIds,
    k: usize,
    total: usize,
    draft: impl Fn(u64) -> EventDraft,
) -> (f64, f64) {
    let recs = open_many(dir, ids, k, Durability::None);
    let per = total / k;
    let drafts: Vec<Vec<EventDraft>> = (0..k)
        .map(|r| (0..per).map(|i| draft((r * per + i) as u64)).collect())
        .collect();
    let cpu = process_cpu();
    let took = rt.block_on(async {
        let start = Arc::new(tokio::sync::Barrier::new(k + 1));
        let mut tasks = Vec::new();
        for (rec, ds) in recs.iter().zip(drafts) {
            let (rec, start) = (Arc::clone(rec), Arc::clone(&start));
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                for d in ds {
                    rec.record(d).await.unwrap();
                }
            }));
        }
        start.wait().await;
        let t = Instant::now();
        for t in tasks {
            t.await.unwrap();
        }
        t.elapsed()
    });
    let cpu = process_cpu().saturating_sub(cpu);
    close_all(rt, recs);
    let n = (per * k) as f64;
    (n / took.as_secs_f64(), cpu.as_secs_f64() * 1e6 / n)
}

/// `k` recorders each record [`PACED`] events, one every [`PACE`]. Returns
/// (median, 99th percentile) of `record`'s latency in µs and the CPU µs per
/// event.
pub fn paced(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    ids: &SequentialRunIds,
    k: usize,
    draft: impl Fn(u64) -> EventDraft,
) -> (f64, f64, f64) {
    let recs = open_many(dir, ids, k, Durability::None);
    let drafts: Vec<Vec<EventDraft>> = (0..k)
        .map(|r| (0..PACED).map(|i| draft((r * PACED + i) as u64)).collect())
        .collect();
    let cpu = process_cpu();
    let mut latencies = rt.block_on(async {
        let mut tasks = Vec::new();
        for (r, (rec, ds)) in recs.iter().zip(drafts).enumerate() {
            let rec = Arc::clone(rec);
            tasks.push(tokio::spawn(async move {
                // Spread the recorders over the period.
                let offset = PACE.mul_f64(r as f64 / k as f64);
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, PACE);
                let mut took = Vec::with_capacity(ds.len());
                for d in ds {
                    tick.tick().await;
                    let t = Instant::now();
                    rec.record(d).await.unwrap();
                    took.push(t.elapsed().as_secs_f64() * 1e6);
                }
                took
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    let cpu = process_cpu().saturating_sub(cpu);
    close_all(rt, recs);
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    let n = latencies.len() as f64;
    (at(0.5), at(0.99), cpu.as_secs_f64() * 1e6 / n)
}
