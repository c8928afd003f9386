//! The proxy a step's processes reach inside their namespace (`HTTPS_PROXY`, `HTTP_PROXY`,
//! `ALL_PROXY`): HTTP `CONNECT host:port` (a tunnel, for TLS and anything else) and plain
//! HTTP in absolute form (`GET http://host:port/path`). The destination is decided by what
//! the request declares (its authority, read by `httparse`; an absolute URI, read by the
//! WHATWG parser of the `url` crate), compared with the step's list; names resolve here,
//! outside the namespace. Anything else is answered `403` and recorded.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::Destination;
use super::shared::Shared;

/// The largest request head read (request line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// How long a connection to an allowed destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(60);

/// What a request asked for.
struct Asked {
    dest: Destination,
    /// `CONNECT` (a tunnel) rather than a plain HTTP request.
    tunnel: bool,
    /// For plain HTTP: the head to send on (origin form, hop-by-hop headers removed).
    head: Vec<u8>,
    /// Bytes the client sent after its head.
    rest: Vec<u8>,
}

/// Serves one client connection of the proxy.
pub(crate) fn serve(mut client: TcpStream, shared: &Shared) {
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    let asked = match read_request(&mut client) {
        Ok(asked) => asked,
        Err(reason) => {
            answer(&mut client, "400 Bad Request", &reason);
            return;
        }
    };
    let _ = client.set_read_timeout(None);
    if !shared.allows(&asked.dest) {
        shared.refuse(&asked.dest);
        answer(
            &mut client,
            "403 Forbidden",
            &format!(
                "transcript: {} is not in this step's `network:` list: the step reaches only \
                 the hosts its workflow names",
                asked.dest
            ),
        );
        return;
    }
    let mut upstream = match connect(&asked.dest) {
        Ok(s) => s,
        Err(e) => {
            answer(
                &mut client,
                "502 Bad Gateway",
                &format!("transcript: {}: {e}", asked.dest),
            );
            return;
        }
    };
    let started = if asked.tunnel {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .and_then(|()| upstream.write_all(&asked.rest))
    } else {
        upstream
            .write_all(&asked.head)
            .and_then(|()| upstream.write_all(&asked.rest))
    };
    if started.is_err() {
        return;
    }
    shared.relay(client, upstream);
}

/// Connects to `dest` (its name resolved here), trying each address in turn.
fn connect(dest: &Destination) -> std::io::Result<TcpStream> {
    let addrs: Vec<_> = match dest.ip() {
        Some(ip) => vec![std::net::SocketAddr::new(ip, dest.port())],
        None => (dest.host(), dest.port()).to_socket_addrs()?.collect(),
    };
    let mut last = std::io::Error::other("the name has no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Reads and parses the request head.
fn read_request(client: &mut TcpStream) -> Result<Asked, String> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the request ended before its head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let rest = buf[len..].to_vec();
                return asked(&req, rest);
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            Ok(httparse::Status::Partial) => return Err("request head too large".into()),
            Err(e) => return Err(format!("not an HTTP request: {e}")),
        }
    }
}

/// The destination and what to send it, from a parsed head.
fn asked(req: &httparse::Request<'_, '_>, rest: Vec<u8>) -> Result<Asked, String> {
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let dest = target
            .parse::<Destination>()
            .map_err(|e| format!("CONNECT {target}: {e}"))?;
        return Ok(Asked {
            dest,
            tunnel: true,
            head: Vec::new(),
            rest,
        });
    }
    let url = url::Url::parse(target)
        .map_err(|_| format!("{target:?}: a proxy request names an absolute http:// URL"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{}: only http:// is proxied in plain form (https goes through CONNECT)",
            url.scheme()
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| format!("{target:?} names no host"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let dest = Destination::new(host, port).map_err(|e| format!("{target:?}: {e}"))?;
    let mut head = Vec::with_capacity(512);
    let origin = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    head.extend_from_slice(
        format!("{method} {origin} HTTP/1.{}\r\n", req.version.unwrap_or(1)).as_bytes(),
    );
    for h in req.headers.iter() {
        let hop = [
            "connection",
            "proxy-connection",
            "proxy-authorization",
            "keep-alive",
        ];
        if hop.iter().any(|n| h.name.eq_ignore_ascii_case(n)) {
            continue;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    // One request per connection: the next one (perhaps to another host) comes through a
    // new connection and is decided on its own.
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Asked {
        dest,
        tunnel: false,
        head,
        rest,
    })
}

/// Answers `status` with `text` and closes.
fn answer(client: &mut TcpStream, status: &str, text: &str) {
    let body = format!("{text}\n");
    let _ = write!(
        client,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.flush();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<Asked, String> {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(raw.as_bytes()).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial"),
        };
        asked(&req, raw.as_bytes()[len..].to_vec())
    }

    #[test]
    fn connect_and_absolute_form_name_their_destination() {
        let a = parse("CONNECT API.github.com:443 HTTP/1.1\r\nHost: x\r\n\r\nTLS").unwrap();
        assert!(a.tunnel);
        assert_eq!(a.dest.to_string(), "api.github.com:443");
        assert_eq!(a.rest, b"TLS");
        let p = parse(
            "GET http://127.0.0.1:8080/a/b?c=d HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\
             Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert!(!p.tunnel);
        assert_eq!(p.dest.to_string(), "127.0.0.1:8080");
        let head = String::from_utf8(p.head).unwrap();
        assert!(head.starts_with("GET /a/b?c=d HTTP/1.1\r\n"), "{head}");
        assert!(!head.to_ascii_lowercase().contains("proxy-connection"));
        assert!(
            head.ends_with("Accept: */*\r\nConnection: close\r\n\r\n"),
            "{head}"
        );
        let v6 = parse("GET http://[::1]/ HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(v6.dest.to_string(), "[::1]:80");
    }

    #[test]
    fn the_destination_is_the_one_the_request_reaches_not_one_it_mentions() {
        // Userinfo, a Host header and a second authority do not change where it goes.
        let a = parse("GET http://api.github.com:443@evil.test/x HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(a.dest.to_string(), "evil.test:80");
        let a = parse("GET http://evil.test/ HTTP/1.1\r\nHost: api.github.com\r\n\r\n").unwrap();
        assert_eq!(a.dest.to_string(), "evil.test:80");
        assert!(parse("CONNECT api.github.com:443@evil.test:443 HTTP/1.1\r\n\r\n").is_err());
        assert!(parse("CONNECT api.github.com:443/evil.test HTTP/1.1\r\n\r\n").is_err());
        // A trailing dot is another spelling of a name: not a destination at all.
        assert!(parse("GET http://API.GITHUB.COM./ HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn a_request_that_names_no_destination_is_refused() {
        for raw in [
            "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "GET https://example.com/ HTTP/1.1\r\n\r\n",
            "CONNECT example.com HTTP/1.1\r\n\r\n",
            "CONNECT *.example.com:443 HTTP/1.1\r\n\r\n",
            "GET file:///etc/passwd HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse(raw).is_err(), "{raw}");
        }
    }
}
