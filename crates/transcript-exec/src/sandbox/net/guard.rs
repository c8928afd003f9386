//! The guard ([`guard_main`], #59 item 9): every process of a run dies with its runner, however the runner
//! dies (`SIGKILL` included), because no process of a step is ever left without a living
//! guardian that watches the runner.
//!
//! The helper ([`super::helper_main`], `transcript __netns …`, or `transcript __guard …` for a
//! process on the host's network or started without confinement) no longer becomes the
//! step's program: it starts the program as its child and stays, single-threaded, as that
//! child's parent and as a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every orphan of
//! the step (a `sleep 60 &` whose shell exited, a double fork, a `setsid` daemon) is
//! re-parented to it, not to the runner or init. It watches two pidfds: its child's and the
//! runner's (its parent, named by [`RUNNER_PID_ENV`] so a runner already gone is told from
//! one alive). When the child exits, it exits the same way (its code, or the same signal):
//! what the child left is re-parented to the runner, which ends it as before
//! ([`crate::reaper`]). When the runner exits first, it kills every descendant it has
//! ([`crate::reaper::end_all_descendants`]: round after round, each orphan being its own
//! child by then) and exits.
//!
//! Why not `PR_SET_PDEATHSIG` on the program: the signal fires when the parent *thread*
//! exits, and a runner's spawning threads are short-lived (a confined spawn's thread, tokio's
//! blocking pool); and it covers the direct child only. Why not a PID namespace: its init
//! ignores every signal it has no handler for, so a step's shell would no longer end on the
//! `SIGTERM` of a cancellation, and it needs a user namespace a `network: all` step does not
//! have.
//!
//! `SIGTERM` stays blocked in the guard: a cancellation's `SIGTERM` to the step's process
//! group reaches the program, and the guard lives on to relay how it ended. A spawned child
//! inherits the blocked mask, so the program starts through `HELPER __exec PROGRAM …`
//! ([`exec_main`]), which unblocks it and `exec`s the program (same process id).

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;

use rustix::event::{PollFd, PollFlags, poll};
use rustix::process::{Pid, PidfdFlags, getppid, pidfd_open};

/// The first argument that makes the `transcript` binary (or `transcript-netns`) the guard of
/// a process that needs no namespace.
pub const GUARD_ARG: &str = "__guard";

/// The first argument of the guard's own short step between it and the program: unblock
/// `SIGTERM`, then `exec` the program ([`exec_main`]).
pub const EXEC_ARG: &str = "__exec";

/// The runner's process id, set by the runner in its helper's environment (removed before
/// the program starts).
pub const RUNNER_PID_ENV: &str = "TRANSCRIPT_RUNNER_PID";

/// The exit status of a guard whose runner was gone (SIGKILL's 128+9).
const RUNNER_GONE: i32 = 137;

/// A pidfd on the runner, when this process's parent is still the runner named by
/// [`RUNNER_PID_ENV`]. `Err(())`: the runner is gone already. `Ok(None)`: no runner named
/// (started by hand): nothing to watch.
fn watch_runner() -> Result<Option<OwnedFd>, ()> {
    let Some(pid) = std::env::var(RUNNER_PID_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
        .and_then(Pid::from_raw)
    else {
        return Ok(None);
    };
    // Opened first, then checked: while our parent is that pid, the pidfd is the runner's.
    let fd = pidfd_open(pid, PidfdFlags::empty()).map_err(|_| ())?;
    if getppid() != Some(pid) {
        return Err(());
    }
    Ok(Some(fd))
}

/// Runs `program` with `args` as the guarded child (see the module docs) and returns the
/// status to exit with (after a signal death, only when re-raising it did not end us).
pub fn supervise(program: &OsStr, args: impl IntoIterator<Item = OsString>, tag: &str) -> i32 {
    let runner = match watch_runner() {
        Ok(r) => r,
        Err(()) => return RUNNER_GONE,
    };
    let _ = crate::reaper::become_subreaper();
    let term = term_set();
    let _ = term.thread_block();
    // The program starts through `HELPER __exec`, which unblocks SIGTERM before it becomes
    // the program: a spawned child inherits the blocked mask.
    let Ok(me) = std::env::current_exe() else {
        eprintln!("transcript {tag}: cannot find its own program");
        return 126;
    };
    let spawned = std::process::Command::new(me)
        .arg(EXEC_ARG)
        .arg(program)
        .args(args)
        .env_remove(super::SPEC_ENV)
        .env_remove(RUNNER_PID_ENV)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(err) => {
            eprintln!(
                "transcript {tag}: cannot run {}: {err}",
                program.to_string_lossy()
            );
            return if err.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };
    let child_fd = i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
    if wait_for(child_fd.as_ref(), runner.as_ref()) == Ended::Runner {
        crate::reaper::end_all_descendants();
        return RUNNER_GONE;
    }
    match child.wait() {
        Ok(status) => relay(status, &term),
        Err(_) => RUNNER_GONE,
    }
}

/// The set holding `SIGTERM`.
fn term_set() -> nix::sys::signal::SigSet {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGTERM);
    set
}

/// Which of the two ended first.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Child,
    Runner,
}

/// Waits until the child's or the runner's pidfd is readable (each has exited). Without a
/// child pidfd (the kernel refused one), the child is waited for by `wait` alone.
fn wait_for(child: Option<&OwnedFd>, runner: Option<&OwnedFd>) -> Ended {
    let (Some(child), Some(runner)) = (child, runner) else {
        return Ended::Child;
    };
    loop {
        let mut fds = [
            PollFd::new(child, PollFlags::IN),
            PollFd::new(runner, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) => {
                if !fds[0].revents().is_empty() {
                    return Ended::Child;
                }
                if !fds[1].revents().is_empty() {
                    return Ended::Runner;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            // Nothing left to watch with: the child is waited for.
            Err(_) => return Ended::Child,
        }
    }
}

/// Ends this process the way the child ended: its exit code, or its signal re-raised (with
/// `SIGTERM` unblocked first); `128+N` when the signal did not end us.
fn relay(status: std::process::ExitStatus, term: &nix::sys::signal::SigSet) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return code;
    }
    let number = status.signal().unwrap_or(9);
    let _ = term.thread_unblock();
    if let Ok(sig) = nix::sys::signal::Signal::try_from(number) {
        let _ = nix::sys::signal::raise(sig);
    }
    128 + number
}

/// `transcript __guard PROGRAM ARGS…`: the guard of a process that needs no namespace.
pub fn guard_main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let mut args = args.into_iter();
    let Some(program) = args.next() else {
        eprintln!("transcript {GUARD_ARG}: no program");
        return 125;
    };
    supervise(&program, args, GUARD_ARG)
}

/// `HELPER __exec PROGRAM ARGS…`: unblocks `SIGTERM` (blocked by the guard that started it)
/// and becomes the program; returns only when that failed (the status to exit with).
pub fn exec_main(args: impl IntoIterator<Item = OsString>) -> i32 {
    use std::os::unix::process::CommandExt;
    let mut args = args.into_iter();
    let Some(program) = args.next() else {
        eprintln!("transcript {EXEC_ARG}: no program");
        return 125;
    };
    let _ = term_set().thread_unblock();
    let err = std::process::Command::new(&program).args(args).exec();
    eprintln!(
        "transcript: cannot run {}: {err}",
        program.to_string_lossy()
    );
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}
