//! Workspace confinement of the file tools, done by the kernel (#28 item 2).
//!
//! Every path a file tool gets is resolved by `openat2(2)` relative to a
//! handle on the workspace root with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
//! | RESOLVE_NO_MAGICLINKS`: the kernel refuses, during the very lookup that
//! opens the file, any component that is a symlink (pointing in or out),
//! any `..` that would climb above the root and any absolute path. There is
//! no window between a check and the open for a concurrent swap of a file
//! and a symlink to exploit, which a resolve-then-open path check has.
//! (`openat2` is Linux 5.6+; rustix, already a dependency, makes the call
//! without `unsafe`. A kernel without it gets an error, never a fallback to
//! a path check.)
//!
//! What is opened must be a regular file (or a directory, for `list_dir`):
//! the entry is first opened `O_PATH` (which never blocks and has no side
//! effect, even on a FIFO or a device) and its type read from that handle;
//! a FIFO, socket or device is refused before it is opened for I/O. The
//! regular file is then opened for reading or writing `O_NONBLOCK` and
//! checked to be the same inode, still regular. A regular file with more
//! than one link is refused for reading and writing alike: a hard link
//! inside the workspace may name a file outside it. `read_file` reads at
//! most its cap (the stat size says how much was left).
//!
//! A workflow's typed `path` values (#56) are checked by the same lookup
//! ([`resolve_beneath`]): see [`crate::shape`].

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use crate::tool_error::ToolError;

/// How the kernel resolves every file tool path.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// `openat2` answers `EAGAIN` when a rename raced the lookup: retried this
/// many times before giving up.
const RACE_RETRIES: usize = 64;

fn io_err(op: &'static str, path: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::Io {
        op,
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// A missing entry, a symlink, a path climbing out and an absolute path all
/// get [`ToolError::PathEscapes`]: telling them apart would reveal what
/// exists outside the workspace.
fn lookup_err(op: &'static str, path: &str, e: Errno) -> ToolError {
    match e {
        Errno::NOENT | Errno::LOOP | Errno::XDEV | Errno::NOTDIR => {
            ToolError::PathEscapes(path.to_owned())
        }
        Errno::NOSYS => ToolError::Failed(format!(
            "{op} '{path}': this kernel has no openat2 (Linux 5.6+), which the file tools need to stay inside the workspace"
        )),
        other => io_err(op, path, std::io::Error::from(other)),
    }
}

fn root(workspace: &Path, op: &'static str, path: &str) -> Result<OwnedFd, ToolError> {
    rustix::fs::open(
        workspace,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err(op, path, format!("workspace: {}", std::io::Error::from(e))))
}

fn open_beneath_raw(
    root: &OwnedFd,
    rel: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(root, rel, flags | OFlags::CLOEXEC, mode, RESOLVE) {
            Err(Errno::AGAIN) if tries < RACE_RETRIES => tries += 1,
            other => return other,
        }
    }
}

fn open_beneath(
    root: &OwnedFd,
    rel: &str,
    flags: OFlags,
    mode: Mode,
    op: &'static str,
) -> Result<OwnedFd, ToolError> {
    open_beneath_raw(root, rel, flags, mode).map_err(|e| lookup_err(op, rel, e))
}

fn stat(fd: &OwnedFd, op: &'static str, path: &str) -> Result<Stat, ToolError> {
    rustix::fs::fstat(fd).map_err(|e| io_err(op, path, std::io::Error::from(e)))
}

fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "of an unknown type",
    }
}

/// Refuses anything but a regular file with one link.
fn check_regular(st: &Stat, path: &str) -> Result<(), ToolError> {
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::RegularFile {
        return Err(ToolError::NotRegular {
            path: path.to_owned(),
            kind: kind_name(kind),
        });
    }
    if st.st_nlink > 1 {
        // nlink_t is u64 on x86_64 but u32 on other targets.
        #[allow(clippy::useless_conversion)]
        let links = u64::from(st.st_nlink);
        return Err(ToolError::HardLinked {
            path: path.to_owned(),
            links,
        });
    }
    Ok(())
}

/// Opens `rel` (an existing regular file beneath the root) with `flags`:
/// `O_PATH` first to read its type without side effects, then for I/O,
/// checked to be the same inode.
fn open_regular(
    root: &OwnedFd,
    rel: &str,
    flags: OFlags,
    op: &'static str,
) -> Result<OwnedFd, ToolError> {
    let probe = open_beneath(root, rel, OFlags::PATH, Mode::empty(), op)?;
    let before = stat(&probe, op, rel)?;
    check_regular(&before, rel)?;
    let fd = open_beneath(
        root,
        rel,
        flags | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        op,
    )?;
    let after = stat(&fd, op, rel)?;
    check_regular(&after, rel)?;
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) {
        return Err(io_err(op, rel, "the file changed while it was opened"));
    }
    Ok(fd)
}

/// Why a typed `path` is not beneath the workspace ([`resolve_beneath`]). The messages never
/// say what lies outside the workspace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BeneathError {
    /// A component is a symlink (leading out or not), or the path climbs out.
    #[error("it goes through a symlink or out of the workspace")]
    Escapes,
    /// A component before the last is not a directory.
    #[error("a component before the last is not a directory")]
    NotADirectory,
    /// The kernel has no `openat2` (Linux 5.6+): never a fallback to a check by hand.
    #[error("this kernel has no openat2 (Linux 5.6+), which checks a path beneath the workspace")]
    NoOpenat2,
    /// The workspace or the lookup failed otherwise.
    #[error("{0}")]
    Io(String),
}

/// Resolves `rel` beneath `workspace` by the kernel (`openat2` with `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, opening `O_PATH`: no side effect on a FIFO
/// or a device): a symlink anywhere on the path, a `..` climbing out and an absolute path
/// are refused. A path that does not exist yet (a file to be written) is checked through
/// its longest existing parent, with the same flags; what does not exist holds no symlink.
pub fn resolve_beneath(workspace: &Path, rel: &str) -> Result<(), BeneathError> {
    let root = rustix::fs::open(
        workspace,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| BeneathError::Io(format!("workspace: {}", std::io::Error::from(e))))?;
    let mut prefix = rel;
    loop {
        match open_beneath_raw(&root, prefix, OFlags::PATH, Mode::empty()) {
            Ok(_) => return Ok(()),
            Err(Errno::NOENT) => match prefix.rsplit_once('/') {
                Some((parent, _)) => prefix = parent,
                // Not even the first component exists: its parent is the workspace.
                None => return Ok(()),
            },
            Err(Errno::LOOP | Errno::XDEV) => return Err(BeneathError::Escapes),
            Err(Errno::NOTDIR) => return Err(BeneathError::NotADirectory),
            Err(Errno::NOSYS) => return Err(BeneathError::NoOpenat2),
            Err(e) => return Err(BeneathError::Io(std::io::Error::from(e).to_string())),
        }
    }
}

/// What [`read_text`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadText {
    /// The text (a prefix when the file is larger than the cap).
    pub text: String,
    /// The file's size when it was opened.
    pub size: u64,
    /// Whether `text` is only a prefix.
    pub truncated: bool,
}

/// Reads at most `cap` bytes of the regular file `rel` beneath `workspace`
/// (invalid UTF-8 is an error; a character cut by the cap is dropped).
pub fn read_text(workspace: &Path, rel: &str, cap: usize) -> Result<ReadText, ToolError> {
    let root = root(workspace, "read", rel)?;
    let fd = open_regular(&root, rel, OFlags::RDONLY, "read")?;
    let size = stat(&fd, "read", rel)?.st_size.max(0) as u64;
    let mut file = std::fs::File::from(fd);
    let mut bytes = Vec::with_capacity(cap.min(size as usize).min(1 << 20));
    (&mut file)
        .take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err("read", rel, e))?;
    let truncated = bytes.len() > cap;
    bytes.truncate(cap);
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            // Only a character cut in half by the cap is forgiven.
            if truncated && e.utf8_error().error_len().is_none() {
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).map_err(|e| io_err("read", rel, e))?
            } else {
                return Err(io_err("read", rel, "stream did not contain valid UTF-8"));
            }
        }
    };
    Ok(ReadText {
        text,
        size,
        truncated,
    })
}

/// Writes `content` to `rel` beneath `workspace`, creating it (mode 0666
/// less the umask) or replacing the content of an existing regular file
/// with one link. The parent directory must exist.
pub fn write_text(workspace: &Path, rel: &str, content: &[u8]) -> Result<(), ToolError> {
    let Some(Component::Normal(_)) = Path::new(rel).components().next_back() else {
        return Err(ToolError::InvalidInput(format!(
            "'{rel}' does not name a file"
        )));
    };
    let root = root(workspace, "write", rel)?;
    let fd = open_for_write(&root, rel)?;
    rustix::fs::ftruncate(&fd, 0).map_err(|e| io_err("write", rel, std::io::Error::from(e)))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(content)
        .map_err(|e| io_err("write", rel, e))?;
    Ok(())
}

/// An existing regular file with one link, or a new file: created with
/// `O_EXCL`, so whatever appears at the path meanwhile (a symlink swapped
/// in) is never followed nor replaced; the lookup is then tried again.
fn open_for_write(root: &OwnedFd, rel: &str) -> Result<OwnedFd, ToolError> {
    for _ in 0..RACE_RETRIES {
        match open_beneath_raw(root, rel, OFlags::PATH, Mode::empty()) {
            Ok(_) => return open_regular(root, rel, OFlags::WRONLY, "write"),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(lookup_err("write", rel, e)),
        }
        match open_beneath_raw(
            root,
            rel,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => {
                check_regular(&stat(&fd, "write", rel)?, rel)?;
                return Ok(fd);
            }
            // Something appeared since the lookup: look again.
            Err(Errno::EXIST) => {}
            Err(e) => return Err(lookup_err("write", rel, e)),
        }
    }
    Err(ToolError::PathEscapes(rel.to_owned()))
}

/// The entries of the directory `rel` beneath `workspace`, sorted;
/// directories end with `/`.
pub fn list(workspace: &Path, rel: &str) -> Result<Vec<String>, ToolError> {
    let root = root(workspace, "list", rel)?;
    let fd = open_beneath(
        &root,
        rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
        Mode::empty(),
        "list",
    )?;
    let dir = rustix::fs::Dir::read_from(&fd)
        .map_err(|e| io_err("list", rel, std::io::Error::from(e)))?;
    let mut names = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|e| io_err("list", rel, std::io::Error::from(e)))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let mut kind = entry.file_type();
        if kind == FileType::Unknown {
            // A file system without d_type: ask the entry itself (never following it).
            kind = rustix::fs::statat(
                &fd,
                entry.file_name(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map(|st| FileType::from_raw_mode(st.st_mode))
            .unwrap_or(FileType::Unknown);
        }
        let mut name = name;
        if kind == FileType::Directory {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}
