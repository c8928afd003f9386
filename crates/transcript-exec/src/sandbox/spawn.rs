//! Starting a process inside its Landlock domain: on a short-lived thread that restricts
//! itself and then spawns (the child inherits the thread's domain across `fork` and `exec`),
//! so the runner's own threads are never restricted and no `pre_exec` hook is needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};

use super::net::{NetBounds, NetSession};
use super::{Confinement, Grant, Rights};

/// The newest Landlock ABI the crate knows: every right of it is requested, and the crate
/// keeps those the running kernel has (best effort).
const ABI_WANTED: ABI = ABI::V10;

/// Set (to anything) in the runner's environment, makes [`probe`] answer as on a kernel
/// without Landlock: how the refusal is tested on a kernel that has it. It can only make
/// runs refuse to start, never run unconfined.
pub const PRETEND_NO_LANDLOCK_ENV: &str = "TRANSCRIPT_SANDBOX_PRETEND_NO_LANDLOCK";

/// The private temporary directory of one confined process (mode `0o700`, a random name
/// under the runner's temporary directory); removed when dropped.
/// With a network-bounded process, it also holds the [`NetSession`] serving its namespace.
#[derive(Debug)]
pub struct PrivateTmp {
    // Declared first: the session ends before the directory holding its socket goes.
    net: Option<NetSession>,
    dir: tempfile::TempDir,
}

impl PrivateTmp {
    fn create() -> std::io::Result<Self> {
        tempfile::Builder::new()
            .prefix("transcript-step-")
            .tempdir()
            .map(|dir| Self { net: None, dir })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The network session of a bounded process.
    pub fn net(&self) -> Option<&NetSession> {
        self.net.as_ref()
    }
}

/// Whether this kernel confines processes with Landlock (asked once per runner, by
/// restricting a throwaway thread); the error names the kernel and the opt-out.
///
/// # Errors
/// The kernel has no Landlock, or it is not enabled.
pub fn probe() -> Result<(), String> {
    static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
    if std::env::var_os(PRETEND_NO_LANDLOCK_ENV).is_some() {
        return Err(no_landlock());
    }
    PROBED
        .get_or_init(|| {
            let enforced = std::thread::spawn(|| {
                Ruleset::default()
                    .handle_access(AccessFs::Execute)
                    .and_then(|r| r.create())
                    .and_then(|r| r.restrict_self())
                    .map(|s| s.ruleset != RulesetStatus::NotEnforced)
                    .unwrap_or(false)
            })
            .join()
            .unwrap_or(false);
            if enforced { Ok(()) } else { Err(no_landlock()) }
        })
        .clone()
}

fn no_landlock() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| r.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "this kernel (Linux {release}) does not confine processes with Landlock (Linux 5.13 or \
         later, built with CONFIG_SECURITY_LANDLOCK and `landlock` in its `lsm=` list): a run \
         is never started unconfined silently; `--sandbox off` (or `sandbox: off` on a step) \
         runs it without confinement"
    )
}

/// Spawns `cmd` confined by `confinement`, in a fresh private temporary directory (`TMPDIR`,
/// `TMP` and `TEMP` point at it), and returns the child and that directory (keep it until
/// the process and what it left have ended).
///
/// # Errors
/// The program cannot start (as unconfined), a rule cannot be made, or the kernel did not
/// enforce the restriction (then nothing was started).
pub fn spawn(
    cmd: &mut tokio::process::Command,
    confinement: &Confinement,
) -> std::io::Result<(tokio::process::Child, PrivateTmp)> {
    let (child, tmp) = spawn_bounded(cmd, Some(confinement), None)?;
    tmp.map(|tmp| (child, tmp))
        .ok_or_else(|| std::io::Error::other("confinement: no private directory"))
}

/// A program started through the helper (`HELPER __netns|__guard PROGRAM …`) is looked up
/// first, as `exec` would (a path as it is, from the command's directory; a bare name on the
/// command's `PATH`), so a missing one fails the spawn (`NotFound`) as it does without the
/// helper, instead of a helper that starts and exits.
fn helped_program_exists(cmd: &std::process::Command) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut args = cmd.get_args();
    let helped = args
        .next()
        .is_some_and(|a| a == super::net::GUARD_ARG || a == super::net::HELPER_ARG);
    let Some(program) = args.next().filter(|_| helped) else {
        return Ok(());
    };
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let path = std::path::Path::new(program);
    let found = if program.as_encoded_bytes().contains(&b'/') {
        match cmd.get_current_dir() {
            Some(dir) if path.is_relative() => runnable(&dir.join(path)),
            _ => runnable(path),
        }
    } else {
        let from_cmd = cmd
            .get_envs()
            .find(|(k, _)| *k == "PATH")
            .and_then(|(_, v)| v.map(std::ffi::OsStr::to_os_string));
        let search = from_cmd
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        std::env::split_paths(&search).any(|dir| runnable(&dir.join(path)))
    };
    if found {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: No such file or directory", program.to_string_lossy()),
        ))
    }
}

/// Spawns `cmd` confined by `confinement` when given, and in a network namespace bounded by
/// `net` when given (`cmd` must then come from [`super::net::command`] with the same bounds:
/// its program is the helper). Returns the child and, when either applies, its private
/// directory (which holds the network session too: keep it until the process and what it
/// left have ended).
///
/// # Errors
/// The program cannot start, a rule cannot be made, the kernel did not enforce the
/// restriction, or the network namespace could not be made (then nothing runs).
pub fn spawn_bounded(
    cmd: &mut tokio::process::Command,
    confinement: Option<&Confinement>,
    net: Option<&NetBounds>,
) -> std::io::Result<(tokio::process::Child, Option<PrivateTmp>)> {
    helped_program_exists(cmd.as_std())?;
    if confinement.is_none() && net.is_none() {
        return cmd.spawn().map(|child| (child, None));
    }
    let mut tmp = PrivateTmp::create()?;
    if let Some(c) = confinement {
        private_env(cmd, c, tmp.path());
    }
    let prepared = match net {
        Some(n) => Some(super::net::prepare(
            cmd,
            n,
            tmp.path(),
            confinement.is_some(),
        )?),
        None => None,
    };
    let grants = confinement.map(|c| grants_for(cmd, c, net, tmp.path()));
    let handle = tokio::runtime::Handle::try_current().ok();
    let mut child = std::thread::scope(|s| {
        s.spawn(|| {
            // The child's reaper registers with the runtime that awaits it.
            let _entered = handle.as_ref().map(|h| h.enter());
            if let Some(grants) = &grants {
                super::caps::drop_capabilities();
                restrict(grants)?;
                // A bounded process's helper installs the filter itself, once it no longer
                // needs its Unix socket.
                if net.is_none() {
                    super::seccomp::install()?;
                }
            }
            cmd.spawn().map_err(|e| match net {
                Some(n) if e.kind() == std::io::ErrorKind::NotFound && !n.helper().is_file() => {
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "the network namespace helper {} was not found: install this \
                             crate's `transcript-netns` binary, name it in {} or with \
                             `SandboxPolicy::with_helper`; `network: all` runs the step on \
                             the host's network instead",
                            n.helper().display(),
                            super::net::HELPER_ENV
                        ),
                    )
                }
                _ => e,
            })
        })
        .join()
        .unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the confined spawn's thread panicked",
            ))
        })
    })?;
    if let (Some(prepared), Some(n)) = (prepared, net) {
        let pid = child.id().unwrap_or(0);
        match super::net::complete(prepared, pid, n) {
            Ok(session) => tmp.net = Some(session),
            Err(e) => {
                let _ = child.start_kill();
                return Err(e);
            }
        }
    }
    Ok((child, Some(tmp)))
}

/// The private directory as `TMPDIR`, `TMP`, `TEMP` (and `HOME`, see
/// [`Confinement::private_home`]).
fn private_env(cmd: &mut tokio::process::Command, confinement: &Confinement, tmp: &Path) {
    for var in ["TMPDIR", "TMP", "TEMP"] {
        cmd.env(var, tmp);
    }
    if confinement.private_home() && !cmd.as_std().get_envs().any(|(k, _)| k == "HOME") {
        cmd.env("HOME", tmp);
    }
}

/// The rules of `cmd`'s process: for its program (the one after the helper's arguments when
/// `net` bounds it, and the helper itself readable).
fn grants_for(
    cmd: &tokio::process::Command,
    confinement: &Confinement,
    net: Option<&NetBounds>,
    tmp: &Path,
) -> Vec<Grant> {
    let std_cmd = cmd.as_std();
    let path_env = std_cmd
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .map(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
        .unwrap_or_else(|| std::env::var("PATH").ok());
    let cwd = std_cmd
        .get_current_dir()
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    // A helper (the namespace's, or the guard of #59) runs the program named after its
    // first argument, and must itself be readable.
    let helper = match net {
        Some(n) => Some(n.helper().to_path_buf()),
        None => super::net::guard_of(std_cmd),
    };
    let program_arg = match helper {
        Some(_) => std_cmd.get_args().nth(1).unwrap_or_default(),
        None => std_cmd.get_program(),
    };
    let program = super::program::find_program(Path::new(program_arg), &cwd, path_env.as_deref());
    // The directories granted are those of the runner's own `PATH`: a `PATH` the command
    // sets (an agent's tool call may choose it) never widens what is granted.
    let runner_path = std::env::var("PATH").ok();
    let with_helper;
    let confinement = match &helper {
        Some(h) => {
            with_helper = confinement.clone().read_named(h);
            &with_helper
        }
        None => confinement,
    };
    confinement.grants(
        program
            .as_ref()
            .map(|(found, real)| (found.as_path(), real.as_path())),
        runner_path.as_deref(),
        tmp,
    )
}

/// [`spawn`] when `confinement` is given, else a plain spawn (no private directory).
///
/// # Errors
/// As [`spawn`], or the plain spawn's.
pub fn spawn_maybe(
    cmd: &mut tokio::process::Command,
    confinement: Option<&Confinement>,
) -> std::io::Result<(tokio::process::Child, Option<PrivateTmp>)> {
    spawn_bounded(cmd, confinement, None)
}

/// The Landlock rights of `rights` on a path of that kind.
fn access(rights: Rights, is_dir: bool) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(ABI_WANTED);
    let wanted = match rights {
        Rights::Read => AccessFs::from_read(ABI_WANTED) | AccessFs::ResolveUnix,
        // Never a device node made in a tree the step writes.
        Rights::ReadWrite => all & !(AccessFs::MakeChar | AccessFs::MakeBlock),
        Rights::List => AccessFs::ReadDir.into(),
        Rights::Device => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
    };
    if is_dir {
        wanted
    } else {
        wanted & AccessFs::from_file(ABI_WANTED)
    }
}

/// Restricts the calling thread (and what it starts from now on) to `grants`.
fn restrict(grants: &[Grant]) -> std::io::Result<()> {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        std::io::Error::other(format!("confinement: {what}: {e}"))
    };
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .and_then(|r| r.scope(Scope::from_all(ABI_WANTED)))
        .and_then(|r| r.create())
        .map_err(|e| failed("ruleset", &e))?;
    for grant in grants {
        // A path that vanished since the rules were made is simply not granted.
        let Ok(fd) = PathFd::new(&grant.path) else {
            continue;
        };
        let is_dir = std::fs::metadata(&grant.path).is_ok_and(|m| m.is_dir());
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access(grant.rights, is_dir)))
            .map_err(|e| failed(&grant.path.display().to_string(), &e))?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(|e| failed("restrict", &e))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(std::io::Error::other(no_landlock()));
    }
    Ok(())
}
