//! The control channel between the runner and the helper that starts a process in its own
//! network namespace: a `SOCK_SEQPACKET` Unix socket in the process's private temporary
//! directory (message boundaries kept, so a message and the descriptors it carries arrive
//! together), and what the helper is told through its environment ([`Spec`]).
//!
//! The exchange, helper first:
//! 1. helper → runner: `user` (it made a user and a network namespace: the runner writes its
//!    identity maps) or `net` (a network namespace only, as root without user namespaces);
//! 2. runner → helper, after `user`: `mapped`;
//! 3. helper → runner: the JSON list of the addresses it listens on inside the namespace,
//!    carrying their listening sockets (`SCM_RIGHTS`), the proxy's first;
//! 4. at any step, helper → runner `error: …` instead, then the helper exits.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use serde::{Deserialize, Serialize};

/// The variable carrying the [`Spec`] (JSON) to the helper; removed before the program runs.
pub const SPEC_ENV: &str = "TRANSCRIPT_NETNS_SPEC";

/// The most listening sockets one process gets (the proxy and the declared loopback ports).
pub(crate) const MAX_LISTENERS: usize = 64;

/// What the helper sets up before it runs the program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Spec {
    /// The runner's control socket.
    pub control: PathBuf,
    /// The port of the proxy on `127.0.0.1` inside the namespace.
    pub proxy_port: u16,
    /// The loopback addresses (`ip`, `port`) to listen on inside the namespace, forwarded
    /// by the runner to the same address outside.
    pub forward: Vec<(std::net::IpAddr, u16)>,
    /// Install the confinement's seccomp filter before running the program (the runner's
    /// spawning thread leaves it to the helper, which needs a Unix socket first).
    pub seccomp: bool,
}

/// A `SOCK_SEQPACKET` Unix socket (close-on-exec).
pub(crate) fn seqpacket() -> std::io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// The runner's listening control socket at `path`.
pub(crate) fn listen(path: &Path) -> std::io::Result<OwnedFd> {
    let fd = seqpacket()?;
    rustix::net::bind(&fd, &SocketAddrUnix::new(path)?)?;
    rustix::net::listen(&fd, 1)?;
    Ok(fd)
}

/// The helper's end, connected to `path`.
pub(crate) fn connect(path: &Path) -> std::io::Result<OwnedFd> {
    let fd = seqpacket()?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(fd)
}

/// Sends `bytes` with `fds` attached.
pub(crate) fn send(sock: impl AsFd, bytes: &[u8], fds: &[OwnedFd]) -> std::io::Result<()> {
    let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_LISTENERS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !borrowed.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&borrowed)) {
        return Err(std::io::Error::other("control: too many descriptors"));
    }
    // A socket call with a timeout is never restarted after a signal (signal(7)): retried.
    loop {
        let iov = [IoSlice::new(bytes)];
        match rustix::net::sendmsg(&sock, &iov, &mut control, SendFlags::NOSIGNAL) {
            Err(rustix::io::Errno::INTR) => {}
            other => return other.map(|_| ()).map_err(Into::into),
        }
    }
}

/// Receives one message (at most 64 KiB) and the descriptors it carries; an empty message
/// means the other end closed.
pub(crate) fn recv(sock: impl AsFd) -> std::io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_LISTENERS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    // A socket call with a timeout is never restarted after a signal (signal(7)): retried.
    let got = loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        match rustix::net::recvmsg(&sock, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC) {
            Err(rustix::io::Errno::INTR) => {}
            other => break other?,
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    buf.truncate(got.bytes);
    Ok((buf, fds))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_message_and_its_sockets_arrive_together() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctl");
        let listener = listen(&path).unwrap();
        let client = connect(&path).unwrap();
        let server = rustix::net::accept(&listener).unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        send(&client, b"[\"x\"]", &[OwnedFd::from(tcp)]).unwrap();
        send(&client, b"second", &[]).unwrap();
        let (bytes, fds) = recv(&server).unwrap();
        assert_eq!(bytes, b"[\"x\"]");
        assert_eq!(fds.len(), 1);
        let back = std::net::TcpListener::from(fds.into_iter().next().unwrap());
        assert_eq!(back.local_addr().unwrap().port(), port);
        assert_eq!(recv(&server).unwrap().0, b"second", "boundaries are kept");
        drop(client);
        assert!(recv(&server).unwrap().0.is_empty(), "closed: empty");
    }
}
