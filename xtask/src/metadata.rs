//! Typed subset of `cargo metadata --format-version 1 --no-deps` output.
//!
//! Only what the guard and the task runners read: workspace packages, their declared
//! dependencies (with kind) and their targets. `--no-deps` plus `--offline` keeps the call
//! local: it never resolves the registry, so it works on synthetic test workspaces that only
//! have path dependencies, and on a machine without network.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

/// Why the workspace metadata could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// `cargo` could not be started at all.
    #[error("cannot run `{cargo} metadata` in {root}: {source}")]
    Spawn {
        /// The cargo executable that was tried.
        cargo: String,
        /// The workspace root it was run against.
        root: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `cargo metadata` ran and failed (bad manifest, missing member...).
    #[error("`cargo metadata` failed in {root}: {stderr}")]
    Failed {
        /// The workspace root it was run against.
        root: PathBuf,
        /// What cargo printed on stderr.
        stderr: String,
    },
    /// The output was not the JSON shape expected for format version 1.
    #[error("cannot parse `cargo metadata` output for {root}: {source}")]
    Parse {
        /// The workspace root it was run against.
        root: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
}

/// The workspace as `cargo metadata --no-deps` describes it.
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    /// Workspace member packages only (`--no-deps`).
    pub packages: Vec<Package>,
    /// Absolute path of the workspace root directory.
    pub workspace_root: PathBuf,
}

/// One workspace member.
#[derive(Debug, Clone, Deserialize)]
pub struct Package {
    /// Package name as written in its manifest (`transcript-domain`).
    pub name: String,
    /// Absolute path of its `Cargo.toml`.
    pub manifest_path: PathBuf,
    /// Declared dependencies of every kind.
    pub dependencies: Vec<Dependency>,
    /// Build targets (lib, bin, test, bench, example...).
    pub targets: Vec<Target>,
}

impl Package {
    /// Directory holding the package's `Cargo.toml`.
    pub fn dir(&self) -> &Path {
        self.manifest_path.parent().unwrap_or(Path::new("."))
    }
}

/// A declared dependency.
#[derive(Debug, Clone, Deserialize)]
pub struct Dependency {
    /// Package name of the dependency (not its rename).
    pub name: String,
    /// `None` for normal, `Some("dev")` or `Some("build")`.
    pub kind: Option<String>,
    /// Set for path dependencies.
    pub path: Option<PathBuf>,
}

impl Dependency {
    /// Human name of the dependency kind, as used in messages.
    pub fn kind_name(&self) -> &str {
        self.kind.as_deref().unwrap_or("normal")
    }

    /// Dev-dependencies are allowed to cross layers: tests compose adapters freely.
    pub fn is_dev(&self) -> bool {
        self.kind.as_deref() == Some("dev")
    }
}

/// A build target of a package.
#[derive(Debug, Clone, Deserialize)]
pub struct Target {
    /// Target name (`kill`, `writer`, `transcript`...).
    pub name: String,
    /// Target kinds (`lib`, `bin`, `test`, `bench`, `example`...).
    pub kind: Vec<String>,
    /// Absolute path of the target's root source file.
    pub src_path: PathBuf,
}

impl Target {
    /// Whether this target has the given kind.
    pub fn is(&self, kind: &str) -> bool {
        self.kind.iter().any(|k| k == kind)
    }
}

/// The cargo executable: `$CARGO` when run under cargo (so the same toolchain), else `cargo`.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs `cargo metadata --format-version 1 --no-deps --offline` on the workspace at `root`.
pub fn load(root: &Path) -> Result<Metadata, MetadataError> {
    let cargo = cargo();
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .output()
        .map_err(|source| MetadataError::Spawn {
            cargo: cargo.clone(),
            root: root.to_owned(),
            source,
        })?;
    if !out.status.success() {
        return Err(MetadataError::Failed {
            root: root.to_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|source| MetadataError::Parse {
        root: root.to_owned(),
        source,
    })
}
