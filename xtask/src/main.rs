//! `cargo xtask`: command-line front of the workspace's developer tooling (see the library).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use xtask::schema::Freshness;
use xtask::tasks::{self, FuzzTargets};
use xtask::{arch, schema, workspace_root};

const USAGE: &str = "usage: cargo xtask <command> [--root DIR]

commands:
  arch-check                         check the crate layering and purity rules
  schema [--check]                   write (or check) schema/exchange-event.schema.json
  bench [-p PKG] [-- ARGS]           run every bench target (release); without -p, bench-cli too
  bench-cli [--rounds N]             transcript import + receipts vs ccusage 17 on ~25 and ~100 MB
  bench-nats-import [--rounds N]     import --store of ~100 MB into NATS beside files
                                     of real Claude Code session logs (default 5 rounds)
  stress [--trials N]                run the infra kill test N times (default 100, release)
  faults                             the fault suite, long variants: full disks, huge lines,
                                     signals with grandchildren, umask 0, symlinks (root for tmpfs)
  fuzz <TARGET>|--all --seconds N    run cargo-fuzz targets in fuzz/ for N seconds each
  coverage                           per-crate line coverage of the library crates
  e2e-phoenix                        export the demo to a real Arize Phoenix on 127.0.0.1 (outside CI)

--root DIR runs a command on another workspace (default: the one xtask was built from).";

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Splits `args` at a `--`: (own arguments, pass-through arguments).
fn split_passthrough(args: &[String]) -> (&[String], &[String]) {
    match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[]),
    }
}

/// Value following `flag` in `args`, if the flag is present.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Result<Option<&'a str>> {
    match args.iter().position(|a| a == flag) {
        None => Ok(None),
        Some(i) => match args.get(i + 1) {
            Some(v) => Ok(Some(v)),
            None => Err(format!("{flag} needs a value\n\n{USAGE}").into()),
        },
    }
}

fn usage_error(msg: &str) -> Result<u8> {
    eprintln!("xtask: {msg}\n\n{USAGE}");
    Ok(2)
}

fn dispatch(args: &[String]) -> Result<u8> {
    let Some(cmd) = args.first() else {
        return usage_error("no command given");
    };
    // `--root DIR` applies to every command; it is removed before command-specific parsing.
    let (own, pass) = split_passthrough(&args[1..]);
    let root = flag_value(own, "--root")?.map_or_else(workspace_root, PathBuf::from);
    let mut rest: Vec<String> = own.to_vec();
    if let Some(i) = rest.iter().position(|a| a == "--root") {
        rest.drain(i..i + 2);
    }
    if args[1..].iter().any(|a| a == "--") {
        rest.push("--".to_owned());
        rest.extend(pass.iter().cloned());
    }
    let rest = rest.as_slice();
    let code = match cmd.as_str() {
        "arch-check" => arch_check(&root)?,
        "schema" => schema_cmd(&root, rest.iter().any(|a| a == "--check"))?,
        "bench" => {
            let (own, pass) = split_passthrough(rest);
            tasks::bench(&root, flag_value(own, "-p")?, pass)?
        }
        "bench-cli" => {
            let rounds = match flag_value(rest, "--rounds")? {
                Some(n) => n.parse()?,
                None => xtask::bench_cli::ROUNDS,
            };
            xtask::bench_cli::bench_cli(&root, rounds)?.code
        }
        "bench-nats-import" => {
            let rounds = flag_value(rest, "--rounds")?.unwrap_or("3").parse()?;
            xtask::bench_cli::nats_import::bench(&root, rounds)?.code
        }
        "stress" => {
            let trials = flag_value(rest, "--trials")?.unwrap_or("100").parse()?;
            tasks::stress(&root, trials)?
        }
        "fuzz" => {
            let (own, pass) = split_passthrough(rest);
            let Some(seconds) = flag_value(own, "--seconds")? else {
                return usage_error("fuzz needs --seconds N");
            };
            let seconds: u64 = seconds.parse()?;
            let targets = if own.iter().any(|a| a == "--all") {
                FuzzTargets::All
            } else {
                let mut positional = own.iter().enumerate().filter(|(i, a)| {
                    !a.starts_with("--") && (*i == 0 || own[i - 1] != "--seconds")
                });
                match positional.next() {
                    Some((_, t)) => FuzzTargets::One(t.clone()),
                    None => return usage_error("fuzz needs a target name or --all"),
                }
            };
            tasks::fuzz(&root, &targets, seconds, pass)?
        }
        "faults" => tasks::faults(&root)?,
        "coverage" => xtask::coverage::coverage(&root)?,
        "e2e-phoenix" => xtask::phoenix::e2e_phoenix(&root)?,
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            0
        }
        other => return usage_error(&format!("unknown command `{other}`")),
    };
    Ok(u8::try_from(code).unwrap_or(1))
}

fn arch_check(root: &std::path::Path) -> Result<i32> {
    let violations = arch::check(root)?;
    if violations.is_empty() {
        println!("arch-check: ok ({} rules)", arch::RULES.len());
        return Ok(0);
    }
    for v in &violations {
        eprintln!("error[arch]: {v}");
    }
    eprintln!("arch-check: {} violation(s)", violations.len());
    Ok(1)
}

fn schema_cmd(root: &std::path::Path, check: bool) -> Result<i32> {
    if !check {
        let path = schema::write(root)?;
        println!("schema: wrote {}", path.display());
        return Ok(0);
    }
    match schema::check(root)? {
        Freshness::Fresh => {
            println!("schema: {} is up to date", schema::SCHEMA_FILE);
            Ok(0)
        }
        Freshness::Missing => {
            eprintln!(
                "schema: {} is missing; run `cargo xtask schema`",
                schema::SCHEMA_FILE
            );
            Ok(1)
        }
        Freshness::Differs {
            line,
            generated,
            checked_in,
        } => {
            eprintln!(
                "schema: {} differs from a fresh generation at line {line}:\n  checked in: {checked_in}\n  generated:  {generated}\nrun `cargo xtask schema` and commit the result",
                schema::SCHEMA_FILE
            );
            Ok(1)
        }
    }
}
