//! What kernel confinement (#56) adds to starting a process
//! (`cargo bench -p transcript-exec --bench confinement`, run by `cargo xtask bench`).
//! Plain `main`, prints a table.
//!
//! `/bin/true` is started and waited for through `ProcessGroup` (its own group, a process
//! scope, the scope's sweep at the end: what every command step pays), `N` times unconfined
//! and `N` times confined by the workspace's Landlock rules (a private temporary directory
//! made and removed, the rules opened, a thread restricted, the spawn). Rounds interleave
//! the two; medians of the per-process means are reported, with the difference per process
//! (target: at most 2 ms on this machine) and the ratio.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use transcript_exec::process::ProcessGroup;
use transcript_exec::sandbox::{Confinement, probe};

const N: usize = 200;
const ROUNDS: usize = 5;

async fn start_and_wait(confinement: Option<&Confinement>) {
    let mut cmd = tokio::process::Command::new("/bin/true");
    let (mut child, group) = ProcessGroup::spawn_confined(&mut cmd, confinement).unwrap();
    let status = child.wait().await.unwrap();
    assert!(status.success());
    group.finish().await;
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if let Err(e) = probe() {
        println!("confinement: skipped: {e}");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let confinement = Confinement::new(ws.path()).hide(ws.path().join("storage"));
    let (mut plain, mut confined) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..N {
                start_and_wait(None).await;
            }
        });
        plain.push(t.elapsed() / N as u32);
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..N {
                start_and_wait(Some(&confinement)).await;
            }
        });
        confined.push(t.elapsed() / N as u32);
    }
    let (p, c) = (median(plain), median(confined));
    let added = c.saturating_sub(p);
    println!(
        "process start (/bin/true, started, waited, scope swept), median of {ROUNDS} rounds x {N}:"
    );
    println!("  unconfined   {:>9.3} ms / process", p.as_secs_f64() * 1e3);
    println!("  confined     {:>9.3} ms / process", c.as_secs_f64() * 1e3);
    println!(
        "  added        {:>9.3} ms / process (target <= 2 ms), ratio {:.2}x",
        added.as_secs_f64() * 1e3,
        c.as_secs_f64() / p.as_secs_f64()
    );
}
