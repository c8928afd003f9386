//! The truth of the network tests (#57): listeners the test owns, each recording what reached
//! it. "Nothing arrived" is proved without waiting: once the step has ended the test sends its
//! own sentinel (a connection, a datagram), and the first thing the listener got must be it.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// The longest a listener is waited for (a bound on a hung test, never a race won by waiting).
const LIMIT: Duration = Duration::from_secs(60);

/// The first line of the sentinel request.
const SENTINEL: &str = "GET /sentinel HTTP/1.1";

/// An HTTP listener on `127.0.0.1`: every request it accepts is recorded (its first line),
/// in the order they were accepted.
pub struct Listener {
    /// Its port.
    pub port: u16,
    hits: mpsc::Receiver<String>,
}

impl Listener {
    /// Answers every request with `200` and `body`.
    pub fn answering(body: &'static str) -> Self {
        Self::serving(move |_| Some(body.as_bytes().to_vec()))
    }

    /// Serves the files under `root` (the path of a request, its query left out); `404` for
    /// anything else. Enough for git's dumb HTTP protocol.
    pub fn files(root: PathBuf) -> Self {
        Self::serving(move |target| {
            let path = target.split('?').next().unwrap_or_default();
            let rel = path.trim_start_matches('/');
            if rel.split('/').any(|c| c == "..") {
                return None;
            }
            std::fs::read(root.join(rel)).ok()
        })
    }

    /// Answers each request with what `answer` gives for its target (`None`: `404`).
    pub fn serving(answer: impl Fn(&str) -> Option<Vec<u8>> + Send + 'static) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, hits) = mpsc::channel();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { return };
                let head = read_head(&mut conn);
                let first = head.lines().next().unwrap_or_default().to_owned();
                let target = first.split(' ').nth(1).unwrap_or_default().to_owned();
                if tx.send(first).is_err() {
                    return;
                }
                let (status, body) = match answer(&target) {
                    Some(body) => ("200 OK", body),
                    None => ("404 Not Found", b"not found".to_vec()),
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\
                     Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(&body);
            }
        });
        Self { port, hits }
    }

    /// `127.0.0.1:PORT`.
    pub fn dest(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.dest())
    }

    /// The next request line the listener recorded.
    pub fn next_hit(&self) -> String {
        self.hits
            .recv_timeout(LIMIT)
            .expect("the listener recorded no request")
    }

    /// Every request line recorded so far.
    pub fn hits_so_far(&self) -> Vec<String> {
        self.hits.try_iter().collect()
    }

    /// Sends the sentinel and asserts it is the first request the listener got: nothing the
    /// steps did (all of it before this call) reached it.
    pub fn assert_untouched(&self, why: &str) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(format!("{SENTINEL}\r\nHost: sentinel\r\n\r\n").as_bytes())
            .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert_eq!(
            self.next_hit(),
            SENTINEL,
            "the listener on port {} was reached\n{why}",
            self.port
        );
    }
}

/// A request's head (up to the blank line, or what came before the peer stopped); its body
/// (by `Content-Length`) is read too, so that closing never resets the client's connection.
fn read_head(conn: &mut TcpStream) -> String {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match conn.read(&mut buf) {
            Ok(n) if n > 0 && got.len() < 65536 => got.extend_from_slice(&buf[..n]),
            _ => return String::from_utf8_lossy(&got).into_owned(),
        }
    };
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut left = length.saturating_sub(got.len() - end);
    while left > 0 {
        match conn.read(&mut buf) {
            Ok(n) if n > 0 => left = left.saturating_sub(n),
            _ => break,
        }
    }
    head
}

/// A UDP socket on `127.0.0.1` the steps may aim at.
pub struct Datagrams {
    /// Its port.
    pub port: u16,
    sock: UdpSocket,
}

impl Datagrams {
    pub fn bind() -> Self {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(LIMIT)).unwrap();
        Self {
            port: sock.local_addr().unwrap().port(),
            sock,
        }
    }

    /// The next datagram the socket got.
    pub fn next(&self) -> String {
        let mut buf = [0u8; 2048];
        let (n, _) = self.sock.recv_from(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// Sends a sentinel datagram and asserts it is the first one the socket got.
    pub fn assert_untouched(&self, why: &str) {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        probe
            .send_to(b"sentinel", ("127.0.0.1", self.port))
            .unwrap();
        assert_eq!(
            self.next(),
            "sentinel",
            "a step's datagram was delivered\n{why}"
        );
    }
}

/// The destinations a `step.completed` lists as refused (`[]` when it has none).
pub fn refused(completed: &Value) -> Vec<String> {
    completed["payload"]["network_refused"]["first"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
