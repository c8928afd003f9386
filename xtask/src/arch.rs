//! The architecture guard behind `cargo xtask arch-check`.
//!
//! The workspace is hexagonal: `transcript-domain` is the pure wire contract and ports,
//! adapters (`transcript-infra`, `transcript-providers`, later `transcript-otel`) depend on it
//! alone, `transcript-exec` drives the domain through ports, and only `transcript-cli`
//! composes everything. [`RULES`] is that picture as data: one row per crate, naming the
//! workspace crates it may depend on and whether its sources must be pure. Adding a crate is
//! adding one row; a workspace crate without a row is itself a violation, so no crate slips
//! in unplaced.
//!
//! Two kinds of evidence are checked:
//! - declared dependencies from `cargo metadata --no-deps` (normal and build dependencies;
//!   dev-dependencies may cross layers because tests compose adapters);
//! - for pure crates, the sources under `src/` scanned by [`crate::scan`] for I/O, tokio,
//!   clocks and randomness (test-only code excepted).
//!
//! The same rules are written in `ARCHITECTURE.md`; the tidy tests keep the two in sync.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::metadata::{self, MetadataError, Package};
use crate::scan::{self, Pattern};

/// Which workspace crates a crate may depend on (normal and build dependencies).
#[derive(Debug, Clone, Copy)]
pub enum Allowed {
    /// Exactly these workspace crates.
    Only(&'static [&'static str]),
    /// Any workspace crate except the [`TERMINAL`] ones.
    AnyLibrary,
}

/// One row of the layering table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Package name.
    pub krate: &'static str,
    /// Workspace crates it may depend on.
    pub may_depend_on: Allowed,
    /// Pure crates: sources are scanned for [`IMPURE`] paths and may not depend on
    /// [`IMPURE_CRATES`].
    pub pure: bool,
    /// The rule in words, printed with every violation of this row.
    pub text: &'static str,
}

const DOMAIN: &str = "transcript-domain";
const PROVIDERS: &str = "transcript-providers";

/// Crates nothing may depend on (normal or build dependency): the binary composition root, the
/// example runner, the dev tooling and the test support crate (a dev-dependency only).
pub const TERMINAL: &[&str] = &[
    "transcript-cli",
    "custom-runner",
    "xtask",
    "transcript-testkit",
];

/// The layering table. One line per crate.
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    Rule { krate: DOMAIN, may_depend_on: Allowed::Only(&[]), pure: true, text: "transcript-domain is the pure wire contract: it depends on no workspace crate and does no I/O, no tokio, no clock or randomness (time and ids come through the Clock and RunIdGenerator ports)" },
    Rule { krate: PROVIDERS, may_depend_on: Allowed::Only(&[DOMAIN]), pure: true, text: "transcript-providers normalizes provider output in memory: among workspace crates it depends on transcript-domain only, and it does no I/O" },
    Rule { krate: "transcript-infra", may_depend_on: Allowed::Only(&[DOMAIN]), pure: false, text: "transcript-infra is the storage adapter: among workspace crates it depends on transcript-domain only" },
    Rule { krate: "transcript-exec", may_depend_on: Allowed::Only(&[DOMAIN, PROVIDERS]), pure: false, text: "transcript-exec depends on transcript-domain and transcript-providers only, never on transcript-infra: it reaches storage through the Recorder port" },
    Rule { krate: "transcript-export", may_depend_on: Allowed::Only(&[DOMAIN]), pure: true, text: "transcript-export derives views (JSON document, Markdown, HTML) from events: it depends on transcript-domain only and does no I/O (the CLI reads the files)" },
    Rule { krate: "transcript-redact", may_depend_on: Allowed::Only(&[DOMAIN]), pure: true, text: "transcript-redact is the opt-in masking stage (an EventMask): it depends on transcript-domain only and does no I/O" },
    Rule { krate: "transcript-otel", may_depend_on: Allowed::Only(&[DOMAIN]), pure: false, text: "transcript-otel is an exporter adapter: it depends on transcript-domain only, and only transcript-cli composes it" },
    Rule { krate: "transcript-mcp", may_depend_on: Allowed::Only(&[DOMAIN]), pure: false, text: "transcript-mcp is the MCP proxy adapter: among workspace crates it depends on transcript-domain only (no infra, no exec) and records through the Recorder port" },
    Rule { krate: "transcript-nats", may_depend_on: Allowed::Only(&[DOMAIN]), pure: false, text: "transcript-nats is the storage adapter on NATS JetStream: among workspace crates it depends on transcript-domain only (it encodes lines with the domain's PreEncoded, as the file recorder does)" },
    Rule { krate: "transcript-import", may_depend_on: Allowed::Only(&[DOMAIN, PROVIDERS, "transcript-infra"]), pure: false, text: "transcript-import turns agent logs into canonical runs: it depends on transcript-domain, transcript-providers and transcript-infra only (a mask comes in as the domain's EventMask), and it never prints" },
    Rule { krate: "transcript-replay", may_depend_on: Allowed::Only(&[DOMAIN, "transcript-providers", "transcript-exec"]), pure: false, text: "transcript-replay is the model server that plays a recorded run (or a test's script) to real agents: among workspace crates it depends on transcript-domain, transcript-providers (the CLIs' envelope rules) and transcript-exec (whose replay ports it adapts) only; the CLI and transcript-testkit use it" },
    Rule { krate: "transcript-compare", may_depend_on: Allowed::Only(&[DOMAIN, "transcript-providers", "transcript-export"]), pure: true, text: "transcript-compare aligns, diffs and checks runs from their events: it depends on transcript-domain, transcript-providers (the CLIs' envelope rules) and transcript-export (its HTML escaper) only and does no I/O (the CLI reads the files)" },
    Rule { krate: "transcript-viewer", may_depend_on: Allowed::Only(&[DOMAIN, "transcript-export", "transcript-compare"]), pure: false, text: "transcript-viewer is the live viewer of a store (`transcript serve`): among workspace crates it depends on transcript-domain (the read port), transcript-export (the run page, the escaper, billed turns) and transcript-compare (the diff page) only; it reads through the RunStore port, never an adapter, and only transcript-cli composes it" },
    Rule { krate: "transcript-cli", may_depend_on: Allowed::AnyLibrary, pure: false, text: "transcript-cli is the composition root: it may depend on every library crate" },
    Rule { krate: "custom-runner", may_depend_on: Allowed::AnyLibrary, pure: false, text: "custom-runner is the example of a team's own runner: it may use every library crate, and nothing depends on it" },
    Rule { krate: "transcript-testkit", may_depend_on: Allowed::Only(&["transcript-replay"]), pure: false, text: "transcript-testkit is test support (the real CLIs' sandboxes over transcript-replay's model server): of the workspace crates it depends on transcript-replay only, and library crates take it as a dev-dependency only" },
    Rule { krate: "xtask", may_depend_on: Allowed::AnyLibrary, pure: false, text: "xtask is dev tooling: it may depend on library crates, never on transcript-cli" },
];

/// Rule printed when something depends on a [`TERMINAL`] crate.
pub const TERMINAL_RULE: &str = "nothing depends on transcript-cli, custom-runner, xtask or transcript-testkit (dev-dependencies excepted): the CLI is the composition root, custom-runner an example, xtask is tooling and testkit is test support";

/// Rule printed for a workspace crate missing from [`RULES`].
pub const UNPLACED_RULE: &str = "every workspace crate has a row in the layering table (xtask/src/arch.rs RULES and ARCHITECTURE.md)";

/// External crates a pure crate may not depend on (async runtimes, randomness).
pub const IMPURE_CRATES: &[&str] = &[
    "tokio",
    "tokio-util",
    "async-std",
    "smol",
    "rand",
    "getrandom",
];

/// Paths a pure crate's sources may not mention outside test-only code.
#[rustfmt::skip]
pub const IMPURE: &[Pattern] = &[
    Pattern { path: "std::fs", why: "filesystem I/O" },
    Pattern { path: "std::net", why: "network I/O" },
    Pattern { path: "std::process", why: "process control" },
    Pattern { path: "io::stdin", why: "console I/O" },
    Pattern { path: "io::stdout", why: "console I/O" },
    Pattern { path: "io::stderr", why: "console I/O" },
    Pattern { path: "File::open", why: "filesystem I/O" },
    Pattern { path: "File::create", why: "filesystem I/O" },
    Pattern { path: "OpenOptions", why: "filesystem I/O" },
    Pattern { path: "tokio", why: "async runtime" },
    Pattern { path: "SystemTime::now", why: "wall clock: use the Clock port" },
    Pattern { path: "Instant::now", why: "monotonic clock: use the Clock port" },
    Pattern { path: "OffsetDateTime::now_utc", why: "wall clock: use the Clock port" },
    Pattern { path: "OffsetDateTime::now_local", why: "wall clock: use the Clock port" },
    Pattern { path: "Uuid::new_v4", why: "randomness: use the RunIdGenerator port" },
    Pattern { path: "Uuid::now_v7", why: "clock and randomness: use the RunIdGenerator port" },
];

/// What broke a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offense {
    /// A declared dependency the rule does not allow.
    Dependency {
        /// The dependency's package name.
        name: String,
        /// `normal` or `build`.
        kind: String,
    },
    /// A forbidden path in a pure crate's sources.
    Source {
        /// File, relative to the workspace root.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// The forbidden path that matched.
        pattern: String,
        /// Why it is forbidden.
        why: String,
        /// The source line, trimmed.
        text: String,
    },
    /// A workspace crate with no row in [`RULES`].
    Unplaced,
    /// Modules of one crate that use each other.
    Circle {
        /// `parent::{a, b}`.
        name: String,
        /// One `file:line uses path` per edge of the circle.
        witnesses: Vec<String>,
    },
    /// A circle listed in [`KNOWN_CIRCLES`] (not reported; used to find stale entries).
    KnownCircle {
        /// `parent::{a, b}`.
        name: String,
    },
}

/// One rule violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The offending crate.
    pub krate: String,
    /// What it did.
    pub offense: Offense,
    /// The rule it broke, in words.
    pub rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.offense {
            Offense::Dependency { name, kind } => {
                write!(f, "{}: depends on `{name}` ({kind} dependency)", self.krate)?
            }
            Offense::Source {
                file,
                line,
                pattern,
                why,
                text,
            } => write!(
                f,
                "{}: {}:{line}: uses `{pattern}` ({why}): {text}",
                self.krate,
                file.display()
            )?,
            Offense::Unplaced => write!(f, "{}: not in the layering table", self.krate)?,
            Offense::Circle { name, witnesses } => write!(
                f,
                "{}: modules {name} use each other:\n      {}",
                self.krate,
                witnesses.join("\n      ")
            )?,
            Offense::KnownCircle { name } => {
                write!(f, "{}: modules {name} use each other (known)", self.krate)?
            }
        }
        write!(f, "\n    rule: {}", self.rule)
    }
}

/// Why the check could not run (as opposed to finding violations).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// `cargo metadata` failed.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// A source file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A source file is not valid Rust.
    #[error("{path}:{line}: cannot parse: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the parse error.
        line: usize,
        /// The parser's message.
        message: String,
    },
}

/// Looks up a crate's row.
pub fn rule_for(krate: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.krate == krate)
}

/// Checks the workspace at `root`; returns every violation (empty when clean).
pub fn check(root: &Path) -> Result<Vec<Violation>, CheckError> {
    let meta = metadata::load(root)?;
    let members: Vec<&str> = meta.packages.iter().map(|p| p.name.as_str()).collect();
    let mut out = Vec::new();
    for pkg in &meta.packages {
        let Some(rule) = rule_for(&pkg.name) else {
            out.push(Violation {
                krate: pkg.name.clone(),
                offense: Offense::Unplaced,
                rule: UNPLACED_RULE.to_owned(),
            });
            continue;
        };
        check_dependencies(pkg, rule, &members, &mut out);
        if rule.pure {
            check_sources(pkg, rule, &meta.workspace_root, &mut out)?;
        }
        check_circles(pkg, &mut out)?;
    }
    out.retain(|v| !matches!(v.offense, Offense::KnownCircle { .. }));
    Ok(out)
}

/// Rule printed with a circle between the modules of one crate.
pub const CIRCLE_RULE: &str = "the modules of a crate form no circle: siblings that use each other cannot be read or changed alone (move what both need into a module of its own)";

/// Circles that existed when the check was introduced (#32), each to be broken; a circle not
/// listed here fails the check, and a listed one that is gone fails the tidy test
/// `known_circles_are_still_there` (remove it from the list), so the list only shrinks.
pub const KNOWN_CIRCLES: &[(&str, &str)] = &[];

/// The circles among the modules of the crate whose sources are under `src_dir`.
pub fn crate_circles(src_dir: &Path) -> Result<Vec<crate::circles::Circle>, CheckError> {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files)?;
    files.sort();
    let mut sources = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| CheckError::Read {
            path: file.clone(),
            source,
        })?;
        sources.push((file, text));
    }
    crate::circles::circles(src_dir, &sources).map_err(|e| CheckError::Parse {
        path: e.path,
        line: e.line,
        message: e.message,
    })
}

fn check_circles(pkg: &Package, out: &mut Vec<Violation>) -> Result<(), CheckError> {
    let found = crate_circles(&pkg.dir().join("src"))?;
    for circle in found {
        let name = circle.name();
        let known = KNOWN_CIRCLES
            .iter()
            .any(|(k, n)| *k == pkg.name && *n == name);
        out.push(Violation {
            krate: pkg.name.clone(),
            offense: if known {
                Offense::KnownCircle { name }
            } else {
                Offense::Circle {
                    name,
                    witnesses: circle.witnesses,
                }
            },
            rule: CIRCLE_RULE.to_owned(),
        });
    }
    Ok(())
}

fn check_dependencies(pkg: &Package, rule: &Rule, members: &[&str], out: &mut Vec<Violation>) {
    for dep in pkg.dependencies.iter().filter(|d| !d.is_dev()) {
        let name = dep.name.as_str();
        let is_member = dep.path.is_some() && members.contains(&name);
        let broken = if is_member && TERMINAL.contains(&name) {
            Some(TERMINAL_RULE)
        } else if is_member {
            let allowed = match rule.may_depend_on {
                Allowed::Only(list) => list.contains(&name),
                Allowed::AnyLibrary => true,
            };
            (!allowed).then_some(rule.text)
        } else {
            (rule.pure && IMPURE_CRATES.contains(&name)).then_some(rule.text)
        };
        if let Some(text) = broken {
            out.push(Violation {
                krate: pkg.name.clone(),
                offense: Offense::Dependency {
                    name: name.to_owned(),
                    kind: dep.kind_name().to_owned(),
                },
                rule: text.to_owned(),
            });
        }
    }
}

fn check_sources(
    pkg: &Package,
    rule: &Rule,
    root: &Path,
    out: &mut Vec<Violation>,
) -> Result<(), CheckError> {
    let mut files = Vec::new();
    rust_files(&pkg.dir().join("src"), &mut files)?;
    files.sort();
    // Two passes: a `#[cfg(test)] mod x;` may be declared in a file sorted after `x.rs`.
    let mut scanned = Vec::new();
    let mut skipped: Vec<PathBuf> = Vec::new();
    for file in &files {
        let src = std::fs::read_to_string(file).map_err(|source| CheckError::Read {
            path: file.clone(),
            source,
        })?;
        let found = scan::scan(&src, IMPURE).map_err(|e| CheckError::Parse {
            path: file.clone(),
            line: e.span().start().line,
            message: e.to_string(),
        })?;
        for name in &found.test_modules {
            let dir = module_dir(file);
            skipped.push(dir.join(format!("{name}.rs")));
            skipped.push(dir.join(name));
        }
        scanned.push((file, found));
    }
    for (file, found) in scanned {
        if skipped.iter().any(|s| file.starts_with(s)) {
            continue;
        }
        let rel = file.strip_prefix(root).unwrap_or(file).to_path_buf();
        out.extend(found.hits.into_iter().map(|h| Violation {
            krate: pkg.name.clone(),
            offense: Offense::Source {
                file: rel.clone(),
                line: h.line,
                pattern: h.pattern.to_owned(),
                why: h.why.to_owned(),
                text: h.text,
            },
            rule: rule.text.to_owned(),
        }));
    }
    Ok(())
}

/// Directory holding the child modules of the module defined in `file`.
fn module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new("."));
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("lib" | "main" | "mod") | None => parent.to_path_buf(),
        Some(stem) => parent.join(stem),
    }
}

/// Every `.rs` file under `dir`, recursively (missing directory: none).
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), CheckError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(CheckError::Read {
                path: dir.to_owned(),
                source,
            });
        }
    };
    for entry in entries {
        let path = entry
            .map_err(|source| CheckError::Read {
                path: dir.to_owned(),
                source,
            })?
            .path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
