//! `transcript serve`'s figures (#60 item 4), as ratios and against the targets, never
//! as timed tests. Stores are generated in a temporary directory; each is served by this
//! binary run again as a child (`VIEWER_BENCH_SERVE=DIR`), so its memory is its own:
//!
//! * the first page of `/` over 10,000 runs: the first request (nothing cached: the listing
//!   of every file's ends, and the bills of the 100 rows shown) and the median of later ones
//!   (target ≤ 200 ms);
//! * `/search` scanning ~100 MB for a string it does not hold, against `grep -ci` over the same
//!   files (both from the page cache; target ≤ 1 s);
//! * the server's peak RSS (`VmHWM`) after listing and searching ~100 MB and ~400 MB stores:
//!   memory does not grow with the store.
//!
//! Run with `cargo bench -p transcript-viewer --bench viewer` (or `cargo xtask bench`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const ABSENT: &str = "zq-absent-needle";
const WORDS: &[&str] = &[
    "the", "agent", "read", "file", "parse", "header", "returned", "error", "cargo", "test",
    "build", "passed", "tool", "output", "model", "tokens", "step", "while", "with", "from",
];

fn main() {
    if let Ok(dir) = std::env::var("VIEWER_BENCH_SERVE") {
        return serve(&dir);
    }
    let tmp = tempfile::tempdir().unwrap();
    list_figures(&tmp.path().join("many"));
    let mb100 = tmp.path().join("mb100");
    let bytes = generate(&mb100, 400, 250_000, 0);
    let rss100 = search_figures(&mb100, bytes);
    let mb400 = tmp.path().join("mb400");
    let bytes = generate(&mb400, 1600, 250_000, 0);
    let rss400 = search_figures(&mb400, bytes);
    println!(
        "viewer/rss: peak {:.1} MB serving ~100 MB, {:.1} MB serving ~400 MB (ratio {:.2}; flat is ~1)",
        rss100 as f64 / 1024.0,
        rss400 as f64 / 1024.0,
        rss400 as f64 / rss100.max(1) as f64
    );
}

/// The child: serves `dir` until its stdin closes.
fn serve(dir: &str) {
    let store = Arc::new(transcript_infra::DirRunStore::new(dir));
    let mut config =
        transcript_viewer::ViewerConfig::new(store, Arc::new(transcript_infra::SystemClock));
    config.price = Some(Arc::new(|_, u| {
        Some(u.input_tokens.unwrap_or(0) as f64 * 1e-6)
    }));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let viewer = transcript_viewer::Viewer::bind("127.0.0.1:0".parse().unwrap(), config)
            .await
            .unwrap();
        println!("{}", viewer.local_addr().unwrap());
        let stop = tokio::task::spawn_blocking(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        });
        viewer
            .serve(async {
                let _ = stop.await;
            })
            .await
            .unwrap();
    });
}

/// A served store: the child and its address; dropped, it ends.
struct Child {
    child: std::process::Child,
    addr: String,
}

impl Child {
    fn start(dir: &Path) -> Child {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env("VIEWER_BENCH_SERVE", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Child {
            child,
            addr: line.trim().to_owned(),
        }
    }

    /// Seconds to GET `path` (its body read whole), and the body.
    fn get(&self, path: &str) -> (f64, String) {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
            .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        assert!(
            body.starts_with("HTTP/1.0 200"),
            "{path}: {}",
            &body[..body.len().min(300)]
        );
        (started.elapsed().as_secs_f64(), body)
    }

    /// Peak resident memory in KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn list_figures(dir: &Path) {
    generate(dir, 10_000, 1_500, 1);
    let server = Child::start(dir);
    let (cold, page) = server.get("/");
    assert!(page.contains("10000 runs"), "the page counts 10,000 runs");
    let warm = median((0..5).map(|_| server.get("/").0).collect());
    let (api, _) = server.get("/api/runs");
    // What the read port's listing alone costs (infra's DirRunStore: each file's ends and lease).
    use transcript_domain::run_store::RunStore as _;
    let store = transcript_infra::DirRunStore::new(dir);
    let port = median(
        (0..5)
            .map(|_| {
                let started = Instant::now();
                assert_eq!(store.runs().unwrap().len(), 10_000);
                started.elapsed().as_secs_f64()
            })
            .collect(),
    );
    println!(
        "viewer/list: first page of / over 10,000 runs: first request {:.0} ms, then {:.0} ms (median of 5; target ≤ 200 ms: {}), of which the read port's listing (DirRunStore::runs) {:.0} ms; /api/runs {:.0} ms",
        cold * 1e3,
        warm * 1e3,
        if warm <= 0.2 { "met" } else { "MISS" },
        port * 1e3,
        api * 1e3
    );
}

/// Scans `dir` (`bytes` of runs) for an absent string, against `grep -ci`; returns the
/// server's peak RSS in KiB.
fn search_figures(dir: &Path, bytes: u64) -> u64 {
    let server = Child::start(dir);
    let _ = server.get("/");
    // Warm the page cache for both.
    let _ = grep(dir);
    let ours = median(
        (0..3)
            .map(|_| server.get(&format!("/search?q={ABSENT}")).0)
            .collect(),
    );
    let (_, body) = server.get("/search?q=needle-in-run");
    assert!(body.contains("200 matches"), "the hits stop at 200");
    let theirs = median((0..3).map(|_| grep(dir)).collect());
    println!(
        "viewer/search: {:.0} MB, absent string: /search {:.0} ms, grep -ci {:.0} ms (ratio {:.2}; target ≤ 1 s: {})",
        bytes as f64 / 1e6,
        ours * 1e3,
        theirs * 1e3,
        ours / theirs,
        if ours <= 1.0 { "met" } else { "MISS" }
    );
    server.peak_kib()
}

fn grep(dir: &Path) -> f64 {
    let started = Instant::now();
    let out = Command::new("grep")
        .args(["-rci", ABSENT])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "grep failed");
    started.elapsed().as_secs_f64()
}

/// `runs` runs of about `size` bytes each in `dir` (a tool output in each holds
/// `needle-in-run`); returns the bytes written.
fn generate(dir: &Path, runs: usize, size: usize, seed: u64) -> u64 {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut text = |n: usize| -> String {
        let mut s = String::with_capacity(n + 16);
        while s.len() < n {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1);
            s.push_str(WORDS[(rng >> 33) as usize % WORDS.len()]);
            s.push(' ');
        }
        s
    };
    let mut total = 0;
    for r in 0..runs {
        let id = format!("{:08x}-0000-4000-8000-{:012x}", r, r);
        let mut lines = Vec::new();
        let at = |seq: usize| {
            format!(
                "2026-05-{:02}T{:02}:{:02}:{:02}.000Z",
                1 + r % 28,
                r / 60 % 24,
                r % 60,
                seq % 60
            )
        };
        let mut event = |ty: &str, path: &str, payload: serde_json::Value| {
            let seq = lines.len() + 1;
            lines.push(
                serde_json::json!({"seq": seq, "run_id": id, "type": ty, "path": path,
                "iteration": 0, "timestamp": at(seq), "payload": payload})
                .to_string(),
            );
        };
        event(
            "run.started",
            "",
            serde_json::json!({"name": format!("wf-{}", r % 7), "kind": "workflow"}),
        );
        let mut written = 0;
        let mut step = 0;
        while written < size {
            let path = format!("s{step}");
            let body = text(2000.min(size));
            let output = if step == 0 {
                format!("needle-in-run {}", text(200))
            } else {
                text(2000.min(size))
            };
            written += body.len() + output.len() + 600;
            event(
                "step.started",
                &path,
                serde_json::json!({"name": path, "kind": "agent"}),
            );
            event(
                "message.assistant",
                &path,
                serde_json::json!({"role": "assistant", "model": "m",
                "usage": {"input_tokens": 100, "output_tokens": 10},
                "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": body}]}),
            );
            event(
                "tool.result",
                &path,
                serde_json::json!({"name": "t", "call_id": "c", "output": output, "fidelity": "router"}),
            );
            event(
                "step.completed",
                &path,
                serde_json::json!({"name": path, "kind": "agent"}),
            );
            step += 1;
        }
        event(
            "run.completed",
            "",
            serde_json::json!({"name": "wf", "kind": "workflow"}),
        );
        let file = lines.join("\n") + "\n";
        total += file.len() as u64;
        std::fs::write(dir.join(format!("{id}.jsonl")), file).unwrap();
    }
    total
}
