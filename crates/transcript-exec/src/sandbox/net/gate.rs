//! The runner's half of starting a bounded process: before the spawn, the control socket and
//! the helper's [`Spec`] and proxy variables in the command's environment ([`prepare`]);
//! after it, the exchange with the helper and the session serving what it handed over
//! ([`complete`]).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};

use super::control::{self, SPEC_ENV, Spec};
use super::{LOOPBACK_V4, NetBounds, NetSession};

/// How long the helper may take to set its namespace up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(20);

/// The first port tried for the proxy inside the namespace (the usual proxy port).
const PROXY_PORT: u16 = 3128;

/// The variables that point a program at the proxy (upper and lower case: programs differ).
pub const PROXY_ENV: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// What [`prepare`] set up for [`complete`].
#[derive(Debug)]
pub(crate) struct Prepared {
    listener: OwnedFd,
    path: PathBuf,
}

/// Binds the control socket in `dir` and sets the command's environment: the helper's spec
/// and the proxy variables (`NO_PROXY` emptied, so that every request goes through the proxy
/// and a refused one is recorded).
pub(crate) fn prepare(
    cmd: &mut tokio::process::Command,
    bounds: &NetBounds,
    dir: &Path,
    seccomp: bool,
) -> std::io::Result<Prepared> {
    let path = dir.join(".transcript-netns");
    let listener = control::listen(&path)?;
    let forward = forwarded(bounds);
    let taken: BTreeSet<u16> = forward.iter().map(|(_, p)| *p).collect();
    let proxy_port = (PROXY_PORT..=u16::MAX)
        .find(|p| !taken.contains(p))
        .unwrap_or(1);
    let spec = Spec {
        control: path.clone(),
        proxy_port,
        forward,
        seccomp,
    };
    let json = serde_json::to_string(&spec).map_err(std::io::Error::other)?;
    cmd.env(SPEC_ENV, json);
    let url = format!("http://{LOOPBACK_V4}:{proxy_port}");
    for var in PROXY_ENV {
        cmd.env(var, &url);
    }
    cmd.env("NO_PROXY", "").env("no_proxy", "");
    // Node.js 24 and later honour the variables in `fetch` only when asked.
    cmd.env("NODE_USE_ENV_PROXY", "1");
    Ok(Prepared { listener, path })
}

/// The loopback addresses listened on inside the namespace: each declared loopback
/// destination at its own address (`localhost` at `127.0.0.1` and `::1`).
fn forwarded(bounds: &NetBounds) -> Vec<(IpAddr, u16)> {
    let mut out = Vec::new();
    for d in bounds.allowed().iter().filter(|d| d.is_loopback()) {
        let ips = match d.ip() {
            Some(ip) => vec![ip],
            None => vec![IpAddr::from(LOOPBACK_V4), IpAddr::from(Ipv6Addr::LOCALHOST)],
        };
        for ip in ips {
            if !out.contains(&(ip, d.port())) {
                out.push((ip, d.port()));
            }
        }
    }
    out
}

/// Talks the helper of process `pid` through its setup and serves what it handed over.
///
/// # Errors
/// The helper failed (its reason), exited, or took longer than [`SETUP_TIMEOUT`].
pub(crate) fn complete(
    prepared: Prepared,
    pid: u32,
    bounds: &NetBounds,
) -> std::io::Result<NetSession> {
    let failed = |what: String| std::io::Error::other(format!("network namespace: {what}"));
    let conn = accept(&prepared.listener, pid).map_err(|e| failed(e.to_string()))?;
    let _ = std::fs::remove_file(&prepared.path);
    rustix::net::sockopt::set_socket_timeout(
        &conn,
        rustix::net::sockopt::Timeout::Recv,
        Some(SETUP_TIMEOUT),
    )?;
    let peer = rustix::net::sockopt::socket_peercred(&conn)?;
    if u32::try_from(peer.pid.as_raw_nonzero().get()).ok() != Some(pid) {
        return Err(failed(
            "the control socket was reached by another process".into(),
        ));
    }
    let (kind, _) = control::recv(&conn)?;
    match kind.as_slice() {
        b"user" => {
            map_identity(pid).map_err(|e| failed(format!("identity maps: {e}")))?;
            control::send(&conn, b"mapped", &[])?;
        }
        b"net" => {}
        other => return Err(failed(reason(other))),
    }
    let (names, fds) = control::recv(&conn)?;
    let addrs: Vec<SocketAddr> =
        serde_json::from_slice(&names).map_err(|_| failed(reason(&names)))?;
    if addrs.len() != fds.len() || addrs.is_empty() {
        return Err(failed(
            "the helper handed over a wrong set of sockets".into(),
        ));
    }
    NetSession::serve(Arc::from(bounds.allowed()), bounds.log(), addrs, fds)
}

/// What the helper said when it failed.
fn reason(message: &[u8]) -> String {
    let text = String::from_utf8_lossy(message);
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    if text.is_empty() {
        "the helper exited before its namespace was ready".into()
    } else {
        text.to_owned()
    }
}

/// Waits for the helper's connection, or its exit, or the timeout.
fn accept(listener: &OwnedFd, pid: u32) -> std::io::Result<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0))
        .ok_or_else(|| std::io::Error::other("no process id"))?;
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
    let timeout = Timespec {
        tv_sec: i64::try_from(SETUP_TIMEOUT.as_secs()).unwrap_or(20),
        tv_nsec: 0,
    };
    loop {
        let mut fds = [
            PollFd::new(listener, PollFlags::IN),
            PollFd::new(&pidfd, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => return Err(std::io::Error::other("the helper took too long")),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if !fds[0].revents().is_empty() {
            return Ok(rustix::net::accept_with(
                listener,
                rustix::net::SocketFlags::CLOEXEC,
            )?);
        }
        if !fds[1].revents().is_empty() {
            return Err(std::io::Error::other(
                "the helper exited before its namespace was ready (its stderr says why)",
            ));
        }
    }
}

/// Maps the runner's own user and group to themselves in the helper's user namespace (the
/// only mapping an unprivileged process may write), after denying `setgroups` there.
fn map_identity(pid: u32) -> std::io::Result<()> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let proc = PathBuf::from(format!("/proc/{pid}"));
    std::fs::write(proc.join("setgroups"), "deny")?;
    std::fs::write(proc.join("uid_map"), format!("{uid} {uid} 1\n"))?;
    std::fs::write(proc.join("gid_map"), format!("{gid} {gid} 1\n"))?;
    Ok(())
}
