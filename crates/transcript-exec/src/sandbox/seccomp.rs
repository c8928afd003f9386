//! The seccomp filter every confined process starts with, beside its Landlock domain (#56):
//! what Landlock cannot bound on every kernel.
//!
//! * **No new Unix-domain socket** (`socket(AF_UNIX, …)` fails with `EACCES`): a pathname
//!   socket is reached by `connect`, which Landlock bounds only from ABI 9 (Linux 7.1); before
//!   that, a step could talk to any daemon listening on one (`docker.sock`, an ssh or gpg
//!   agent, systemd) whatever its file rights. `socketpair` (a private pair, reaching nobody)
//!   still works, and abstract sockets are bounded by Landlock's scope where the kernel has it.
//! * **No `TIOCSTI`** (`ioctl` typing into a terminal): a terminal inherited by a process (not
//!   opened by it, so unseen by Landlock) cannot be used to run a command in the user's shell.
//!
//! The filter is installed on the spawning thread after its Landlock restriction (which sets
//! `no_new_privs`), so the process and everything it starts inherit it. On an architecture
//! the compiler does not know, no filter is installed (the spawn says nothing: Landlock's
//! bounds still hold).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// `AF_UNIX`.
const AF_UNIX: u64 = 1;
/// `TIOCSTI`.
const TIOCSTI: u64 = 0x5412;

/// The filter for this architecture; `None` where seccompiler has no target for it.
fn program() -> Option<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).ok()?;
    let rule = |arg: u8, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .ok()
    };
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        (libc::SYS_socket, rule(0, AF_UNIX)?),
        (libc::SYS_ioctl, rule(1, TIOCSTI)?),
    ]
    .into_iter()
    .map(|(nr, r)| (nr, vec![r]))
    .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .ok()?;
    filter.try_into().ok()
}

/// Installs the filter on the calling thread (after `no_new_privs`).
///
/// # Errors
/// The kernel refused the filter.
pub(crate) fn install() -> std::io::Result<()> {
    let Some(program) = program() else {
        return Ok(());
    };
    seccompiler::apply_filter(&program)
        .map_err(|e| std::io::Error::other(format!("confinement: seccomp: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_filter_compiles_on_this_architecture() {
        assert!(super::program().is_some());
    }
}
