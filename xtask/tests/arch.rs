//! Tests of `cargo xtask arch-check`: the real workspace passes, synthetic workspaces that
//! break a rule fail with a message naming the crate, the offence and the rule.

#![allow(clippy::unwrap_used)] // test harness: a panic is a test failure with a location

use std::process::Command;

use support::Ws;
use xtask::arch::{self, Offense, Violation};

mod support;

fn check(ws: &Ws) -> Vec<Violation> {
    arch::check(ws.root()).unwrap()
}

const PURE: &str = "//! A pure crate.\npub fn f() -> u32 { 1 }\n";

/// A clean copy of the real layering, to which each test adds one mistake.
fn layered() -> Ws {
    Ws::new()
        .krate("transcript-domain", &[], PURE)
        .krate(
            "transcript-providers",
            &[("transcript-domain", "dependencies")],
            PURE,
        )
        .krate(
            "transcript-infra",
            &[("transcript-domain", "dependencies")],
            PURE,
        )
        .krate(
            "transcript-exec",
            &[
                ("transcript-domain", "dependencies"),
                ("transcript-providers", "dependencies"),
                // tests may compose the real recorder
                ("transcript-infra", "dev-dependencies"),
            ],
            PURE,
        )
}

fn messages(v: &[Violation]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

#[test]
fn real_workspace_passes() {
    let violations = arch::check(&xtask::workspace_root()).unwrap();
    assert!(violations.is_empty(), "{:#?}", messages(&violations));
}

#[test]
fn clean_synthetic_workspace_passes_and_dev_dependencies_may_cross_layers() {
    let ws = layered().krate(
        "transcript-cli",
        &[
            ("transcript-domain", "dependencies"),
            ("transcript-infra", "dependencies"),
            ("transcript-exec", "dependencies"),
        ],
        "//! cli\n",
    );
    assert_eq!(messages(&check(&ws)), Vec::<String>::new());
}

#[test]
fn exec_depending_on_infra_is_a_violation() {
    let ws = Ws::new()
        .krate("transcript-domain", &[], PURE)
        .krate(
            "transcript-infra",
            &[("transcript-domain", "dependencies")],
            PURE,
        )
        .krate(
            "transcript-exec",
            &[
                ("transcript-domain", "dependencies"),
                ("transcript-infra", "dependencies"),
            ],
            PURE,
        );
    let v = check(&ws);
    assert_eq!(v.len(), 1, "{:#?}", messages(&v));
    assert_eq!(v[0].krate, "transcript-exec");
    assert_eq!(
        v[0].offense,
        Offense::Dependency {
            name: "transcript-infra".into(),
            kind: "normal".into()
        }
    );
    let msg = v[0].to_string();
    assert!(
        msg.starts_with(
            "transcript-exec: depends on `transcript-infra` (normal dependency)\n    rule: "
        ),
        "{msg}"
    );
    assert!(msg.contains("never on transcript-infra"), "{msg}");
}

#[test]
fn domain_depending_on_a_workspace_crate_or_tokio_is_a_violation() {
    let ws = Ws::new()
        .krate("transcript-providers", &[], PURE)
        .krate("tokio", &[], "//! stand-in\n")
        .krate(
            "transcript-domain",
            &[
                ("transcript-providers", "build-dependencies"),
                ("tokio", "dependencies"),
            ],
            PURE,
        );
    let v: Vec<_> = check(&ws)
        .into_iter()
        .filter(|v| v.krate == "transcript-domain")
        .collect();
    let deps: Vec<_> = v.iter().map(|v| &v.offense).collect();
    assert!(deps.contains(&&Offense::Dependency {
        name: "transcript-providers".into(),
        kind: "build".into()
    }));
    assert!(deps.contains(&&Offense::Dependency {
        name: "tokio".into(),
        kind: "normal".into()
    }));
}

#[test]
fn depending_on_the_cli_is_a_violation_even_for_the_composition_root_peers() {
    let ws = layered().krate("transcript-cli", &[], "//! cli\n").krate(
        "xtask",
        &[("transcript-cli", "dependencies")],
        "//! x\n",
    );
    let v = check(&ws);
    assert_eq!(v.len(), 1, "{:#?}", messages(&v));
    assert_eq!(v[0].krate, "xtask");
    assert_eq!(v[0].rule, arch::TERMINAL_RULE);
}

#[test]
fn unplaced_crate_is_a_violation() {
    let ws = layered().krate("transcript-extra", &[], PURE);
    let v = check(&ws);
    assert_eq!(v.len(), 1, "{:#?}", messages(&v));
    assert_eq!(v[0].offense, Offense::Unplaced);
    assert!(
        v[0].to_string()
            .contains("transcript-extra: not in the layering table")
    );
}

#[test]
fn clock_call_in_the_domain_is_reported_with_file_and_line() {
    let ws = layered().file(
        "crates/transcript-domain/src/clock.rs",
        "//! Clock.\n\n/// Now.\npub fn now() -> std::time::SystemTime {\n    std::time::SystemTime::now()\n}\n",
    );
    let v = check(&ws);
    assert_eq!(v.len(), 1, "{:#?}", messages(&v));
    let msg = v[0].to_string();
    assert_eq!(
        msg.lines().next().unwrap(),
        "transcript-domain: crates/transcript-domain/src/clock.rs:5: uses `SystemTime::now` \
         (wall clock: use the Clock port): std::time::SystemTime::now()"
    );
    assert!(
        msg.contains("rule: transcript-domain is the pure wire contract"),
        "{msg}"
    );
}

#[test]
fn grouped_io_imports_in_providers_are_reported() {
    let ws = layered().file(
        "crates/transcript-providers/src/lib.rs",
        "//! Providers.\nuse std::{\n    collections::BTreeMap,\n    fs,\n    io::{self, stdin},\n};\n\
         pub fn f() { let _ = (fs::read(\"x\"), stdin(), uuid::Uuid::new_v4(), BTreeMap::<u8, u8>::new(), io::empty()); }\n",
    );
    let hits: Vec<(String, usize)> = check(&ws)
        .into_iter()
        .map(|v| match v.offense {
            Offense::Source { pattern, line, .. } => (pattern, line),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        hits,
        vec![
            ("std::fs".to_owned(), 4),
            ("io::stdin".to_owned(), 5),
            // Each use through the imports is reported too: the syn scanner resolves
            // `fs::read` to `std::fs::read` and `stdin()` to `std::io::stdin`.
            ("Uuid::new_v4".to_owned(), 7),
            ("io::stdin".to_owned(), 7),
            ("std::fs".to_owned(), 7)
        ]
    );
}

#[test]
fn test_only_code_and_documentation_are_not_scanned() {
    let ws = layered()
        .file(
            "crates/transcript-domain/src/lib.rs",
            "//! Pure: no `std::fs`, no `SystemTime::now()`.\n\
             /// Does not call tokio::spawn.\npub fn f() -> &'static str { \"std::process::exit\" }\n\
             #[cfg(test)]\nmod tests {\n    #[test]\n    fn reads() { let _ = std::fs::read(\"x\"); }\n}\n\
             #[cfg(test)]\nmod golden;\n",
        )
        .file(
            "crates/transcript-domain/src/golden.rs",
            "//! Test-only.\nuse std::fs::File;\n",
        )
        .file(
            "crates/transcript-domain/src/helpers.rs",
            "//! Test-only file.\n#![cfg(test)]\nuse std::net::TcpStream;\n",
        );
    assert_eq!(messages(&check(&ws)), Vec::<String>::new());
}

#[test]
fn binary_exits_1_and_prints_the_violation() {
    let ws = layered().file(
        "crates/transcript-domain/src/lib.rs",
        "//! Domain.\npub fn id() -> uuid::Uuid { uuid::Uuid::new_v4() }\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["arch-check", "--root"])
        .arg(ws.root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error[arch]: transcript-domain: crates/transcript-domain/src/lib.rs:2: uses `Uuid::new_v4`"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("arch-check: 1 violation(s)"), "{stderr}");

    let clean = Ws::new().krate("transcript-domain", &[], PURE);
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["arch-check", "--root"])
        .arg(clean.root())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
