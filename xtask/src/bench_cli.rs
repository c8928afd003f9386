//! `cargo xtask bench-cli`: the release `transcript` binary against ccusage 17 on the same
//! Claude Code session store (issue #29 item 4), the way a user runs them.
//!
//! The store is ~25 MB and ~100 MB of real session logs under a temporary
//! `CLAUDE_CONFIG_DIR/projects` (the `spotter-session-log-*` captures of
//! `$TRANSCRIPT_REAL_FIXTURES` copied with fresh session, message and request ids, by the
//! generator the `bill` bench uses). Per size, best of N interleaved rounds:
//!
//! - (a) first report: `transcript import claude --store` into an empty storage, then
//!   `transcript receipts --by day --json`, against `ccusage daily --json --offline`;
//! - (b) repeated report: the same import again (nothing new to read) plus the receipts,
//!   against ccusage again (it keeps no state between runs).
//!
//! Targets at ~100 MB: (a) ≥ 3× faster, (b) ≥ 10× faster; our peak memory must not grow with
//! the input (100 MB peak minus 25 MB peak < 8 MiB). Both sides' totals must agree on input and
//! cache tokens; output tokens are printed side by side (ccusage keeps the first record of a
//! request, whose output count is a streaming placeholder). ccusage is installed by
//! `.ci/install-ccusage`; when it cannot be, the comparison is skipped and says so loudly
//! (`skipped:`), and ours is still measured.

mod duplicates;
mod measure;
pub mod nats_import;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub use measure::{Measured, parse_vm_hwm, run_sequence};

/// Boxed error: the bench reports and exits, callers do not match on causes.
pub type Error = Box<dyn std::error::Error>;

#[path = "../../crates/transcript-providers/benches/support/claude_copies.rs"]
mod claude_copies;

/// Interleaved rounds by default (best of them is reported).
pub const ROUNDS: usize = 5;
/// Input sizes, bytes: the memory bound compares the first and the last.
const SIZES: [usize; 2] = [25 * 1000 * 1000, 100 * 1000 * 1000];
/// (a) first import + report: at least this many times faster than ccusage.
pub const FIRST_TARGET: f64 = 3.0;
/// (b) repeated import + report: at least this many times faster than ccusage.
pub const REPEAT_TARGET: f64 = 10.0;
/// Our peak at the largest size may exceed the one at the smallest by less than this (MiB).
pub const MEMORY_GROWTH_MIB: f64 = 8.0;

/// Token totals: input, output, cache read, cache write.
pub type Totals = [u64; 4];

/// Best times and peaks of one input size.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SizeResult {
    /// Bytes of session logs.
    pub bytes: usize,
    /// Session files.
    pub files: usize,
    /// ccusage daily (best wall, largest peak); `None` when ccusage is not installed.
    pub ccusage: Option<Measured>,
    /// Our first import + receipts.
    pub first: Option<Measured>,
    /// Our repeated import + receipts.
    pub repeat: Option<Measured>,
    /// Our totals (from `receipts --by day --json`).
    pub ours: Totals,
    /// ccusage's totals.
    pub theirs: Option<Totals>,
}

/// What a `bench-cli` run ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// 0 when every target passed, 1 on a miss.
    pub code: i32,
    /// Parts not run, with why (printed loudly as they happen too).
    pub skipped: Vec<String>,
}

/// `cargo xtask bench-cli [--rounds N]` (also the last part of `cargo xtask bench`).
pub fn bench_cli(root: &Path, rounds: usize) -> Result<Outcome, Error> {
    let Some(fixtures) = fixtures_dir(root) else {
        let why = "bench-cli skipped: TRANSCRIPT_REAL_FIXTURES is not set and ../shared/fixtures/providers is missing";
        println!("{why}");
        return Ok(Outcome {
            code: 0,
            skipped: vec![why.to_owned()],
        });
    };
    let transcript = build_transcript(root)?;
    let (ccusage, skipped) = match install_ccusage(root) {
        Ok(path) => (Some(path), Vec::new()),
        Err(why) => (None, vec![why]),
    };
    let logs: Vec<String> = claude_copies::LOGS
        .iter()
        .map(|l| {
            let path = fixtures.join(l);
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect::<Result<_, _>>()?;
    let work = TempDir::new()?;
    let load_before = load_average();
    let mut results = Vec::new();
    for size in SIZES {
        let dir = work.0.join(format!("{}mb", size / 1_000_000));
        results.push(measure_size(
            &dir,
            &logs,
            size,
            &transcript,
            ccusage.as_deref(),
            rounds,
        )?);
        // The store and the transcripts of this size are not needed any more (disk is tight).
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = Report::new(&results, ccusage.is_some());
    print!("{}", report.render(&results, rounds));
    // One request, one bill across a store with duplicates (#51), beside ccusage and jq.
    let duplicates = duplicates::run(
        &work.0.join("duplicates"),
        &fixtures,
        &transcript,
        ccusage.as_deref(),
    )?;
    print!("{}", duplicates.render());
    // The machine is shared and noisy: the figures mean little without it.
    println!(
        "bench-cli: load average (1, 5, 15 min) before: {load_before}; after: {}",
        load_average()
    );
    if let Some(why) = skipped.first() {
        // Repeated under the table, where the eye lands.
        println!("!!!!!!!! {why} !!!!!!!!");
    }
    Ok(Outcome {
        code: i32::from(!report.pass() || !duplicates.pass()),
        skipped,
    })
}

/// The last part of `cargo xtask bench`: only without `-p`, and only in a workspace that has
/// the `transcript` binary (`None` otherwise).
pub fn as_part_of_bench(
    root: &Path,
    meta: &crate::metadata::Metadata,
    package: Option<&str>,
) -> Result<Option<Outcome>, Error> {
    if package.is_some() || !meta.packages.iter().any(|p| p.name == "transcript-cli") {
        return Ok(None);
    }
    bench_cli(root, ROUNDS).map(Some)
}

/// `$TRANSCRIPT_REAL_FIXTURES`, else `../shared/fixtures/providers` beside the repository.
fn fixtures_dir(root: &Path) -> Option<PathBuf> {
    match std::env::var_os("TRANSCRIPT_REAL_FIXTURES") {
        Some(dir) => Some(root.join(dir)),
        None => default_real_fixtures(root),
    }
}

/// The real provider captures for benches that need them: `$TRANSCRIPT_REAL_FIXTURES` when
/// set (left to the bench, which fails on a missing folder), else `../shared/fixtures/providers`
/// beside the repository when it exists — the same place `.ci/run` uses.
pub fn default_real_fixtures(root: &Path) -> Option<std::path::PathBuf> {
    if std::env::var_os("TRANSCRIPT_REAL_FIXTURES").is_some() {
        return None;
    }
    let dir = root.join("../shared/fixtures/providers");
    dir.is_dir().then(|| dir.canonicalize().unwrap_or(dir))
}

/// Builds the release `transcript` binary; returns its path.
fn build_transcript(root: &Path) -> Result<PathBuf, Error> {
    let mut cmd = Command::new(crate::metadata::cargo());
    cmd.current_dir(root).args([
        "build",
        "--release",
        "-p",
        "transcript-cli",
        "--bin",
        "transcript",
    ]);
    eprintln!("==> cargo build --release -p transcript-cli --bin transcript");
    if !cmd.status()?.success() {
        return Err("building the release transcript binary failed".into());
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |d| root.join(d));
    Ok(target.join("release/transcript"))
}

/// `ccusage` installed by `.ci/install-ccusage` (its path), or why the comparison is skipped
/// (said loudly here too).
fn install_ccusage(root: &Path) -> Result<PathBuf, String> {
    eprintln!("==> bash .ci/install-ccusage");
    let out = Command::new("bash")
        .arg(root.join(".ci/install-ccusage"))
        .stderr(std::process::Stdio::inherit())
        .output();
    let why = match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            match text.lines().last() {
                Some(bin) if Path::new(bin.trim()).join("ccusage").is_file() => {
                    return Ok(Path::new(bin.trim()).join("ccusage"));
                }
                _ => "the installer printed no bin directory holding ccusage".to_owned(),
            }
        }
        Ok(o) => format!("the installer failed ({})", o.status),
        Err(e) => format!("cannot run the installer: {e}"),
    };
    let why = format!("bench-cli: ccusage comparison skipped: {why}");
    println!("!!!!!!!! {why} !!!!!!!!");
    Err(why)
}

/// Writes the store for `size` and measures it, best of `rounds` interleaved rounds.
fn measure_size(
    dir: &Path,
    logs: &[String],
    size: usize,
    transcript: &Path,
    ccusage: Option<&Path>,
    rounds: usize,
) -> Result<SizeResult, Error> {
    let config = dir.join("claude");
    let (bytes, files) = write_store(&config.join("projects"), logs, size)?;
    eprintln!(
        "bench-cli: {files} session files, {:.1} MB under {}",
        bytes as f64 / 1e6,
        config.display()
    );
    let storage = dir.join("storage");
    let out = dir.join("out");
    std::fs::create_dir_all(&out)?;
    let sides = Sides {
        transcript,
        ccusage,
        config: &config,
        storage: &storage,
        out: &out,
    };
    let mut r = SizeResult {
        bytes,
        files,
        ..SizeResult::default()
    };
    for round in 0..rounds.max(1) {
        eprintln!(
            "bench-cli: {} MB round {}/{rounds}",
            size / 1_000_000,
            round + 1
        );
        if let Some(m) = sides.ccusage_daily()? {
            r.ccusage = Some(best(r.ccusage, m));
            r.theirs = Some(ccusage_totals(&std::fs::read_to_string(
                out.join("0.out"),
            )?)?);
        }
        let _ = std::fs::remove_dir_all(&storage);
        r.first = Some(best(r.first, sides.ours()?));
        r.ours = our_totals(&std::fs::read_to_string(out.join("1.out"))?)?;
        r.repeat = Some(best(r.repeat, sides.ours()?));
        if our_totals(&std::fs::read_to_string(out.join("1.out"))?)? != r.ours {
            return Err("the repeated report's totals differ from the first one's".into());
        }
    }
    Ok(r)
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages (`?` where it cannot be read).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "?".to_owned(),
        |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// The smaller wall time, the larger peak.
fn best(so_far: Option<Measured>, m: Measured) -> Measured {
    match so_far {
        None => m,
        Some(s) => Measured {
            wall: s.wall.min(m.wall),
            peak_kib: s.peak_kib.max(m.peak_kib),
        },
    }
}

/// Copies of the logs as `projects/-bench-pN/<session>.jsonl` files (eight projects), until
/// `size` bytes; returns (bytes, files).
fn write_store(projects: &Path, logs: &[String], size: usize) -> Result<(usize, usize), Error> {
    let mut files = 0;
    let mut failed: Option<std::io::Error> = None;
    let bytes = claude_copies::copies(logs, size, |copy, i, text| {
        if failed.is_some() {
            return;
        }
        let dir = projects.join(format!("-bench-p{}", copy % 8));
        let path = dir.join(format!("c{copy}-log{i}.jsonl"));
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
            Ok(()) => files += 1,
            Err(e) => failed = Some(e),
        }
    });
    match failed {
        Some(e) => Err(format!(
            "writing the session store under {}: {e}",
            projects.display()
        )
        .into()),
        None => Ok((bytes, files)),
    }
}

/// The two programs, the store and where their outputs go.
struct Sides<'a> {
    transcript: &'a Path,
    ccusage: Option<&'a Path>,
    config: &'a Path,
    storage: &'a Path,
    out: &'a Path,
}

impl Sides<'_> {
    /// `ccusage daily --json --offline` (UTC days, like our `--by day`); output in `0.out`.
    fn ccusage_daily(&self) -> Result<Option<Measured>, Error> {
        let Some(ccusage) = self.ccusage else {
            return Ok(None);
        };
        let mut cmd = Command::new(ccusage);
        cmd.args(["daily", "--json", "--offline", "--timezone", "UTC"])
            .env("CLAUDE_CONFIG_DIR", self.config)
            .env("TZ", "UTC")
            .env("NO_COLOR", "1");
        run_sequence(vec![cmd], self.out).map(Some)
    }

    /// Our import of the store then the daily receipts; the receipts' JSON in `1.out`.
    fn ours(&self) -> Result<Measured, Error> {
        let cmd = |args: &[&str]| {
            let mut c = Command::new(self.transcript);
            c.arg("--storage")
                .arg(self.storage)
                .args(args)
                .env("CLAUDE_CONFIG_DIR", self.config)
                .env("NO_COLOR", "1");
            c
        };
        run_sequence(
            vec![
                cmd(&["import", "claude", "--store"]),
                cmd(&["receipts", "--by", "day", "--json"]),
            ],
            self.out,
        )
    }
}

/// Sums `groups[].usage` of `transcript receipts --by day --json`.
pub fn our_totals(json: &str) -> Result<Totals, Error> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("receipts --json output: {e}"))?;
    let groups = v["groups"]
        .as_array()
        .ok_or("receipts --json output has no groups array")?;
    let mut t = [0; 4];
    for g in groups {
        let u = &g["usage"];
        let keys = [
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
        ];
        for (slot, k) in t.iter_mut().zip(keys) {
            *slot += u[k].as_u64().unwrap_or(0);
        }
    }
    Ok(t)
}

/// `totals` of `ccusage daily --json`.
pub fn ccusage_totals(json: &str) -> Result<Totals, Error> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("ccusage --json output: {e}"))?;
    let t = &v["totals"];
    if !t.is_object() {
        return Err("ccusage --json output has no totals object".into());
    }
    let n = |k: &str| t[k].as_u64().unwrap_or(0);
    Ok([
        n("inputTokens"),
        n("outputTokens"),
        n("cacheReadTokens"),
        n("cacheCreationTokens"),
    ])
}

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self, Error> {
        let dir = std::env::temp_dir().join(format!("transcript-bench-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The verdicts drawn from the measured sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// ccusage / ours, first report, at the largest size (`None`: no ccusage).
    pub first_speedup: Option<f64>,
    /// ccusage / ours, repeated report, at the largest size.
    pub repeat_speedup: Option<f64>,
    /// Our peak at the largest size minus at the smallest, MiB.
    pub growth_mib: f64,
    /// Whether both sides agree on input and cache tokens at every size.
    pub totals_agree: Option<bool>,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Report {
    /// Verdicts from `results` (smallest size first).
    pub fn new(results: &[SizeResult], with_ccusage: bool) -> Self {
        let our_peak = |r: &SizeResult| {
            let p = |m: Option<Measured>| m.map_or(0, |m| m.peak_kib);
            p(r.first).max(p(r.repeat))
        };
        let growth_mib = match (results.first(), results.last()) {
            (Some(a), Some(b)) => mib(our_peak(b)) - mib(our_peak(a)),
            _ => 0.0,
        };
        let last = results.last();
        let speedup = |ours: Option<Measured>| {
            let (c, o) = (last?.ccusage?, ours?);
            Some(secs(c.wall) / secs(o.wall))
        };
        let agree = |r: &SizeResult| {
            r.theirs
                .is_some_and(|t| t[0] == r.ours[0] && t[2] == r.ours[2] && t[3] == r.ours[3])
        };
        Self {
            first_speedup: speedup(last.and_then(|r| r.first)),
            repeat_speedup: speedup(last.and_then(|r| r.repeat)),
            growth_mib,
            totals_agree: with_ccusage.then(|| results.iter().all(agree)),
        }
    }

    /// Every target met (the speed targets count only when ccusage ran).
    pub fn pass(&self) -> bool {
        self.first_speedup.is_none_or(|s| s >= FIRST_TARGET)
            && self.repeat_speedup.is_none_or(|s| s >= REPEAT_TARGET)
            && self.growth_mib < MEMORY_GROWTH_MIB
            && self.totals_agree != Some(false)
    }

    /// The table and verdict lines.
    pub fn render(&self, results: &[SizeResult], rounds: usize) -> String {
        let mut s = format!(
            "\nbench-cli: transcript (release) vs ccusage 17, best of {rounds} interleaved rounds, peak = largest VmHWM of the process tree\n\n| input | case | ccusage | ours | ccusage / ours | target |\n|---|---|---|---|---|---|\n"
        );
        for r in results {
            s.push_str(&size_rows(r));
        }
        s.push('\n');
        for r in results {
            s.push_str(&totals_line(r));
        }
        let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
        let speed = |name: &str, v: Option<f64>, target: f64| match v {
            Some(v) => format!(
                "bench-cli: {name} {v:.1}x faster than ccusage (target >= {target}x): {}\n",
                verdict(v >= target)
            ),
            None => format!("bench-cli: {name}: no ccusage, not compared\n"),
        };
        s.push_str(&speed(
            "first import + report",
            self.first_speedup,
            FIRST_TARGET,
        ));
        s.push_str(&speed(
            "repeated report",
            self.repeat_speedup,
            REPEAT_TARGET,
        ));
        s.push_str(&format!(
            "bench-cli: our peak memory grows {:+.1} MiB from the smallest to the largest input (target < {MEMORY_GROWTH_MIB} MiB): {}\n",
            self.growth_mib,
            verdict(self.growth_mib < MEMORY_GROWTH_MIB)
        ));
        if let Some(agree) = self.totals_agree {
            s.push_str(&format!(
                "bench-cli: input and cache token totals agree with ccusage: {}\n",
                verdict(agree)
            ));
        }
        s.push_str(&format!("bench-cli: {}\n", verdict(self.pass())));
        s
    }
}

/// The table rows of one size.
fn size_rows(r: &SizeResult) -> String {
    let size = format!("{:.1} MB, {} files", r.bytes as f64 / 1e6, r.files);
    let cell = |m: Option<Measured>| match m {
        Some(m) => format!("{:.3} s, {:.1} MiB", secs(m.wall), mib(m.peak_kib)),
        None => "-".to_owned(),
    };
    let ratio = |o: Option<Measured>| match (r.ccusage, o) {
        (Some(c), Some(o)) => format!("{:.1}x", secs(c.wall) / secs(o.wall)),
        _ => "-".to_owned(),
    };
    format!(
        "| {size} | (a) first import + receipts --by day | {} | {} | {} | >= {FIRST_TARGET}x |\n| {size} | (b) repeated import + receipts | {} | {} | {} | >= {REPEAT_TARGET}x |\n",
        cell(r.ccusage),
        cell(r.first),
        ratio(r.first),
        cell(r.ccusage),
        cell(r.repeat),
        ratio(r.repeat),
    )
}

/// Both sides' totals at one size.
fn totals_line(r: &SizeResult) -> String {
    let t = |t: &Totals| {
        format!(
            "input {} cache read {} cache write {} output {}",
            t[0], t[2], t[3], t[1]
        )
    };
    format!(
        "bench-cli: {:.0} MB totals: ours {}; ccusage {} (ccusage's output counts the first record of each request: a streaming placeholder)\n",
        r.bytes as f64 / 1e6,
        t(&r.ours),
        r.theirs.as_ref().map_or("-".to_owned(), t),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(ms: u64, kib: u64) -> Measured {
        Measured {
            wall: Duration::from_millis(ms),
            peak_kib: kib,
        }
    }

    fn size(bytes: usize, c: u64, first: u64, repeat: u64, peak: u64) -> SizeResult {
        SizeResult {
            bytes,
            files: 3,
            ccusage: Some(m(c, 200 << 10)),
            first: Some(m(first, peak)),
            repeat: Some(m(repeat, peak)),
            ours: [1, 2, 3, 4],
            theirs: Some([1, 99, 3, 4]),
        }
    }

    #[test]
    fn targets_are_judged_at_the_largest_size() {
        let ok = [
            size(25, 400, 300, 100, 10 << 10),
            size(100, 1600, 500, 150, 12 << 10),
        ];
        let r = Report::new(&ok, true);
        assert!(r.pass(), "{r:?}");
        assert!((r.first_speedup.unwrap() - 3.2).abs() < 1e-9);
        // 2.9x is a miss, and so is a repeated report only 9x faster.
        let slow = [
            size(25, 400, 300, 100, 10 << 10),
            size(100, 1600, 552, 150, 12 << 10),
        ];
        assert!(!Report::new(&slow, true).pass());
        let slow = [
            size(25, 400, 300, 100, 10 << 10),
            size(100, 1600, 500, 178, 12 << 10),
        ];
        assert!(!Report::new(&slow, true).pass());
        assert!(Report::new(&slow, true).render(&slow, 3).contains("MISS"));
    }

    #[test]
    fn memory_that_grows_with_the_input_is_a_miss() {
        let grows = [
            size(25, 400, 100, 10, 10 << 10),
            size(100, 1600, 100, 10, 30 << 10),
        ];
        let r = Report::new(&grows, true);
        assert!((r.growth_mib - 20.0).abs() < 1e-9);
        assert!(!r.pass());
    }

    #[test]
    fn totals_must_agree_on_input_and_cache_but_not_output() {
        let mut s = [size(100, 1600, 100, 10, 10 << 10)];
        assert_eq!(Report::new(&s, true).totals_agree, Some(true));
        s[0].theirs = Some([1, 2, 3, 5]);
        assert!(!Report::new(&s, true).pass());
    }

    #[test]
    fn without_ccusage_only_memory_is_judged_and_the_table_says_so() {
        let mut s = [size(100, 1600, 100, 10, 10 << 10)];
        s[0].ccusage = None;
        s[0].theirs = None;
        let r = Report::new(&s, false);
        assert_eq!((r.first_speedup, r.totals_agree), (None, None));
        assert!(r.pass());
        assert!(r.render(&s, 1).contains("no ccusage, not compared"));
    }

    #[test]
    fn both_sides_totals_are_read_from_their_json() {
        let ours = r#"{"by":"day","groups":[{"key":"2026-02-10","usage":{"input_tokens":5,"output_tokens":7,"cache_read_tokens":11,"cache_write_tokens":13}},{"key":"2026-02-11","usage":{"input_tokens":1}}]}"#;
        assert_eq!(our_totals(ours).unwrap(), [6, 7, 11, 13]);
        let theirs = r#"{"daily":[],"totals":{"inputTokens":6,"outputTokens":2,"cacheCreationTokens":13,"cacheReadTokens":11,"totalCost":1.5}}"#;
        assert_eq!(ccusage_totals(theirs).unwrap(), [6, 2, 11, 13]);
        assert!(ccusage_totals("{}").is_err());
        assert!(our_totals("[]").is_err());
    }

    #[test]
    fn the_store_holds_every_copy_with_fresh_ids() {
        let dir = std::env::temp_dir().join(format!("xtask-store-{}", std::process::id()));
        let logs = vec![
            "{\"sessionId\":\"s\",\"message\":{\"id\":\"msg_1\"},\"requestId\":\"req_1\"}\n"
                .to_owned(),
        ];
        let (bytes, files) = write_store(&dir, &logs, 150).unwrap();
        let text = std::fs::read_to_string(dir.join("-bench-p1/c1-log0.jsonl")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(files, 3);
        assert!(bytes >= 150);
        assert!(
            text.contains("\"msg_c1_1\"") && text.contains("\"req_c1_1\""),
            "{text}"
        );
        assert!(text.contains("\"sessionId\":\"c1-s\""), "{text}");
    }
}
