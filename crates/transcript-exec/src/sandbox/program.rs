//! The program a confined process runs and the tree it needs to read: found as `execvp`
//! finds it, then every symbolic link resolved (an npm `bin` link leads into its package).

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// The file `program` names when started in `cwd` with `PATH` `path_env` (a name without a
/// `/` is looked up on `PATH`, as `execvp` does), symbolic links resolved; `None` when no
/// executable file is found (the spawn then fails as it would unconfined).
pub fn resolve_program(program: &Path, cwd: &Path, path_env: Option<&str>) -> Option<PathBuf> {
    find_program(program, cwd, path_env).map(|(_, real)| real)
}

/// [`resolve_program`], with the path as found (before its links are resolved) first.
pub fn find_program(
    program: &Path,
    cwd: &Path,
    path_env: Option<&str>,
) -> Option<(PathBuf, PathBuf)> {
    let candidate = |p: PathBuf| -> Option<(PathBuf, PathBuf)> {
        let meta = std::fs::metadata(&p).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0)
            .then(|| std::fs::canonicalize(&p).ok().map(|real| (p, real)))
            .flatten()
    };
    if program.as_os_str().is_empty() {
        return None;
    }
    if program.components().count() > 1 || program.is_absolute() {
        let full = if program.is_absolute() {
            program.to_path_buf()
        } else {
            cwd.join(program)
        };
        return candidate(full);
    }
    std::env::split_paths(path_env.unwrap_or_default())
        .map(|dir| {
            if dir.is_relative() {
                cwd.join(dir)
            } else {
                dir
            }
        })
        .find_map(|dir| candidate(dir.join(program)))
}

/// The tree a resolved program reads: the outermost `node_modules` directory it lies in (a
/// CLI installed by npm and its dependencies), else its own directory.
pub(super) fn package_tree(program: &Path) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    for c in program.components() {
        prefix.push(c);
        if c == Component::Normal("node_modules".as_ref()) {
            return Some(prefix);
        }
    }
    program.parent().map(Path::to_path_buf)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_on_path_and_its_links_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let pkg = real.join("lib/node_modules/@scope/cli");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::create_dir_all(real.join("bin")).unwrap();
        let script = pkg.join("cli.js");
        std::fs::write(&script, "#!/usr/bin/env node\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&script, real.join("bin/cli")).unwrap();
        let path = format!("/nonexistent:{}", real.join("bin").display());
        let found = resolve_program(Path::new("cli"), &real, Some(&path)).unwrap();
        assert_eq!(found, script);
        assert_eq!(package_tree(&found).unwrap(), real.join("lib/node_modules"));
        assert_eq!(
            package_tree(Path::new("/usr/bin/git")).unwrap(),
            Path::new("/usr/bin")
        );
        assert!(resolve_program(Path::new("no-such-program"), &real, Some(&path)).is_none());
        assert_eq!(
            resolve_program(Path::new("bin/cli"), &real, None).unwrap(),
            script,
            "a relative path with a slash is taken from the working directory"
        );
    }
}
