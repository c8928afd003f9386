//! Moving bytes both ways between a connection inside a namespace and one outside, until
//! both sides have finished: through a pipe with `splice` (the kernel moves the pages; no
//! copy through the runner's memory), falling back to reads and writes where `splice` is
//! refused.
//!
//! What it costs (#57): a second loopback TCP connection. Measured on 2 cores with the network
//! bench's 100 MB download and `perf stat` (CPU of every process, 15 downloads): 0.98-1.07 s on the
//! host network, 1.42-1.53 s through the proxy. Of the difference (`perf record`), about 40% is the
//! relay's threads (the inside hop's send and its delivery to curl), 45% curl itself (receiving,
//! and acknowledging to a second sender), the rest the helper and the server. Tried, and no change
//! beyond the noise (kept out): pipes of 64 or 256 KiB and smaller `splice` lengths, socket buffers
//! left to autotuning or set from 128 KiB to 1 MiB, `reno` instead of the system's BBR on the
//! inside socket (no pacing timers), 512 KB segments on the namespace's loopback ("BIG TCP",
//! `IFLA_GSO_IPV4_MAX_SIZE`); reads and writes instead of `splice` cost about 12% more CPU, and
//! `SPLICE_F_MORE` corks the last segment.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};

use rustix::pipe::{PipeFlags, SpliceFlags};

/// How much one `splice` moves at most.
const CHUNK: usize = 1 << 20;

/// Relays `a` ↔ `b` until both directions have ended; each end's write side is shut down
/// once its source has nothing more (half-close is kept: a client that sent its request and
/// shut its side down still gets the answer).
pub(crate) fn both_ways(a: TcpStream, b: TcpStream) {
    // Fewer, larger wake-ups for the relay; capped by `net.core.[rw]mem_max`. (Measured
    // against a server copying its body per request, 1.07-1.17x the host network's time with
    // them, 1.14-1.16x without; with the bench's shared-buffer server, no difference in CPU.)
    for s in [&a, &b] {
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(s, 4 << 20);
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(s, 4 << 20);
    }
    let (a2, b2) = match (a.try_clone(), b.try_clone()) {
        (Ok(a2), Ok(b2)) => (a2, b2),
        _ => return,
    };
    let back = std::thread::Builder::new()
        .name("transcript-net-relay".into())
        .spawn(move || one_way(&b2, &a2));
    one_way(&a, &b);
    if let Ok(back) = back {
        let _ = back.join();
    }
}

/// Copies `from` → `to` until `from` ends or either fails, then shuts `to`'s write side.
fn one_way(from: &TcpStream, to: &TcpStream) {
    if spliced(from, to).is_err() {
        let _ = copied(from, to);
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

/// `from` → pipe → `to` with `splice`; `Err` only when splicing is refused before any byte
/// moved (the caller then copies).
fn spliced(from: &TcpStream, to: &TcpStream) -> std::io::Result<()> {
    let (rd, wr) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    // A larger pipe moves more per call (the default 64 KiB costs 16 times the calls);
    // refused past `fs.pipe-max-size` for an unprivileged runner: then the default.
    let _ = rustix::pipe::fcntl_setpipe_size(&wr, CHUNK);
    let mut moved_any = false;
    loop {
        let n = match rustix::pipe::splice(from, None, &wr, None, CHUNK, SpliceFlags::MOVE) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if !moved_any && e == rustix::io::Errno::INVAL => return Err(e.into()),
            Err(_) => return Ok(()),
        };
        moved_any = true;
        let mut left = n;
        while left > 0 {
            match rustix::pipe::splice(&rd, None, to, None, left, SpliceFlags::MOVE) {
                Ok(0) | Err(_) => return Ok(()),
                Ok(m) => left -= m,
            }
        }
    }
}

/// `from` → `to` with reads and writes.
fn copied(mut from: &TcpStream, mut to: &TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(&buf[..n])?;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// A connected pair of sockets.
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn bytes_cross_both_ways_and_a_half_close_still_gets_the_answer() {
        let (mut client, inside) = pair();
        let (outside, mut server) = pair();
        let relay = std::thread::spawn(move || super::both_ways(inside, outside));
        let big = vec![7u8; 3 << 20];
        let sent = big.clone();
        let writer = std::thread::spawn(move || {
            client.write_all(&sent).unwrap();
            client.shutdown(std::net::Shutdown::Write).unwrap();
            let mut answer = String::new();
            client.read_to_string(&mut answer).unwrap();
            answer
        });
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), big.len());
        assert!(got == big);
        server.write_all(b"done").unwrap();
        drop(server);
        assert_eq!(writer.join().unwrap(), "done");
        relay.join().unwrap();
    }
}
