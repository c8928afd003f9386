//! Tests of the task runners (`bench`, `stress`, `fuzz`) and of the command line, driven on
//! synthetic workspaces through the real `xtask` binary.

#![allow(clippy::unwrap_used)] // test harness: a panic is a test failure with a location

use std::path::Path;
use std::process::Command;

use support::Ws;

mod support;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn xtask(root: &Path, args: &[&str]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    // own target dir: never wait on the lock of the outer `cargo test`'s target dir
    cmd.env("CARGO_TARGET_DIR", root.join("target"));
    // `--root` goes right after the command: after a `--` it would be passed through
    if let Some((command, rest)) = args.split_first() {
        cmd.arg(command).arg("--root").arg(root).args(rest);
    }
    let out = cmd.output().unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn infra() -> Ws {
    Ws::new().krate("transcript-infra", &[], "//! Stand-in infra.\n")
}

#[test]
fn stress_reports_a_missing_kill_test_and_exits_1() {
    let ws = infra();
    let out = xtask(ws.root(), &["stress"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("stress: missing: test target `kill` of transcript-infra"),
        "{}",
        out.stderr
    );
}

#[test]
fn stress_runs_the_kill_test_in_release_with_the_trial_count() {
    let ws = infra().file(
        "crates/transcript-infra/tests/kill.rs",
        "//! Stand-in kill test.\n#[test]\nfn kill() {\n    \
         let n: u32 = std::env::var(\"TRANSCRIPT_KILL_TRIALS\").unwrap().parse().unwrap();\n    \
         let release = !cfg!(debug_assertions);\n    \
         println!(\"kill: {n} trials, release={release}\");\n    assert!(n > 0 && release);\n}\n",
    );
    let out = xtask(ws.root(), &["stress", "--trials", "7"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("kill: 7 trials, release=true"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("TRANSCRIPT_KILL_TRIALS=7: kill test passed (1 passed, 0 failed)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("the test reports: kill: 7 trials"),
        "{}",
        out.stderr
    );

    let out = xtask(ws.root(), &["stress", "--trials", "0"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("kill test FAILED (0 passed, 1 failed)"),
        "{}",
        out.stderr
    );
}

#[test]
fn bench_runs_every_bench_target_with_passthrough_arguments() {
    let bench = |name: &str| {
        format!(
            "//! Stand-in bench.\nfn main() {{\n    let args: Vec<String> = std::env::args().skip(1).collect();\n    \
             println!(\"bench {name} ran, release={{}}, args={{args:?}}\", !cfg!(debug_assertions));\n}}\n"
        )
    };
    let ws = Ws::new()
        .krate("alpha", &[], "//! a\n")
        .krate("beta", &[], "//! b\n")
        .krate("gamma", &[], "//! no benches\n")
        .file("crates/alpha/benches/one.rs", &bench("one"))
        .file("crates/alpha/benches/two.rs", &bench("two"))
        .file("crates/beta/benches/three.rs", &bench("three"))
        .append(
            "crates/alpha/Cargo.toml",
            "\n[[bench]]\nname = \"one\"\nharness = false\n\n[[bench]]\nname = \"two\"\nharness = false\n",
        )
        .append(
            "crates/beta/Cargo.toml",
            "\n[[bench]]\nname = \"three\"\nharness = false\n",
        );
    let out = xtask(ws.root(), &["bench", "--", "--quick"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    for name in ["one", "two", "three"] {
        assert!(
            out.stdout.contains(&format!(
                "bench {name} ran, release=true, args=[\"--quick\""
            )),
            "{}",
            out.stdout
        );
    }
    assert!(
        out.stderr.contains("bench: 3 target(s) run, 0 failed"),
        "{}",
        out.stderr
    );

    let out = xtask(ws.root(), &["bench", "-p", "beta"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("bench three ran"), "{}", out.stdout);
    assert!(!out.stdout.contains("bench one ran"), "{}", out.stdout);

    let out = xtask(ws.root(), &["bench", "-p", "gamma"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("package `gamma` has no bench target"),
        "{}",
        out.stderr
    );
}

#[test]
fn fuzz_reports_a_missing_fuzz_workspace_and_exits_1() {
    let ws = infra();
    let out = xtask(ws.root(), &["fuzz", "--all", "--seconds", "1"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("fuzz: missing: fuzz/Cargo.toml"),
        "{}",
        out.stderr
    );
}

#[test]
fn usage_errors_exit_2() {
    let ws = infra();
    for args in [
        &["frobnicate"][..],
        &["fuzz", "target"],
        &["fuzz", "--seconds", "3"],
        &[],
    ] {
        let out = xtask(ws.root(), args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("usage: cargo xtask"), "{}", out.stderr);
    }
}
