//! Shared harness: synthetic cargo workspaces in temp dirs.

#![allow(dead_code, clippy::unwrap_used)] // each test binary uses a subset

use std::path::Path;

/// A synthetic workspace in a temp dir: `crates/<name>` packages with path dependencies only,
/// so `cargo metadata --offline --no-deps` needs no registry.
pub struct Ws {
    dir: tempfile::TempDir,
    members: Vec<String>,
}

impl Ws {
    pub fn new() -> Self {
        Ws {
            dir: tempfile::tempdir().unwrap(),
            members: Vec::new(),
        }
    }

    /// Adds a package; `deps` are `(name, section)` with section `dependencies`,
    /// `dev-dependencies` or `build-dependencies`.
    pub fn krate(mut self, name: &str, deps: &[(&str, &str)], lib_rs: &str) -> Self {
        let dir = self.dir.path().join("crates").join(name);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        let mut manifest =
            format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n");
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            manifest.push_str(&format!("\n[{section}]\n"));
            for (dep, s) in deps.iter().filter(|(_, s)| *s == section) {
                let _ = s;
                manifest.push_str(&format!("{dep} = {{ path = \"../{dep}\" }}\n"));
            }
        }
        std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
        std::fs::write(dir.join("src/lib.rs"), lib_rs).unwrap();
        self.members.push(format!("\"crates/{name}\""));
        self
    }

    pub fn file(self, rel: &str, text: &str) -> Self {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    /// Appends `text` to an existing file (e.g. `[[bench]]` sections of a manifest).
    pub fn append(self, rel: &str, text: &str) -> Self {
        let path = self.dir.path().join(rel);
        let mut old = std::fs::read_to_string(&path).unwrap();
        old.push_str(text);
        std::fs::write(path, old).unwrap();
        self
    }

    pub fn root(&self) -> &Path {
        std::fs::write(
            self.dir.path().join("Cargo.toml"),
            format!(
                "[workspace]\nresolver = \"3\"\nmembers = [{}]\n",
                self.members.join(", ")
            ),
        )
        .unwrap();
        self.dir.path()
    }
}
