//! The helper: a small single-threaded program (`transcript __netns PROGRAM ARGS…`, or the
//! `transcript-netns` binary of this crate) that puts itself in a new user and network
//! namespace, brings its loopback up, opens the listening sockets the runner serves, hands
//! them over, and then starts the step's program as its child and guards it
//! ([`super::guard`]: it relays how the program ended, and kills what is left of it when the
//! runner dies).
//!
//! Why a program of its own: a user namespace can only be made by a single-threaded
//! process, and the runner has many threads. The helper runs nothing but this before its
//! `exec`, with the capabilities, Landlock domain and `no_new_privs` its spawning thread gave
//! it; in its new user namespace it drops every capability again before the program runs.

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::OwnedFd;

use super::control::{self, SPEC_ENV, Spec};

/// The first argument that makes the `transcript` binary act as the helper.
pub const HELPER_ARG: &str = "__netns";

/// The exit status of a helper that could not set the namespace up (the runner reports the
/// reason it was sent).
const SETUP_FAILED: i32 = 125;

/// Runs the helper with `args` (the program and its arguments, after [`HELPER_ARG`]);
/// returns the status to exit with: the program's, or the setup's failure (the reason printed
/// on stderr).
pub fn helper_main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let mut args = args.into_iter();
    let Some(program) = args.next() else {
        eprintln!("transcript {HELPER_ARG}: no program");
        return SETUP_FAILED;
    };
    let spec = match std::env::var(SPEC_ENV)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str::<Spec>(&s).map_err(|e| e.to_string()))
    {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("transcript {HELPER_ARG}: {SPEC_ENV}: {e}");
            return SETUP_FAILED;
        }
    };
    let ctl = match control::connect(&spec.control) {
        Ok(ctl) => ctl,
        Err(e) => {
            eprintln!("transcript {HELPER_ARG}: control socket: {e}");
            return SETUP_FAILED;
        }
    };
    if let Err(e) = set_up(&ctl, &spec) {
        let _ = control::send(&ctl, format!("error: {e}").as_bytes(), &[]);
        eprintln!("transcript {HELPER_ARG}: {e}");
        return SETUP_FAILED;
    }
    drop(ctl);
    // The helper stays the program's guardian (#59: see [`super::guard`]).
    super::guard::supervise(&program, args, HELPER_ARG)
}

/// The namespaces, the loopback, the listening sockets handed over, the capabilities
/// dropped and the filter installed: everything before the program runs.
fn set_up(ctl: &OwnedFd, spec: &Spec) -> Result<(), String> {
    let kind = unshare()?;
    control::send(ctl, kind.as_bytes(), &[]).map_err(|e| format!("control: {e}"))?;
    if kind == "user" {
        let (answer, _) = control::recv(ctl).map_err(|e| format!("control: {e}"))?;
        if answer != b"mapped" {
            return Err(format!(
                "the runner did not map the user namespace: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
    }
    super::netlink::set_up(1).map_err(|e| format!("loopback up: {e}"))?;
    let (addrs, fds) = listeners(spec)?;
    let names = serde_json::to_vec(&addrs).map_err(|e| e.to_string())?;
    control::send(ctl, &names, &fds).map_err(|e| format!("control: {e}"))?;
    crate::sandbox::caps::drop_capabilities();
    if spec.seccomp {
        crate::sandbox::seccomp::install().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A new user and network namespace (`"user"`), or, where user namespaces are refused and
/// the helper runs as root, a network namespace only (`"net"`).
fn unshare() -> Result<&'static str, String> {
    use rustix::thread::UnshareFlags;
    // `unshare` is deprecated in rustix only for `CLONE_FILES` (a thread could then see a
    // descriptor table other threads do not share); neither flag here touches descriptors,
    // and the helper has one thread.
    #[allow(deprecated)]
    let both = rustix::thread::unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNET);
    match both {
        Ok(()) => Ok("user"),
        Err(user_err) => {
            #[allow(deprecated)]
            let net = rustix::thread::unshare(UnshareFlags::NEWNET);
            net.map(|()| "net").map_err(|_| {
                format!(
                    "cannot make a network namespace: user namespaces are refused \
                     ({user_err}) and the runner is not root (kernel.unprivileged_userns_clone, \
                     user.max_user_namespaces or an AppArmor rule may forbid them)"
                )
            })
        }
    }
}

/// The proxy's listening socket, then one per forwarded loopback address (an IPv6 one is
/// skipped where the namespace has no IPv6).
fn listeners(spec: &Spec) -> Result<(Vec<SocketAddr>, Vec<OwnedFd>), String> {
    let mut addrs = Vec::new();
    let mut fds = Vec::new();
    let proxy = SocketAddr::new(IpAddr::from(super::LOOPBACK_V4), spec.proxy_port);
    let l = TcpListener::bind(proxy).map_err(|e| format!("proxy listener {proxy}: {e}"))?;
    addrs.push(proxy);
    fds.push(OwnedFd::from(l));
    for &(ip, port) in &spec.forward {
        let addr = SocketAddr::new(ip, port);
        match TcpListener::bind(addr) {
            Ok(l) => {
                addrs.push(addr);
                fds.push(OwnedFd::from(l));
            }
            Err(_) if ip.is_ipv6() => {}
            Err(e) => return Err(format!("listener {addr}: {e}")),
        }
    }
    Ok((addrs, fds))
}
