//! What the network namespace and the proxy (#57) add
//! (`cargo bench -p transcript-exec --bench network`, run by `cargo xtask bench`).
//! Plain `main`, prints a table; every figure is measured against a baseline of the same run.
//!
//! 1. **Start**: `/bin/true` started and waited for through `ProcessGroup`, confined by
//!    Landlock (what every step pays since #56), then confined *and* in its own network
//!    namespace (the helper, the namespace, the loopback, the listeners handed over, the
//!    session's threads). Rounds interleave the two; the median of the per-process means.
//!    Target: at most 5 ms added.
//! 2. **Download**: 100 MB from a server on `127.0.0.1` (in this process, from memory) by
//!    `curl -o /dev/null`: on the host's network (the baseline), bounded through the proxy
//!    (`http_proxy`), and bounded through the forwarded loopback port (`--noproxy '*'`).
//!    Whole process times (start included), median of the rounds. Target: at most 10% more.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use transcript_exec::process::ProcessGroup;
use transcript_exec::sandbox::net::{Destination, NetBounds};
use transcript_exec::sandbox::{Confinement, probe};

const HELPER: &str = env!("CARGO_BIN_EXE_transcript-netns");
const N: usize = 100;
const ROUNDS: usize = 5;
const DOWNLOAD: usize = 100 * 1024 * 1024;
const DOWNLOAD_ROUNDS: usize = 15;

async fn start_and_wait(confinement: &Confinement, net: Option<&NetBounds>) {
    let mut cmd = transcript_exec::sandbox::net::command("/bin/true", net);
    let (mut child, group) = ProcessGroup::spawn_bounded(&mut cmd, Some(confinement), net).unwrap();
    let status = child.wait().await.unwrap();
    assert!(status.success());
    group.finish().await;
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A server answering every connection with [`DOWNLOAD`] bytes; its port.
fn server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let body = vec![b'x'; DOWNLOAD];
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { return };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {DOWNLOAD}\r\nConnection: close\r\n\r\n"
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            });
        }
    });
    port
}

async fn download(url: &str, net: Option<&NetBounds>, direct: bool, ws: &Confinement) -> Duration {
    let mut cmd = transcript_exec::sandbox::net::command("curl", net);
    cmd.args(["-sS", "-o", "/dev/null", "-w", "%{size_download}"]);
    if direct {
        cmd.args(["--noproxy", "*"]);
    }
    cmd.arg(url).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let t = Instant::now();
    let (child, group) = ProcessGroup::spawn_bounded(&mut cmd, Some(ws), net).unwrap();
    let out = child.wait_with_output().await.unwrap();
    let took = t.elapsed();
    group.finish().await;
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), DOWNLOAD.to_string());
    took
}

fn main() {
    if let Err(e) = probe() {
        println!("network: skipped: {e}");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let confinement = Confinement::new(ws.path());
    let port = server();
    let bounds = NetBounds::new(HELPER)
        .allowing([format!("127.0.0.1:{port}").parse::<Destination>().unwrap()]);
    let (mut confined, mut bounded) = (Vec::new(), Vec::new());
    let rounds = if std::env::var_os("TRANSCRIPT_BENCH_DOWNLOAD_ONLY").is_some() {
        0
    } else {
        ROUNDS
    };
    for _ in 0..rounds {
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..N {
                start_and_wait(&confinement, None).await;
            }
        });
        confined.push(t.elapsed() / N as u32);
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..N {
                start_and_wait(&confinement, Some(&bounds)).await;
            }
        });
        bounded.push(t.elapsed() / N as u32);
    }
    if rounds > 0 {
        print_start(median(confined), median(bounded));
    }
    download_part(&rt, &confinement, &bounds, port);
}

fn print_start(c: Duration, b: Duration) {
    println!("process start (/bin/true, confined), median of {ROUNDS} rounds x {N}:");
    println!(
        "  host network      {:>9.3} ms / process",
        c.as_secs_f64() * 1e3
    );
    println!(
        "  own namespace     {:>9.3} ms / process",
        b.as_secs_f64() * 1e3
    );
    println!(
        "  added             {:>9.3} ms / process (target <= 5 ms), ratio {:.2}x",
        b.saturating_sub(c).as_secs_f64() * 1e3,
        b.as_secs_f64() / c.as_secs_f64()
    );
}

fn download_part(
    rt: &tokio::runtime::Runtime,
    confinement: &Confinement,
    bounds: &NetBounds,
    port: u16,
) {
    let url = format!("http://127.0.0.1:{port}/blob");
    let (mut host, mut proxied, mut forwarded) = (Vec::new(), Vec::new(), Vec::new());
    rt.block_on(async {
        // One of each first, unmeasured: page cache, curl's libraries, the server's threads.
        download(&url, None, true, confinement).await;
        download(&url, Some(bounds), false, confinement).await;
        for _ in 0..DOWNLOAD_ROUNDS {
            host.push(download(&url, None, true, confinement).await);
            proxied.push(download(&url, Some(bounds), false, confinement).await);
            forwarded.push(download(&url, Some(bounds), true, confinement).await);
        }
    });
    let ratios = |of: &[Duration]| {
        let mut r: Vec<f64> = of
            .iter()
            .zip(&host)
            .map(|(d, h)| d.as_secs_f64() / h.as_secs_f64())
            .collect();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    };
    let (rp, rf) = (ratios(&proxied), ratios(&forwarded));
    let (h, p, f) = (median(host), median(proxied), median(forwarded));
    let mb = DOWNLOAD as f64 / 1e6;
    println!("download of {mb:.0} MB on loopback by curl, median of {DOWNLOAD_ROUNDS} rounds:");
    for (name, d, r) in [
        ("host network", h, 1.0),
        ("through proxy", p, rp),
        ("forwarded port", f, rf),
    ] {
        println!(
            "  {name:<17} {:>9.1} ms  {:>7.0} MB/s  ratio {r:.3} (target <= 1.10)",
            d.as_secs_f64() * 1e3,
            mb / d.as_secs_f64(),
        );
    }
}
