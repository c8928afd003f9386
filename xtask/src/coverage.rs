//! `cargo xtask coverage`: per-crate line coverage of the library crates, with
//! cargo-llvm-cov where the toolchain has llvm-tools (exact), cargo-tarpaulin otherwise.

use std::path::Path;
use std::process::Command;

use crate::metadata;
use crate::tasks::{Error, cargo, ensure_installed, run_tee};

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

/// `cargo xtask coverage`: per-crate line coverage of the library crates under the whole
/// workspace's tests (cargo-llvm-cov with llvm-tools, else tarpaulin's ptrace engine).
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
        return llvm_cov(root, &crates);
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

/// The table from cargo-llvm-cov, the whole workspace's tests run once.
fn llvm_cov(root: &Path, crates: &[(String, String)]) -> Result<i32, Error> {
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
    // server example, the cli's MCP tests its mcp_fault_server and the NATS load test
    // the fleet runner example, built here (uninstrumented) and named to them.
    let mut examples = cargo(root);
    examples.args([
        "build",
        "-p",
        "transcript-cli",
        "-p",
        "transcript-mcp",
        "-p",
        "transcript-nats",
        "--examples",
    ]);
    if !examples.status()?.success() {
        return Err(
            "cargo build -p transcript-cli -p transcript-mcp -p transcript-nats --examples failed"
                .into(),
        );
    }
    let mut cmd = cargo(root);
    cmd.env(
        "TRANSCRIPT_MCP_FAULT_SERVER",
        root.join("target/debug/examples/fault_server"),
    );
    cmd.env(
        "TRANSCRIPT_EXAMPLES_DIR",
        root.join("target/debug/examples"),
    );
    cmd.env(
        "TRANSCRIPT_FLEET_RUNNER",
        root.join("target/debug/examples/fleet_runner"),
    );
    // The whole workspace's tests (the binary's end-to-end tests included: the
    // `transcript` processes they start are instrumented too), every one even when one
    // fails (a failed test still fails the task, after the table); the table counts the
    // library crates' lines.
    cmd.args([
        "llvm-cov",
        "--summary-only",
        "--ignore-run-fail",
        "--workspace",
        "--exclude",
        "xtask",
    ]);
    let (ok, lines) = run_tee(cmd)?;
    print_table(&parse_llvm_cov(&lines, crates));
    // `--ignore-run-fail` exits 0 after failed tests: cargo's own lines tell.
    let failed = lines.iter().any(|l| l.starts_with("error: test failed"));
    if failed {
        eprintln!("coverage: some tests failed (see `error: test failed` above)");
    }
    Ok(i32::from(!ok || failed))
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

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_owned).collect()
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
}
