//! Runners for the measuring and long-running commands: `bench`, `stress`, `fuzz`, `faults` (`coverage` is in `coverage.rs`).
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

pub(crate) fn cargo(root: &Path) -> Command {
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
pub(crate) fn run_tee(mut cmd: Command) -> Result<(bool, Vec<String>), Error> {
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
    let nats = match cli {
        Some(_) => Some(crate::bench_cli::nats_import::bench(root, 3)?),
        None => None,
    };
    skipped.extend(nats.iter().flat_map(|c| c.skipped.clone()));
    let run = targets.len() + usize::from(cli.is_some()) + usize::from(nats.is_some());
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
pub(crate) fn ensure_installed(root: &Path, sub: &str, krate: &str) -> Result<(), Error> {
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
