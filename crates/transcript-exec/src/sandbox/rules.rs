//! Which paths a confined process gets, with which rights (the rules of the module docs), as
//! plain data: [`Grant`]s, turned into a Landlock ruleset by `spawn`.

use std::path::{Path, PathBuf};

use super::Confinement;

/// The system trees every confined process may read and execute (those that exist). Not
/// `/dev` (a terminal's keystrokes, `/dev/shm`) nor `/run` (sockets, mounted secrets): only
/// the devices below, and the directory `/etc/resolv.conf` leads into when it leads out of
/// `/etc` (systemd-resolved's stub).
pub const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys",
];

/// The device files every confined process may read and write (no `ioctl`: never a terminal,
/// whose `TIOCSTI` would type into the user's shell).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// What a rule allows beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rights {
    /// Read files, list directories, execute.
    Read,
    /// Everything Landlock knows (read, write, create, remove, rename, truncate, ioctl).
    ReadWrite,
    /// List the directory only (a directory on the way to a hidden path).
    List,
    /// Read and write a device file.
    Device,
}

/// One rule: `rights` on `path` and everything beneath it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The path (absolute).
    pub path: PathBuf,
    /// What is allowed.
    pub rights: Rights,
}

/// Whether `dir` is too wide to grant whole: `/`, the home directory, or an ancestor of it or
/// of a hidden path.
pub(crate) fn too_wide(dir: &Path, hidden: &[PathBuf]) -> bool {
    let home = std::env::var_os("HOME").map(|h| super::absolute(Path::new(&h)));
    dir == Path::new("/")
        || home.is_some_and(|h| h.starts_with(dir))
        || hidden.iter().any(|h| h.starts_with(dir))
}

/// Every rule of `c` for a process running `program` with `PATH` `path_env` and private
/// temporary directory `tmp`.
pub(super) fn grants(
    c: &Confinement,
    program: Option<(&Path, &Path)>,
    path_env: Option<&str>,
    tmp: &Path,
) -> Vec<Grant> {
    let mut out = Vec::new();
    let hidden = &c.hidden;
    for dir in SYSTEM_READ {
        tree(&mut out, Path::new(dir), Rights::Read, hidden);
    }
    for dev in DEVICES {
        if Path::new(dev).exists() {
            out.push(Grant {
                path: PathBuf::from(dev),
                rights: Rights::Device,
            });
        }
    }
    if let Ok(resolv) = std::fs::canonicalize("/etc/resolv.conf")
        && !resolv.starts_with("/etc")
        && let Some(dir) = resolv.parent()
        && !too_wide(dir, hidden)
    {
        tree(&mut out, dir, Rights::Read, hidden);
    }
    for dir in std::env::split_paths(path_env.unwrap_or_default()) {
        // A directory on `PATH` inside a tree the steps write (a venv in the workspace) is
        // that tree's already; a symbolic link there is data's, never followed into a grant.
        if dir.is_absolute() && !c.beneath_writable(&dir, tmp) {
            let mut dir = super::absolute(&dir);
            // A version manager's `shims` (pyenv, rbenv, asdf) run the versions installed
            // beside them: its whole tree.
            if dir.file_name().is_some_and(|n| n == "shims")
                && let Some(parent) = dir.parent()
            {
                dir = parent.to_path_buf();
            }
            if !too_wide(&dir, hidden) {
                tree(&mut out, &dir, Rights::Read, hidden);
            }
        }
    }
    // The program as found (before its links are resolved): inside a tree the steps write,
    // it is that tree's (a planted link never leads a grant out).
    if let Some((found, program)) = program
        && !c.beneath_writable(found, tmp)
    {
        let tree_root = super::program::package_tree(program);
        match tree_root {
            Some(root) if !too_wide(&root, hidden) => tree(&mut out, &root, Rights::Read, hidden),
            // Only the program file itself.
            _ => tree(&mut out, program, Rights::Read, hidden),
        }
    }
    for p in &c.read {
        if !c.beneath_writable(p, tmp) {
            tree(&mut out, &super::absolute(p), Rights::Read, hidden);
        }
    }
    tree(&mut out, &c.workspace, Rights::ReadWrite, hidden);
    tree(&mut out, tmp, Rights::ReadWrite, hidden);
    for (i, p) in c.write.iter().enumerate() {
        // Beneath the workspace or another declared tree it is covered already.
        let others = c.write.iter().enumerate().filter(|(j, _)| *j != i);
        let inside_other = others.into_iter().any(|(_, w)| p != w && p.starts_with(w));
        if !p.starts_with(&c.workspace) && !p.starts_with(tmp) && !inside_other {
            tree(&mut out, &super::absolute(p), Rights::ReadWrite, hidden);
        }
    }
    out
}

/// `rights` on `root` and beneath it, but for the hidden paths beneath it: then entry by
/// entry (see the module docs). A missing `root` gets nothing.
fn tree(out: &mut Vec<Grant>, root: &Path, rights: Rights, hidden: &[PathBuf]) {
    if hidden.iter().any(|h| root.starts_with(h)) {
        return;
    }
    let below: Vec<&PathBuf> = hidden.iter().filter(|h| h.starts_with(root)).collect();
    if below.is_empty() {
        if std::fs::symlink_metadata(root).is_ok() {
            out.push(Grant {
                path: root.to_path_buf(),
                rights,
            });
        }
        return;
    }
    // `root` is a directory on the way to a hidden path: listable only, its entries one by
    // one (never a symbolic link: its target is not ours to grant).
    out.push(Grant {
        path: root.to_path_buf(),
        rights: Rights::List,
    });
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_symlink() {
            tree(out, &entry.path(), rights, hidden);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_path_beneath_the_workspace_is_carved_out() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join("storage/transcripts")).unwrap();
        std::fs::create_dir_all(ws.join("storage/other")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("README"), "x").unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("link")).unwrap();
        let c = Confinement::new(&ws).hide(ws.join("storage/transcripts"));
        let tmp = tempfile::tempdir().unwrap();
        let grants = c.grants(None, None, tmp.path());
        let of = |p: &Path| grants.iter().find(|g| g.path == p).map(|g| g.rights);
        assert_eq!(of(&ws), Some(Rights::List));
        assert_eq!(of(&ws.join("storage")), Some(Rights::List));
        assert_eq!(of(&ws.join("storage/other")), Some(Rights::ReadWrite));
        assert_eq!(of(&ws.join("src")), Some(Rights::ReadWrite));
        assert_eq!(of(&ws.join("README")), Some(Rights::ReadWrite));
        assert_eq!(of(&ws.join("storage/transcripts")), None);
        assert_eq!(of(&ws.join("link")), None, "a symlink is never granted");
    }

    #[test]
    fn path_entries_that_would_open_the_home_are_not_granted() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let c = Confinement::new(ws.path());
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let path = format!("/:{home}:/usr/bin");
        let grants = c.grants(None, Some(&path), tmp.path());
        assert!(!grants.iter().any(|g| g.path == Path::new("/")));
        assert!(
            !grants
                .iter()
                .any(|g| g.path == super::super::absolute(Path::new(&home)))
        );
        assert!(grants.iter().any(|g| g.path == Path::new("/usr/bin")));
    }
}
