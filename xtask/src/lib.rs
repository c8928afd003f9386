//! Developer tooling for the transcript workspace, run as `cargo xtask <command>`.
//!
//! The `cargo xtask` alias (`.cargo/config.toml`) runs this crate's binary; the logic lives in
//! this library so that integration tests can drive it on synthetic workspaces.
//!
//! | command | module | what it does |
//! |---|---|---|
//! | `arch-check` | [`arch`] | layering rules from `cargo metadata` plus a purity scan of pure crates |
//! | `schema [--check]` | [`schema`] | writes / checks `schema/exchange-event.schema.json` |
//! | `bench [-p PKG] [-- ARGS]` | [`tasks`] | every bench target, release profile; then `bench-cli` (without `-p`) |
//! | `bench-cli [--rounds N]` | [`bench_cli`] | release `transcript` import + receipts vs ccusage 17 on a ~100 MB session store |
//! | `stress [--trials N]` | [`tasks`] | the infra kill test with N trials (default 100), release |
//! | `fuzz <TARGET>\|--all --seconds N` | [`tasks`] | cargo-fuzz targets in `fuzz/` |
//! | `coverage` | [`tasks`] | per-crate line coverage of library crates (cargo-llvm-cov, else tarpaulin) |
//! | `e2e-phoenix` | [`phoenix`] | the demo exported to a real Arize Phoenix on 127.0.0.1 (outside CI) |
//!
//! Repository hygiene checks (every module opens with `//!`, README and CI agree on the test
//! command, ARCHITECTURE.md names every crate) are ordinary `#[test]`s in `tests/tidy.rs`, so
//! `cargo test --workspace` enforces them.
#![forbid(unsafe_code)]

pub mod arch;
pub mod bench_cli;
pub mod circles;
pub mod coverage;
pub mod fnsize;
pub mod metadata;
pub mod phoenix;
pub mod scan;
pub mod schema;
pub mod syntax;
pub mod tasks;

use std::path::{Path, PathBuf};

/// The root of the workspace this xtask was built from.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}
