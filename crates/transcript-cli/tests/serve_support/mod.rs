//! What the `serve` tests share: `transcript serve` as a child process (its first stdout
//! line read for the URL, SIGINT on drop), a plain HTTP/1.0 client, hand-written runs, and
//! headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! NUL-terminated JSON on fds 3 and 4, which a `sh -c 'exec …'` wires to the child's stdin
//! and stdout, so no WebSocket client is needed). Every wait polls observable state against a
//! deadline.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// `transcript serve` running.
pub struct Serve {
    pub child: Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub origin: String,
    /// The lines it printed after the first.
    pub more: Vec<String>,
}

impl Serve {
    /// Starts `transcript serve --storage storage` with `args`, reading the lines it prints
    /// before serving (`lines` of them: 1, or 2 with a token).
    pub fn start(storage: &Path, args: &[&str], lines: usize) -> Serve {
        let mut child = super::common::bin()
            .arg("serve")
            .arg("--storage")
            .arg(storage)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let mut more = Vec::new();
        for _ in 1..lines {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            more.push(l.trim_end().to_owned());
        }
        let origin = first
            .trim_end()
            .strip_prefix("serving ")
            .unwrap_or_else(|| {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("no `serving` line: {first:?}\n{err}")
            })
            .trim_end_matches('/')
            .to_owned();
        Serve {
            child,
            origin,
            more,
        }
    }

    /// The local address to connect to (`0.0.0.0` is reached on 127.0.0.1).
    pub fn addr(&self) -> String {
        self.origin
            .trim_start_matches("http://")
            .replace("0.0.0.0", "127.0.0.1")
    }

    /// SIGINT, then its exit status within `limit`.
    pub fn interrupt(&mut self, limit: Duration) -> Option<i32> {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("serve did not end within {limit:?} of SIGINT");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A response of [`get`].
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// `GET path` on `addr` (`host:port`) with extra header lines.
pub fn get(addr: &str, path: &str, headers: &[&str]) -> Response {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut text = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    stream.write_all(format!("{text}\r\n").as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Response {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// A hand-written run `id` in `storage`: `(type, path, payload)` events a second apart.
pub fn write_run(storage: &Path, id: &str, events: &[(&str, &str, Value)]) {
    std::fs::create_dir_all(storage).unwrap();
    let mut text = String::new();
    for (seq, (ty, path, payload)) in events.iter().enumerate() {
        let e = json!({"seq": seq + 1, "run_id": id, "type": ty, "path": path, "iteration": 0,
            "timestamp": format!("2026-05-28T10:00:{:02}.000Z", seq % 60), "payload": payload});
        text.push_str(&e.to_string());
        text.push('\n');
    }
    std::fs::write(storage.join(format!("{id}.jsonl")), text).unwrap();
}

/// A completed run: command step `build` printing `stdout`, agent step `ask` whose tool call
/// returned `tool`.
pub fn simple_run(storage: &Path, id: &str, stdout: &str, tool: &str) {
    write_run(
        storage,
        id,
        &[
            (
                "run.started",
                "",
                json!({"name": "simple", "kind": "workflow"}),
            ),
            (
                "step.started",
                "build",
                json!({"name": "build", "kind": "command"}),
            ),
            (
                "step.completed",
                "build",
                json!({"name": "build", "kind": "command",
                "result": {"stdout": stdout, "exit_code": 0}}),
            ),
            (
                "step.started",
                "ask",
                json!({"name": "ask", "kind": "agent"}),
            ),
            (
                "tool.call",
                "ask",
                json!({"name": "grep", "call_id": "c1", "input": {"q": "x"},
                "output": null, "fidelity": "router"}),
            ),
            (
                "tool.result",
                "ask",
                json!({"name": "grep", "call_id": "c1", "input": null,
                "output": tool, "fidelity": "router"}),
            ),
            (
                "step.completed",
                "ask",
                json!({"name": "ask", "kind": "agent"}),
            ),
            (
                "run.completed",
                "",
                json!({"name": "simple", "kind": "workflow"}),
            ),
        ],
    );
}

/// A workflow whose step `wait` blocks until the test writes to (or closes) the FIFO.
pub fn gate(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let fifo = dir.join("ws").join("gate.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let workflow = dir.join("gate.yaml");
    std::fs::write(
        &workflow,
        "name: gate\ninputs:\n  - name: fifo\nsteps:\n  - name: before\n    type: command\n    command: 'echo before'\n  - name: wait\n    type: command\n    command: 'read line < \"$FIFO\"; echo \"got $line\"'\n    env: { FIFO: \"{{inputs.fifo}}\" }\n  - name: after\n    type: command\n    command: 'echo after'\n",
    )
    .unwrap();
    (workflow, fifo)
}

pub fn start_run(storage: &Path, workflow: &Path, fifo: &Path, dir: &Path) -> Child {
    super::common::bin()
        .args(["run", "--storage"])
        .arg(storage)
        .arg(workflow)
        .arg("--input")
        .arg(format!("fifo={}", fifo.display()))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Headless Chromium over the DevTools protocol on a pipe.
pub struct Browser {
    child: Child,
    input: ChildStdin,
    messages: mpsc::Receiver<Value>,
    next: u64,
    /// Every protocol event received so far (`method`, `params`, `sessionId`).
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long one protocol call may take.
const CALL_LIMIT: Duration = Duration::from_secs(60);

impl Browser {
    /// Chromium, or `None` (a skip, which fails under `CI=true`) when there is none.
    pub fn launch() -> Option<Browser> {
        let browser = super::common::html_page::browser_or_skip()?;
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" 3<&0 4>&1 0</dev/null 1>/dev/null")
            .arg(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
                "--window-size=1400,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = child.stdout.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = output.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|b| *b == 0) {
                    let message: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&message[..end])
                        && tx.send(v).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Some(Browser {
            child,
            input,
            messages,
            next: 1,
            events: Vec::new(),
            _profile: profile,
        })
    }

    /// Calls `method` (on `session` when given) and returns its result.
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.try_call(session, method, params)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// [`Browser::call`], the protocol's error returned (an evaluation in a page that is
    /// navigating away, say).
    fn try_call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, Value> {
        let id = self.next;
        self.next += 1;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.input.write_all(&bytes).unwrap();
        let deadline = Instant::now() + CALL_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self
                .messages
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("{method}: no answer within {CALL_LIMIT:?}"));
            if m.get("id").and_then(Value::as_u64) == Some(id) {
                return match m.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(m["result"].clone()),
                };
            }
            self.events.push(m);
        }
    }

    /// Takes the events that arrived meanwhile.
    fn pump(&mut self) {
        while let Ok(m) = self.messages.try_recv() {
            self.events.push(m);
        }
    }

    /// A new tab on `url`, loaded; returns its session.
    pub fn open(&mut self, url: &str) -> String {
        let target = self.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let id = target["targetId"].as_str().unwrap().to_owned();
        let attached = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": id, "flatten": true}),
        );
        let session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Page", "Runtime", "Network", "Log"] {
            self.call(Some(&session), &format!("{domain}.enable"), json!({}));
        }
        self.navigate(&session, url);
        session
    }

    /// Navigates `session` to `url` and waits for its document to be complete.
    pub fn navigate(&mut self, session: &str, url: &str) {
        self.call(Some(session), "Page.navigate", json!({"url": url}));
        let expected = url.split('#').next().unwrap_or(url).to_owned();
        self.wait_for(
            session,
            &format!(
                "document.readyState === 'complete' && location.href.split('#')[0] === {}",
                json!(expected)
            ),
            Duration::from_secs(30),
        );
    }

    /// Evaluates `expression` in `session`'s page and returns its value.
    pub fn eval(&mut self, session: &str, expression: &str) -> Value {
        let r = self.call(
            Some(session),
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        r["result"]["value"].clone()
    }

    /// Polls `expression` until it is `true`, at most `limit` (then panics with the page's text).
    pub fn wait_for(&mut self, session: &str, expression: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let asked =
                json!({"expression": format!("Boolean({expression})"), "returnByValue": true});
            // A page between two documents has no context to evaluate in: asked again.
            let answer = self.try_call(Some(session), "Runtime.evaluate", asked);
            if answer.is_ok_and(|r| r["result"]["value"] == json!(true)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = self.eval(session, "document.body ? document.body.innerText : ''");
        panic!("not true within {limit:?}: {expression}\npage:\n{text}");
    }

    /// What the pages did that a safe page never does: a dialog, a request to another origin
    /// than `origin`, a console message, an exception, an error in the log.
    pub fn misdeeds(&mut self, origin: &str) -> Vec<String> {
        self.pump();
        let mut bad = Vec::new();
        for e in &self.events {
            let method = e["method"].as_str().unwrap_or("");
            let p = &e["params"];
            match method {
                "Page.javascriptDialogOpening" => bad.push(format!("dialog: {p}")),
                "Runtime.consoleAPICalled" => bad.push(format!("console: {p}")),
                "Runtime.exceptionThrown" => bad.push(format!("exception: {p}")),
                "Network.requestWillBeSent" => {
                    let url = p["request"]["url"].as_str().unwrap_or("");
                    if !url.starts_with(origin) && url != "about:blank" {
                        bad.push(format!("request to {url}"));
                    }
                }
                "Log.entryAdded" => {
                    let url = p["entry"]["url"].as_str().unwrap_or("");
                    if p["entry"]["level"] == "error" && !url.ends_with("/favicon.ico") {
                        bad.push(format!("log: {}", p["entry"]));
                    }
                }
                _ => {}
            }
        }
        bad
    }

    /// A PNG screenshot of `session`'s page into `path`.
    pub fn screenshot(&mut self, session: &str, path: &PathBuf) {
        let shot = self.call(
            Some(session),
            "Page.captureScreenshot",
            json!({"format": "png"}),
        );
        let data = shot["data"].as_str().unwrap();
        std::fs::write(path, decode_base64(data)).unwrap();
    }
}

/// Standard base64 (the screenshot's encoding).
fn decode_base64(text: &str) -> Vec<u8> {
    let table: HashMap<u8, u32> =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
            .iter()
            .enumerate()
            .map(|(i, c)| (*c, i as u32))
            .collect();
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|c| table.contains_key(c)) {
        acc = (acc << 6) | table[&c];
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// The live scenario every storage must pass (files and NATS): a run held mid-step shows
/// `running` in the list and `recording` on its page; released, both say `succeeded` without a
/// reload. Returns the server, the list's and the run's sessions (for more checks).
pub fn a_live_run_turns_completed(
    browser: &mut Browser,
    storage: &Path,
    dir: &Path,
    limit: Duration,
) -> (Serve, String, String) {
    let (workflow, fifo) = gate(dir);
    let mut runner = start_run(storage, &workflow, &fifo, dir);
    // Opening the FIFO for writing returns once the step has opened it: mid-step, running.
    let mut gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let serve = Serve::start(storage, &["--addr", "127.0.0.1:0"], 1);
    let list = browser.open(&format!("{}/", serve.origin));
    browser.wait_for(
        &list,
        "document.querySelector('#runs td[data-col=status]').textContent === 'running'",
        limit,
    );
    let id = browser.eval(
        &list,
        "document.querySelector('#runs tbody tr').id.slice(4)",
    );
    let id = id.as_str().unwrap().to_owned();
    let run = browser.open(&format!("{}/runs/{id}", serve.origin));
    browser.wait_for(
        &run,
        "document.getElementById('tv-live').textContent.includes('recording')",
        limit,
    );
    // Marks that a reload would lose.
    browser.eval(&list, "window.notReloaded = true");
    browser.eval(&run, "window.notReloaded = true");
    gate.write_all(b"go\n").unwrap();
    drop(gate);
    assert!(runner.wait().unwrap().success());
    browser.wait_for(
        &list,
        &format!("window.notReloaded && document.querySelector('#run-{id} td[data-col=status]').textContent === 'succeeded' && document.querySelector('#run-{id} td[data-col=status]').className === 'st-succeeded'"),
        limit,
    );
    browser.wait_for(
        &run,
        "window.notReloaded && document.body.getAttribute('data-ended') === 'succeeded' && document.querySelector('main').textContent.includes('after')",
        limit,
    );
    (serve, list, run)
}
