//! #57: a bounded process reaches only its declared destinations; truth from the listeners
//! themselves (what they accepted or received) and the programs' exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;

use transcript_exec::sandbox::net::{Destination, NetBounds};
use transcript_exec::sandbox::{Confinement, spawn_bounded};

const HELPER: &str = env!("CARGO_BIN_EXE_transcript-netns");

/// An HTTP server on `127.0.0.1` answering every request with `body`; sends on `hits` the
/// first line of each request it got.
fn http_server(body: &'static str) -> (u16, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = [0u8; 4096];
            let n = conn.read(&mut buf).unwrap_or(0);
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            let first = text.lines().next().unwrap_or_default().to_owned();
            if tx.send(first).is_err() {
                return;
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, rx)
}

/// Runs `argv` bounded by `bounds` (confined to `ws` when `confined`); its exit code and stdout.
async fn run(
    argv: &[&str],
    bounds: &NetBounds,
    ws: &Path,
    confined: bool,
) -> (i32, String, String) {
    let mut cmd = bounds.command(argv[0]);
    cmd.args(&argv[1..])
        .current_dir(ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = Confinement::new(ws);
    let (child, _tmp) =
        spawn_bounded(&mut cmd, confined.then_some(&confinement), Some(bounds)).unwrap();
    let out = child.wait_with_output().await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn dest(s: &str) -> Destination {
    s.parse().unwrap()
}

/// The first request the server got after the test's own sentinel was sent: proves that
/// nothing reached it before (the step's attempt happened-before the sentinel).
fn first_hit_is_sentinel(port: u16, hits: &mpsc::Receiver<String>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /sentinel HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert_eq!(
        hits.recv().unwrap(),
        "GET /sentinel HTTP/1.1",
        "the listener was reached"
    );
}

#[tokio::test]
async fn nothing_is_reachable_without_a_declaration_and_the_refusal_is_recorded() {
    let ws = tempfile::tempdir().unwrap();
    let (port, hits) = http_server("secret");
    let bounds = NetBounds::new(HELPER);
    for confined in [false, true] {
        let url = format!("http://127.0.0.1:{port}/x");
        let (code, out, _) = run(
            &["curl", "-fsS", "--max-time", "20", &url],
            &bounds,
            ws.path(),
            confined,
        )
        .await;
        assert_ne!(code, 0, "curl reached the listener ({confined})");
        assert!(!out.contains("secret"));
        let (code, _, _) = run(
            &["curl", "-fsS", "--noproxy", "*", "--max-time", "20", &url],
            &bounds,
            ws.path(),
            confined,
        )
        .await;
        assert_ne!(code, 0, "a direct connection reached the listener");
    }
    first_hit_is_sentinel(port, &hits);
    let refused = bounds.log().snapshot();
    assert_eq!(refused.first, vec![format!("127.0.0.1:{port}")]);
    assert_eq!(refused.count, 1);
    assert_eq!(refused.attempts, 2);
}

#[tokio::test]
async fn a_declared_loopback_port_is_reached_through_the_proxy_and_directly_and_another_is_not() {
    let ws = tempfile::tempdir().unwrap();
    let (open, open_hits) = http_server("hello");
    let (closed, closed_hits) = http_server("secret");
    let bounds = NetBounds::new(HELPER).allowing([dest(&format!("127.0.0.1:{open}"))]);
    for confined in [false, true] {
        for extra in [&[][..], &["--noproxy", "*"][..]] {
            let url = format!("http://127.0.0.1:{open}/ok");
            let mut argv = vec!["curl", "-fsS", "--max-time", "20"];
            argv.extend_from_slice(extra);
            argv.push(&url);
            let (code, out, err) = run(&argv, &bounds, ws.path(), confined).await;
            assert_eq!(
                (code, out.as_str()),
                (0, "hello"),
                "{extra:?} {confined}: {err}"
            );
            assert_eq!(open_hits.recv().unwrap(), "GET /ok HTTP/1.1");
        }
        let url = format!("http://127.0.0.1:{closed}/no");
        let (code, _, _) = run(
            &["curl", "-fsS", "--max-time", "20", &url],
            &bounds,
            ws.path(),
            confined,
        )
        .await;
        assert_ne!(code, 0);
    }
    first_hit_is_sentinel(closed, &closed_hits);
    assert_eq!(
        bounds.log().snapshot().first,
        vec![format!("127.0.0.1:{closed}")]
    );
}

#[tokio::test]
async fn udp_to_a_local_port_is_not_delivered() {
    let ws = tempfile::tempdir().unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let bounds = NetBounds::new(HELPER).allowing([dest(&format!("127.0.0.1:{port}"))]);
    let script = format!(
        "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendto(b'leak', ('127.0.0.1', {port})); print('sent')"
    );
    let (code, out, err) = run(&["python3", "-c", &script], &bounds, ws.path(), true).await;
    assert_eq!((code, out.trim()), (0, "sent"), "{err}");
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    probe.send_to(b"sentinel", ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"sentinel", "the step's datagram was delivered");
}

#[tokio::test]
async fn the_process_sees_only_a_loopback_interface_and_keeps_its_identity() {
    let ws = tempfile::tempdir().unwrap();
    let bounds = NetBounds::new(HELPER);
    let (code, out, err) = run(&["cat", "/proc/net/dev"], &bounds, ws.path(), true).await;
    assert_eq!(code, 0, "{err}");
    let ifaces: Vec<&str> = out
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(ifaces, vec!["lo"]);
    let (code, out, _) = run(&["id", "-u"], &bounds, ws.path(), true).await;
    assert_eq!(code, 0);
    assert_eq!(out.trim(), rustix::process::getuid().as_raw().to_string());
    let (code, out, _) = run(
        &["grep", "^CapEff", "/proc/self/status"],
        &bounds,
        ws.path(),
        true,
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.trim().ends_with("0000000000000000"), "{out}");
}

#[tokio::test]
async fn an_abstract_unix_socket_of_the_host_is_out_of_reach_even_unconfined() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let ws = tempfile::tempdir().unwrap();
    let name = format!("transcript-test-{}", std::process::id());
    let listener =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
    let bounds = NetBounds::new(HELPER);
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\n\
         try:\n    s.connect('\\0{name}'); print('reached')\nexcept OSError as e:\n    print('refused', e.errno)"
    );
    // On the host's network the same script reaches it (the test can fail)...
    let host = tokio::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&host.stdout).trim(), "reached");
    let (_peer, _) = listener.accept().unwrap();
    // ...unconfined by Landlock (no scope, no seccomp), only the namespace stands in the way.
    let (code, out, err) = run(&["python3", "-c", &script], &bounds, ws.path(), false).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("refused"), "{out}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "the bounded process reached the listener"
    );
}
