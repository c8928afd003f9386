//! `cargo xtask bench-nats-import [--rounds N]` (also part of `cargo xtask bench`): the
//! ~100 MB Claude Code session store of `bench-cli` (real logs copied with fresh ids, written
//! at run time) imported with `transcript import claude --store` into a directory and into a
//! real nats-server (`$TRANSCRIPT_NATS_SERVER`, started on a free loopback port with a fresh
//! store each round and stopped by PID), best of N interleaved rounds, side by side (#52 item
//! 3: imports publish pipelined). The two storages' `receipts --by day` totals must agree.
//! Without a nats-server it says `skipped:` and why.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{Error, Outcome, TempDir, our_totals, run_sequence, write_store};

/// The store's size, bytes.
const SIZE: usize = 100 * 1000 * 1000;

/// A nats-server with JetStream on a port it picked, killed by PID on drop.
struct Server(Child, u16);

impl Server {
    fn start(binary: &Path, store: &Path) -> Result<Self, Error> {
        let mut child = Command::new(binary)
            .args(["-a", "127.0.0.1", "-p", "-1", "-js", "-sd"])
            .arg(store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", binary.display()))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let mut port = None;
        for line in lines.by_ref() {
            let line = line?;
            if let Some(rest) = line.split("Listening for client connections on ").nth(1) {
                port = rest.rsplit(':').next().and_then(|p| p.trim().parse().ok());
            }
            if line.contains("Server is ready") {
                break;
            }
        }
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        match port {
            Some(port) => Ok(Self(child, port)),
            None => Err("nats-server did not say its port".into()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Imports the store into `storage` and reads its daily receipts (JSON in `out/1.out`).
fn import(
    transcript: &Path,
    (config, storage): (&Path, &str),
    out: &Path,
) -> Result<(Duration, super::Totals), Error> {
    let cmd = |args: &[&str]| {
        let mut c = Command::new(transcript);
        c.args(["--storage", storage])
            .args(args)
            .env("CLAUDE_CONFIG_DIR", config)
            .env("NO_COLOR", "1");
        c
    };
    let took = run_sequence(vec![cmd(&["import", "claude", "--store"])], out)?.wall;
    run_sequence(
        vec![
            cmd(&["list", "--json"]),
            cmd(&["receipts", "--by", "day", "--json"]),
        ],
        out,
    )?;
    Ok((
        took,
        our_totals(&std::fs::read_to_string(out.join("1.out"))?)?,
    ))
}

/// Measures the import into files and into NATS (see the module docs).
pub fn bench(root: &Path, rounds: usize) -> Result<Outcome, Error> {
    let skip = |why: &str| {
        let why = format!("bench-nats-import skipped: {why}");
        println!("{why}");
        Ok(Outcome {
            code: 0,
            skipped: vec![why],
        })
    };
    let Some(server) = std::env::var_os("TRANSCRIPT_NATS_SERVER").map(PathBuf::from) else {
        return skip("TRANSCRIPT_NATS_SERVER is not set");
    };
    let Some(fixtures) = super::fixtures_dir(root) else {
        return skip("TRANSCRIPT_REAL_FIXTURES is not set");
    };
    let transcript = super::build_transcript(root)?;
    let logs: Vec<String> = super::claude_copies::LOGS
        .iter()
        .map(|l| std::fs::read_to_string(fixtures.join(l)))
        .collect::<Result<_, _>>()?;
    let work = TempDir::new()?;
    let config = work.0.join("claude");
    let (bytes, files) = write_store(&config.join("projects"), &logs, SIZE)?;
    let out = work.0.join("out");
    std::fs::create_dir_all(&out)?;
    let (mut on_files, mut on_nats) = (Duration::MAX, Duration::MAX);
    for round in 0..rounds.max(1) {
        eprintln!("bench-nats-import: round {}/{rounds}", round + 1);
        let dir = work.0.join("storage");
        let _ = std::fs::remove_dir_all(&dir);
        let (took, files_bill) = import(&transcript, (&config, &dir.display().to_string()), &out)?;
        on_files = on_files.min(took);
        let _ = std::fs::remove_dir_all(&dir);
        let js = work.0.join("js");
        let _ = std::fs::remove_dir_all(&js);
        let nats = Server::start(&server, &js)?;
        let url = format!("nats://127.0.0.1:{}/TRANSCRIPTS", nats.1);
        let (took, nats_bill) = import(&transcript, (&config, &url), &out)?;
        on_nats = on_nats.min(took);
        drop(nats);
        let _ = std::fs::remove_dir_all(&js);
        if nats_bill != files_bill {
            return Err(
                format!("the bills differ: files {files_bill:?}, NATS {nats_bill:?}").into(),
            );
        }
    }
    println!(
        "import --store {:.1} MB ({files} session files): files {:.2} s | NATS 1-node {:.2} s | NATS/files {:.2}x (best of {rounds})",
        bytes as f64 / 1e6,
        on_files.as_secs_f64(),
        on_nats.as_secs_f64(),
        on_nats.as_secs_f64() / on_files.as_secs_f64()
    );
    Ok(Outcome {
        code: 0,
        skipped: Vec::new(),
    })
}
