//! Runners for the measuring and long-running commands: `bench`, `stress`, `fuzz`, `coverage`.
//!
//! They shell out to cargo (and cargo-fuzz / cargo-tarpaulin, installed on first use) with
//! inherited or tee'd output so that progress streams live. Everything that measures builds in
//! release mode: `cargo bench` uses the bench profile (inherits release), `stress` passes
//! `--release`, and cargo-fuzz builds optimized by default.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::metadata::{self, Metadata};

/// Boxed error for the task runners: they report and exit, callers do not match on causes.
pub type Error = Box<dyn std::error::Error>;

/// Environment variable read by the infra kill test for its number of trials.
pub const KILL_TRIALS_VAR: &str = "TRANSCRIPT_KILL_TRIALS";

fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(metadata::cargo());
    cmd.current_dir(root);
    cmd
}

fn show(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            s.push_str(&format!("{}={} ", k.to_string_lossy(), v.to_string_lossy()));
        }
    }
    s.push_str("cargo");
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs a command with inherited stdio; returns whether it succeeded.
fn run(mut cmd: Command) -> Result<bool, Error> {
    eprintln!("==> {}", show(&cmd));
    let started = Instant::now();
    let status = cmd.status()?;
    eprintln!(
        "<== {} after {:.1}s",
        status,
        started.elapsed().as_secs_f64()
    );
    Ok(status.success())
}

/// Runs a command streaming its stdout line by line while keeping a copy.
fn run_tee(mut cmd: Command) -> Result<(bool, Vec<String>), Error> {
    eprintln!("==> {}", show(&cmd));
    let mut child = cmd.stdout(Stdio::piped()).spawn()?;
    let mut lines = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line?;
            println!("{line}");
            lines.push(line);
        }
    }
    let status = child.wait()?;
    Ok((status.success(), lines))
}

/// A bench target of a workspace package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchTarget {
    /// Package name.
    pub package: String,
    /// Bench target name.
    pub name: String,
}

/// Every bench target (`kind` "bench") of the workspace packages, sorted.
pub fn bench_targets(meta: &Metadata) -> Vec<BenchTarget> {
    let mut out: Vec<BenchTarget> = meta
        .packages
        .iter()
        .flat_map(|p| {
            p.targets
                .iter()
                .filter(|t| t.is("bench"))
                .map(|t| BenchTarget {
                    package: p.name.clone(),
                    name: t.name.clone(),
                })
        })
        .collect();
    out.sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
    out
}

/// `cargo xtask bench [-p PKG] [-- ARGS]`: runs every bench target, release profile.
pub fn bench(root: &Path, package: Option<&str>, args: &[String]) -> Result<i32, Error> {
    let meta = metadata::load(root)?;
    let targets: Vec<_> = bench_targets(&meta)
        .into_iter()
        .filter(|t| package.is_none_or(|p| p == t.package))
        .collect();
    if targets.is_empty() {
        return Ok(match package {
            Some(p) => {
                eprintln!("bench: package `{p}` has no bench target");
                1
            }
            None => {
                eprintln!("bench: the workspace has no bench target yet");
                0
            }
        });
    }
    let fixtures = crate::bench_cli::default_real_fixtures(root);
    let mut failed = Vec::new();
    let mut skipped = Vec::new();
    for t in &targets {
        let mut cmd = cargo(root);
        cmd.args(["bench", "-p", &t.package, "--bench", &t.name]);
        if let Some(dir) = &fixtures {
            cmd.env("TRANSCRIPT_REAL_FIXTURES", dir);
        }
        if !args.is_empty() {
            cmd.arg("--").args(args);
        }
        let (ok, lines) = run_tee(cmd)?;
        if !ok {
            failed.push(format!("{}/{}", t.package, t.name));
        }
        skipped.extend(
            skip_reasons(&lines)
                .into_iter()
                .map(|why| format!("{}/{}: {why}", t.package, t.name)),
        );
    }
    let cli = crate::bench_cli::as_part_of_bench(root, &meta, package)?;
    if cli.as_ref().is_some_and(|c| c.code != 0) {
        failed.push("bench-cli".to_owned());
    }
    skipped.extend(cli.iter().flat_map(|c| c.skipped.clone()));
    let run = targets.len() + usize::from(cli.is_some());
    eprintln!(
        "bench: {run} target(s) run, {} failed{}",
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join(", "))
        }
    );
    if skipped.is_empty() {
        eprintln!("bench: nothing skipped");
    } else {
        eprintln!("bench: {} skipped part(s):", skipped.len());
        for s in &skipped {
            eprintln!("  {s}");
        }
    }
    Ok(i32::from(!failed.is_empty()))
}

/// Lines of a bench's output that say it skipped something and why (a bench prints
/// `... skipped: <reason>` for a part it cannot run on this machine).
pub fn skip_reasons(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.contains("skipped:"))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// Counts from a libtest summary line (`test result: ok. 3 passed; 0 failed; ...`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestCounts {
    /// Tests passed.
    pub passed: u64,
    /// Tests failed.
    pub failed: u64,
}

/// Sums every libtest summary line in `lines`.
pub fn test_counts(lines: &[String]) -> TestCounts {
    let mut c = TestCounts::default();
    for line in lines {
        let Some(rest) = line.trim().strip_prefix("test result:") else {
            continue;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let n: u64 = n.parse().unwrap_or(0);
            match label {
                "passed" => c.passed += n,
                "failed" => c.failed += n,
                _ => {}
            }
        }
    }
    c
}

/// `cargo xtask stress [--trials N]`: the infra kill test with N trials (default 100), release.
pub fn stress(root: &Path, trials: u32) -> Result<i32, Error> {
    let meta = metadata::load(root)?;
    let infra = meta.packages.iter().find(|p| p.name == "transcript-infra");
    let has_kill =
        infra.is_some_and(|p| p.targets.iter().any(|t| t.is("test") && t.name == "kill"));
    if !has_kill {
        eprintln!(
            "stress: missing: test target `kill` of transcript-infra \
             (crates/transcript-infra/tests/kill.rs, the crash test of the live fan-out issue)"
        );
        return Ok(1);
    }
    let started = Instant::now();
    let mut cmd = cargo(root);
    cmd.env(KILL_TRIALS_VAR, trials.to_string()).args([
        "test",
        "--release",
        "-p",
        "transcript-infra",
        "--test",
        "kill",
        "--",
        "--nocapture",
    ]);
    let (ok, lines) = run_tee(cmd)?;
    let counts = test_counts(&lines);
    let trial_lines: Vec<&String> = lines
        .iter()
        // the test's own report, not libtest's `test kill_trials ... ok` line
        .filter(|l| l.to_ascii_lowercase().contains("trials") && !l.starts_with("test "))
        .collect();
    eprintln!(
        "stress: {KILL_TRIALS_VAR}={trials}: kill test {} ({} passed, {} failed) in {:.1}s",
        if ok { "passed" } else { "FAILED" },
        counts.passed,
        counts.failed,
        started.elapsed().as_secs_f64()
    );
    if let Some(last) = trial_lines.last() {
        eprintln!("stress: the test reports: {last}");
    }
    Ok(i32::from(!ok))
}

/// Installs a cargo subcommand with `cargo install --locked` unless `cargo <sub> --version` runs.
fn ensure_installed(root: &Path, sub: &str, krate: &str) -> Result<(), Error> {
    let present = cargo(root)
        .args([sub, "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        return Ok(());
    }
    eprintln!("{krate} is not installed: installing it (takes a few minutes)");
    let mut cmd = cargo(root);
    cmd.args(["install", krate, "--locked"]);
    if run(cmd)? {
        Ok(())
    } else {
        Err(format!("`cargo install {krate} --locked` failed").into())
    }
}

/// Which fuzz targets to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FuzzTargets {
    /// One named target.
    One(String),
    /// Every target `cargo fuzz list` prints.
    All,
}

fn fuzz_cmd(root: &Path) -> Command {
    let mut cmd = cargo(root);
    // cargo-fuzz passes -Z flags; the bootstrap switch lets the stable toolchain accept them.
    cmd.env("RUSTC_BOOTSTRAP", "1").arg("fuzz");
    cmd
}

/// `cargo xtask fuzz <target>|--all --seconds N [-- LIBFUZZER-ARGS]`.
pub fn fuzz(
    root: &Path,
    targets: &FuzzTargets,
    seconds: u64,
    args: &[String],
) -> Result<i32, Error> {
    if !root.join("fuzz").join("Cargo.toml").is_file() {
        eprintln!(
            "fuzz: missing: fuzz/Cargo.toml (the cargo-fuzz workspace of the providers fuzzing issue)"
        );
        return Ok(1);
    }
    ensure_installed(root, "fuzz", "cargo-fuzz")?;
    let names = match targets {
        FuzzTargets::One(t) => vec![t.clone()],
        FuzzTargets::All => {
            let out = fuzz_cmd(root).arg("list").output()?;
            if !out.status.success() {
                eprintln!(
                    "fuzz: `cargo fuzz list` failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                return Ok(1);
            }
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        }
    };
    if names.is_empty() {
        eprintln!("fuzz: `cargo fuzz list` lists no target");
        return Ok(1);
    }
    let mut failed = Vec::new();
    for name in &names {
        // The first corpus folder collects what the fuzzer finds (gitignored); the seeds
        // (e.g. deep nesting) are read as a second corpus, so every run starts from them.
        let corpus = root.join("fuzz").join("corpus").join(name);
        std::fs::create_dir_all(&corpus)?;
        let seeds = root.join("fuzz").join("seeds").join(name);
        let mut cmd = fuzz_cmd(root);
        cmd.args(["run", name]).arg(&corpus);
        if seeds.is_dir() {
            cmd.arg(&seeds);
        }
        cmd.arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .args(args);
        if !run(cmd)? {
            failed.push(name.clone());
        }
    }
    eprintln!(
        "fuzz: {} target(s) for {seconds}s each, {} failed{}",
        names.len(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join(", "))
        }
    );
    Ok(i32::from(!failed.is_empty()))
}

/// The fault test binaries: (package, test target). Their fast variants run in `cargo test`;
/// `TRANSCRIPT_FAULTS_LONG=1` turns on the long ones (bigger inputs, more trials).
pub const FAULT_SUITE: &[(&str, &str)] = &[
    ("transcript-cli", "faults"),
    ("transcript-cli", "terminal"),
    ("transcript-exec", "process"),
    ("transcript-exec", "disk_full"),
    ("transcript-exec", "bounded"),
    ("transcript-exec", "audit_umask"),
    ("transcript-infra", "integrity"),
    ("transcript-infra", "kill"),
];

/// Runs the fault suite with its long variants (release build): every case asserts the exit
/// code, the cause in the message, that the files on disk validate and that nothing
/// acknowledged is missing.
pub fn faults(root: &Path) -> Result<i32, Error> {
    let started = Instant::now();
    let mut failed = Vec::new();
    for (package, test) in FAULT_SUITE {
        let mut cmd = cargo(root);
        cmd.env("TRANSCRIPT_FAULTS_LONG", "1")
            .env(KILL_TRIALS_VAR, "100")
            .args(["test", "--release", "-p", package, "--test", test]);
        if !run(cmd)? {
            failed.push(format!("{package} --test {test}"));
        }
    }
    eprintln!(
        "faults: {} suites in {:.0?}, {} failed{}",
        FAULT_SUITE.len(),
        started.elapsed(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join(", "))
        }
    );
    Ok(i32::from(!failed.is_empty()))
}

/// Line coverage of one crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrateCoverage {
    /// Package name.
    pub krate: String,
    /// Covered lines.
    pub covered: u64,
    /// Coverable lines.
    pub coverable: u64,
}

impl CrateCoverage {
    /// Percentage of covered lines (0 when nothing is coverable).
    pub fn percent(&self) -> f64 {
        if self.coverable == 0 {
            0.0
        } else {
            self.covered as f64 * 100.0 / self.coverable as f64
        }
    }
}

/// Sums tarpaulin's `|| path: covered/coverable` lines (the "Tested/Total Lines" section)
/// per crate; `crates` pairs each package name with its `src` directory relative to the root.
pub fn parse_tarpaulin(lines: &[String], crates: &[(String, String)]) -> Vec<CrateCoverage> {
    let mut out: Vec<CrateCoverage> = crates
        .iter()
        .map(|(k, _)| CrateCoverage {
            krate: k.clone(),
            covered: 0,
            coverable: 0,
        })
        .collect();
    let mut in_totals = false;
    for line in lines {
        let Some(body) = line.strip_prefix("|| ") else {
            continue;
        };
        if body.starts_with("Tested/Total Lines") {
            in_totals = true;
            continue;
        }
        if body.starts_with("Uncovered Lines") {
            in_totals = false;
            continue;
        }
        if !in_totals {
            continue;
        }
        let Some((path, rest)) = body.rsplit_once(": ") else {
            continue;
        };
        let Some((cov, total)) = rest
            .split_whitespace()
            .next()
            .and_then(|f| f.split_once('/'))
        else {
            continue;
        };
        let (Ok(cov), Ok(total)) = (cov.parse::<u64>(), total.parse::<u64>()) else {
            continue;
        };
        let path = path.trim().trim_start_matches("./");
        if let Some(i) = crates
            .iter()
            .position(|(_, src)| path.starts_with(src.as_str()))
        {
            out[i].covered += cov;
            out[i].coverable += total;
        }
    }
    out
}

/// `cargo xtask coverage`: per-crate line coverage of the library crates (tarpaulin, ptrace).
pub fn coverage(root: &Path) -> Result<i32, Error> {
    let meta = metadata::load(root)?;
    let libs: Vec<_> = meta
        .packages
        .iter()
        .filter(|p| p.name != "xtask" && p.targets.iter().any(|t| t.is("lib")))
        .collect();
    let crates: Vec<(String, String)> = libs
        .iter()
        .map(|p| {
            let dir = p
                .dir()
                .strip_prefix(&meta.workspace_root)
                .unwrap_or(p.dir());
            (p.name.clone(), format!("{}/src/", dir.display()))
        })
        .collect();
    // cargo-llvm-cov (source-based coverage) when the toolchain has
    // llvm-tools: exact and unaffected by ptrace timing; tarpaulin otherwise.
    if llvm_tools_present(root) {
        ensure_installed(root, "llvm-cov", "cargo-llvm-cov")?;
        // Profiles left by earlier builds of changed code make llvm-cov drop
        // the functions whose hashes no longer match ("mismatched data"),
        // which silently counts their lines as uncovered.
        let mut clean = cargo(root);
        clean.args(["llvm-cov", "clean", "--workspace"]);
        if !clean.status()?.success() {
            return Err("cargo llvm-cov clean failed".into());
        }
        // cargo-llvm-cov builds test targets only: the MCP proxy tests run the fault
        // server example, built here (uninstrumented) and named to them.
        let mut examples = cargo(root);
        examples.args(["build", "-p", "transcript-mcp", "--examples"]);
        if !examples.status()?.success() {
            return Err("cargo build -p transcript-mcp --examples failed".into());
        }
        let mut cmd = cargo(root);
        cmd.env(
            "TRANSCRIPT_MCP_FAULT_SERVER",
            root.join("target/debug/examples/fault_server"),
        );
        cmd.args(["llvm-cov", "--summary-only"]);
        for p in &libs {
            cmd.args(["-p", &p.name]);
        }
        let (ok, lines) = run_tee(cmd)?;
        print_table(&parse_llvm_cov(&lines, &crates));
        return Ok(i32::from(!ok));
    }
    ensure_installed(root, "tarpaulin", "cargo-tarpaulin")?;
    let mut cmd = cargo(root);
    // llvm-tools are not available on this toolchain: the ptrace engine needs none.
    cmd.args([
        "tarpaulin",
        "--engine",
        "ptrace",
        "--skip-clean",
        "--out",
        "Stdout",
    ])
    .arg("--target-dir")
    .arg(meta.workspace_root.join("target").join("tarpaulin"));
    for p in &libs {
        cmd.args(["-p", &p.name]);
    }
    let (ok, lines) = run_tee(cmd)?;
    print_table(&parse_tarpaulin(&lines, &crates));
    Ok(i32::from(!ok))
}

/// Whether `rustup component list --installed` names llvm-tools.
fn llvm_tools_present(root: &Path) -> bool {
    Command::new("rustup")
        .current_dir(root)
        .args(["component", "list", "--installed"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("llvm-tools"))
}

/// Per-crate line totals from `cargo llvm-cov --summary-only`'s table: each
/// row is `<file> regions missed cover functions missed cover lines missed
/// cover …`, file paths relative to the workspace (or absolute).
pub fn parse_llvm_cov(lines: &[String], crates: &[(String, String)]) -> Vec<CrateCoverage> {
    crates
        .iter()
        .map(|(name, src)| {
            let (mut covered, mut coverable) = (0u64, 0u64);
            let crate_dir = src.trim_end_matches("src/");
            let short = crate_dir.trim_start_matches("crates/");
            for line in lines {
                let parts: Vec<&str> = line.split_whitespace().collect();
                let Some(file) = parts.first() else { continue };
                let ours = file.contains(src.as_str()) || file.starts_with(&format!("{short}src/"));
                if !ours || parts.len() < 10 {
                    continue;
                }
                if let (Ok(total), Ok(missed)) = (parts[7].parse::<u64>(), parts[8].parse::<u64>())
                {
                    coverable += total;
                    covered += total.saturating_sub(missed);
                }
            }
            CrateCoverage {
                krate: name.clone(),
                covered,
                coverable,
            }
        })
        .collect()
}

fn print_table(table: &[CrateCoverage]) {
    println!("\n{:<24} {:>15} {:>8}", "crate", "lines", "cover");
    for c in table {
        println!(
            "{:<24} {:>15} {:>7.1}%{}",
            c.krate,
            format!("{}/{}", c.covered, c.coverable),
            c.percent(),
            if c.percent() < 85.0 {
                "  (< 85% target)"
            } else {
                ""
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_cli::default_real_fixtures;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_owned).collect()
    }

    #[test]
    fn libtest_summaries_are_summed() {
        let out = lines(
            "running 1 test\ntrial 100/100 ok\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 3.2s\n\
             test result: FAILED. 2 passed; 1 failed; 0 ignored",
        );
        assert_eq!(
            test_counts(&out),
            TestCounts {
                passed: 3,
                failed: 1
            }
        );
    }

    #[test]
    fn llvm_cov_rows_are_grouped_per_crate() {
        let out = lines(
            "Filename  Regions  Missed  Cover  Functions  Missed  Executed  Lines  Missed  Cover\n\
             transcript-a/src/lib.rs  10  1  90.00%  2  0  100.00%  20  5  75.00%  0  0  -\n\
             transcript-a/src/x.rs  10  1  90.00%  2  0  100.00%  10  0  100.00%  0  0  -\n\
             /abs/crates/transcript-b/src/lib.rs  1  1  0.00%  1  1  0.00%  4  4  0.00%  0  0  -\n\
             TOTAL  21  3  85.00%  5  1  80.00%  34  9  73.53%  0  0  -",
        );
        let crates = vec![
            (
                "transcript-a".to_owned(),
                "crates/transcript-a/src/".to_owned(),
            ),
            (
                "transcript-b".to_owned(),
                "crates/transcript-b/src/".to_owned(),
            ),
        ];
        let got = parse_llvm_cov(&out, &crates);
        assert_eq!((got[0].covered, got[0].coverable), (25, 30));
        assert_eq!((got[1].covered, got[1].coverable), (0, 4));
    }

    #[test]
    fn tarpaulin_totals_are_grouped_per_crate() {
        let out = lines(
            "|| Uncovered Lines:\n|| crates/a/src/lib.rs: 3, 7-9\n|| Tested/Total Lines:\n\
             || crates/a/src/lib.rs: 8/10 +0.00%\n|| crates/a/src/x/y.rs: 2/10\n\
             || crates/a/tests/t.rs: 5/5\n|| crates/b/src/lib.rs: 0/4\n|| \n\
             55.00% coverage, 10/18 lines covered",
        );
        let crates = vec![
            ("a".to_owned(), "crates/a/src/".to_owned()),
            ("b".to_owned(), "crates/b/src/".to_owned()),
            ("c".to_owned(), "crates/c/src/".to_owned()),
        ];
        let got = parse_tarpaulin(&out, &crates);
        assert_eq!((got[0].covered, got[0].coverable), (10, 20));
        assert_eq!((got[1].covered, got[1].coverable), (0, 4));
        assert_eq!((got[2].covered, got[2].coverable), (0, 0));
        assert!((got[0].percent() - 50.0).abs() < 1e-9);
        assert_eq!(got[2].percent(), 0.0);
    }

    #[test]
    fn bench_skip_lines_are_collected_with_their_reason() {
        let out = lines(
            "format MB\nnormalize bench skipped: TRANSCRIPT_REAL_FIXTURES is not set\n| case | ratio |",
        );
        assert_eq!(
            skip_reasons(&out),
            vec!["normalize bench skipped: TRANSCRIPT_REAL_FIXTURES is not set".to_owned()]
        );
        assert!(skip_reasons(&lines("all ran\n| 1a | 1.00 |")).is_empty());
    }

    #[test]
    fn benches_find_the_shared_fixtures_beside_the_repository() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        let shared = root.path().join("shared/fixtures/providers");
        std::fs::create_dir_all(&repo).unwrap();
        // The variable, when the caller set it, is the bench's to check.
        if std::env::var_os("TRANSCRIPT_REAL_FIXTURES").is_some() {
            assert_eq!(default_real_fixtures(&repo), None);
            return;
        }
        assert_eq!(default_real_fixtures(&repo), None);
        std::fs::create_dir_all(&shared).unwrap();
        assert_eq!(
            default_real_fixtures(&repo),
            Some(shared.canonicalize().unwrap())
        );
    }
}
