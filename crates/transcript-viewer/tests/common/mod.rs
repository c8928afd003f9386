//! The viewer in-process over a storage directory (infra's `DirRunStore`, a dev-dependency),
//! a plain HTTP/1.0 client on std's `TcpStream` (so a body ends with the connection, chunked
//! or not), hand-written transcripts, and the tag parser of the attack tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use transcript_viewer::{Viewer, ViewerConfig};

/// A running viewer; dropped, it shuts down and its thread is joined.
pub struct Server {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The viewer of `storage` on 127.0.0.1 (any port), with `token`, a $1 per 1000 tokens
/// price, and 50 ms polls.
pub fn serve(storage: &Path, token: Option<&str>) -> Server {
    let store = Arc::new(transcript_infra::DirRunStore::new(storage));
    let mut config = ViewerConfig::new(store, Arc::new(transcript_infra::SystemClock));
    config.token = token.map(str::to_owned);
    config.price = Some(Arc::new(|_model, usage| {
        let tokens = usage.input_tokens.unwrap_or(0) + usage.output_tokens.unwrap_or(0);
        Some(tokens as f64 / 1000.0)
    }));
    config.price_table = "test table".to_owned();
    config.poll = Duration::from_millis(50);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let viewer = Viewer::bind("127.0.0.1:0".parse().unwrap(), config)
                .await
                .unwrap();
            addr_tx.send(viewer.local_addr().unwrap()).unwrap();
            viewer
                .serve(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    Server {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// A response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Lowercased names; repeated headers joined with `\n`.
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

/// `GET path` with extra header lines (`Name: value`).
pub fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> Response {
    let mut stream = request(addr, path, headers);
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse(&String::from_utf8_lossy(&raw))
}

/// Opens a request and returns the stream, to read a response as it comes (SSE).
pub fn request(addr: SocketAddr, path: &str, headers: &[&str]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut text = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).unwrap();
    stream
}

/// Reads `stream` until its text holds `wanted` or `limit` passes (then panics with what came).
pub fn read_until(stream: &mut TcpStream, wanted: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("{e}"),
        }
        if String::from_utf8_lossy(&seen).contains(wanted) {
            return String::from_utf8_lossy(&seen).into_owned();
        }
    }
    panic!(
        "{wanted:?} did not come within {limit:?}; got:\n{}",
        String::from_utf8_lossy(&seen)
    );
}

fn parse(raw: &str) -> Response {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers: HashMap<String, String> = HashMap::new();
    for l in lines {
        if let Some((n, v)) = l.split_once(':') {
            let e = headers.entry(n.trim().to_ascii_lowercase()).or_default();
            if !e.is_empty() {
                e.push('\n');
            }
            e.push_str(v.trim());
        }
    }
    Response {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A hand-written run file: `(type, path, payload)` events one second apart from 10:00:00.
pub fn write_run(storage: &Path, id: &str, events: &[(&str, &str, Value)]) {
    std::fs::create_dir_all(storage).unwrap();
    let mut text = String::new();
    for (seq, (ty, path, payload)) in events.iter().enumerate() {
        let e = json!({"seq": seq + 1, "run_id": id, "type": ty, "path": path, "iteration": 0,
            "timestamp": format!("2026-05-28T10:{:02}:{:02}.000Z", seq / 60, seq % 60),
            "payload": payload});
        text.push_str(&e.to_string());
        text.push('\n');
    }
    std::fs::write(storage.join(format!("{id}.jsonl")), text).unwrap();
}

/// A completed run of workflow `wf`: a command step `build` whose stdout is `output`, an
/// agent step `ask` with a billed turn of `model`, and a tool call whose output is `tool`.
pub fn simple_run(storage: &Path, id: &str, wf: &str, (output, tool, model): (&str, &str, &str)) {
    write_run(
        storage,
        id,
        &[
            ("run.started", "", json!({"name": wf, "kind": "workflow"})),
            (
                "step.started",
                "build",
                json!({"name": "build", "kind": "command"}),
            ),
            (
                "step.completed",
                "build",
                json!({"name": "build", "kind": "command", "result": {"stdout": output, "exit_code": 0}}),
            ),
            (
                "step.started",
                "ask",
                json!({"name": "ask", "kind": "agent"}),
            ),
            (
                "message.user",
                "ask",
                json!({"role": "user", "blocks": [{"type": "text", "fidelity": "router", "text": "say hi"}]}),
            ),
            (
                "message.assistant",
                "ask",
                json!({"role": "assistant", "model": model,
                    "usage": {"input_tokens": 1000, "output_tokens": 500},
                    "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": "hi there"}]}),
            ),
            (
                "tool.call",
                "ask",
                json!({"name": "grep", "call_id": "c1", "input": {"q": "x"}, "output": null, "fidelity": "router"}),
            ),
            (
                "tool.result",
                "ask",
                json!({"name": "grep", "call_id": "c1", "input": null, "output": tool, "fidelity": "router"}),
            ),
            (
                "step.completed",
                "ask",
                json!({"name": "ask", "kind": "agent"}),
            ),
            ("run.completed", "", json!({"name": wf, "kind": "workflow"})),
        ],
    );
}

/// The hostile values of every attack test of a rendered view.
pub fn hostile() -> Vec<String> {
    serde_json::from_str(include_str!("../../../../fixtures/hostile/markup.json")).unwrap()
}

/// Every tag of a page: name and attributes (values quoted; the parser of
/// transcript-export's tests/injection.rs). Script contents are skipped.
pub fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let end = after.find('>').expect("every tag is closed");
        let body = after[..end].trim_end_matches('/');
        rest = &after[end + 1..];
        let name_len = body.find(char::is_whitespace).unwrap_or(body.len());
        let name = body[..name_len].trim_start_matches('/').to_lowercase();
        let mut attrs = Vec::new();
        let mut a = body[name_len..].trim_start();
        while !a.is_empty() {
            let n = a
                .find(|c: char| c == '=' || c.is_whitespace())
                .unwrap_or(a.len());
            let attr = a[..n].to_lowercase();
            a = &a[n..];
            let mut value = String::new();
            if let Some(v) = a.strip_prefix('=') {
                let v = v.strip_prefix('"').expect("attribute values are quoted");
                let close = v.find('"').expect("quoted value closes");
                value = v[..close].to_owned();
                a = &v[close + 1..];
            }
            attrs.push((attr, value));
            a = a.trim_start();
        }
        if name == "script" && !body.starts_with('/') {
            let close = rest.find("</script>").expect("script closes");
            rest = &rest[close..];
        }
        out.push((name, attrs));
    }
    out
}
