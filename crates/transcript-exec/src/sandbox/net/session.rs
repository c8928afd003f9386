//! The runner's side of one bounded process's network: the listening sockets its helper
//! opened inside the namespace (the proxy's, and one per declared loopback port), served by
//! threads of the runner until the session is dropped, which closes every listener and
//! every connection still open.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use super::shared::Shared;
use super::{Destination, RefusedLog};

/// One bounded process's network, served while this value lives.
#[derive(Debug)]
pub struct NetSession {
    shared: Arc<Shared>,
    listeners: Vec<OwnedFd>,
    /// The addresses listened on inside the namespace (the proxy's first).
    addrs: Vec<SocketAddr>,
}

impl NetSession {
    /// Serves `listeners` (listening on `addrs` inside the namespace; the proxy's first).
    pub(crate) fn serve(
        allow: Arc<[Destination]>,
        refused: Arc<RefusedLog>,
        addrs: Vec<SocketAddr>,
        listeners: Vec<OwnedFd>,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::new(allow, refused));
        let mut kept = Vec::with_capacity(listeners.len());
        for (i, (fd, addr)) in listeners.into_iter().zip(&addrs).enumerate() {
            kept.push(fd.try_clone()?);
            let listener = TcpListener::from(fd);
            let shared = Arc::clone(&shared);
            let target = (i > 0).then_some(*addr);
            std::thread::Builder::new()
                .name("transcript-net-accept".into())
                .spawn(move || accept_loop(&listener, &shared, target))?;
        }
        Ok(Self {
            shared,
            listeners: kept,
            addrs,
        })
    }

    /// The addresses listened on inside the namespace (the proxy's first).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }
}

impl Drop for NetSession {
    fn drop(&mut self) {
        self.shared.stop();
        // Shutting a listening socket down wakes the thread blocked in `accept`.
        for l in &self.listeners {
            let _ = rustix::net::shutdown(l.as_fd(), rustix::net::Shutdown::Both);
        }
        self.shared.close_all();
    }
}

/// Accepts connections until the session ends: each to the proxy (`target` `None`) or
/// forwarded to `target` outside the namespace, on a thread of its own.
fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, target: Option<SocketAddr>) {
    loop {
        let conn = listener.accept();
        if shared.stopped() {
            return;
        }
        let Ok((conn, _)) = conn else {
            // EINVAL once shut down; anything else (EMFILE) is retried a little later.
            std::thread::sleep(std::time::Duration::from_millis(20));
            if shared.stopped() {
                return;
            }
            continue;
        };
        // A process opening connections without end gets no more runner threads than this:
        // past it, a new connection is closed at once.
        let Some(slot) = shared.take_slot() else {
            drop(conn);
            continue;
        };
        let shared = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("transcript-net-conn".into())
            .spawn(move || {
                let _slot = slot;
                match target {
                    None => super::proxy::serve(conn, &shared),
                    Some(addr) => forward(conn, addr, &shared),
                }
            });
    }
}

/// A connection to a declared loopback port inside the namespace, forwarded to the same
/// address outside (`localhost` is listened on at `127.0.0.1` and `::1`, each forwarded to
/// itself).
fn forward(conn: TcpStream, addr: SocketAddr, shared: &Shared) {
    if let Ok(outside) = TcpStream::connect(addr) {
        let _ = outside.set_nodelay(true);
        let _ = conn.set_nodelay(true);
        shared.relay(conn, outside);
    }
}
