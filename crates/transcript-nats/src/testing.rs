//! Real `nats-server` processes for tests and benchmarks (feature `testing`): one server or a
//! cluster of three on loopback, each on ports the server picked or a fresh store directory,
//! stopped by PID when dropped (no process is left behind).
//!
//! The binary is `$TRANSCRIPT_NATS_SERVER` or `nats-server` on `PATH`. When it is missing,
//! [`server_binary`] returns `Ok(None)` (the caller skips), or an error under `CI=true`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Why a test server could not start.
#[derive(Debug, thiserror::Error)]
#[error("nats-server: {0}")]
pub struct ServerError(String);

/// The `nats-server` binary, `None` when absent (an error when `CI=true`: a test that would
/// skip fails instead).
pub fn server_binary() -> Result<Option<PathBuf>, ServerError> {
    let found = std::env::var_os("TRANSCRIPT_NATS_SERVER")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("nats-server"))
                    .find(|p| p.is_file())
            })
        });
    match found {
        Some(path) => Ok(Some(path)),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => Err(ServerError(
            "not found (set TRANSCRIPT_NATS_SERVER or put nats-server on PATH; \
             CI=true forbids skipping)"
                .to_owned(),
        )),
        None => Ok(None),
    }
}

/// One running `nats-server` process.
#[derive(Debug)]
pub struct ServerNode {
    binary: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    /// The client port.
    pub port: u16,
    /// The cluster (route) port, for cluster nodes.
    pub cluster_port: Option<u16>,
    /// The server's name.
    pub name: String,
    store: PathBuf,
}

/// Starts a server and waits for its "Server is ready" line (and, in a cluster, for
/// `wait_for` too), reading the client port it listens on from its log.
fn spawn(
    binary: &Path,
    args: &[String],
    wait_for: Option<&str>,
) -> Result<(Child, u16), ServerError> {
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ServerError(format!("{}: {e}", binary.display())))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| ServerError("no stderr".to_owned()))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                // Keep draining so the server never blocks on a full pipe.
                continue;
            }
        }
    });
    let mut port = None;
    let mut ready = false;
    let mut waited = wait_for.is_none();
    let mut log = Vec::new();
    while !(ready && waited && port.is_some()) {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ServerError(format!(
                "did not become ready within 30 s:\n{}",
                log.join("\n")
            )));
        };
        if let Some(rest) = line.split("Listening for client connections on ").nth(1) {
            port = rest.rsplit(':').next().and_then(|p| p.trim().parse().ok());
        }
        ready |= line.contains("Server is ready");
        waited |= wait_for.is_some_and(|w| line.contains(w));
        log.push(line);
    }
    // Keep draining the log in the background (the receiver is dropped: the thread discards).
    drop(rx);
    Ok((child, port.unwrap_or_default()))
}

/// A port free right now on 127.0.0.1 (for route ports, which peers must know in advance).
fn free_port() -> Result<u16, ServerError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| ServerError(format!("no free port: {e}")))
}

impl ServerNode {
    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again on the same ports and store.
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.kill();
        let mut args = self.args.clone();
        if let Some(i) = args.iter().position(|a| a == "-p") {
            args[i + 1] = self.port.to_string();
        }
        let (child, _) = spawn(&self.binary, &args, None)?;
        self.child = Some(child);
        Ok(())
    }

    /// The node's store directory.
    pub fn store_dir(&self) -> &Path {
        &self.store
    }
}

impl Drop for ServerNode {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}

fn store_dir(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    std::env::temp_dir().join(format!("transcript-nats-{}-{n}-{name}", std::process::id()))
}

/// One JetStream server on a port it picked.
pub fn single() -> Result<Option<ServerNode>, ServerError> {
    single_with(&[])
}

/// One JetStream server on a port it picked, with `extra` arguments (`--user`, `--pass`…).
pub fn single_with(extra: &[&str]) -> Result<Option<ServerNode>, ServerError> {
    let Some(binary) = server_binary()? else {
        return Ok(None);
    };
    let store = store_dir("single");
    let args: Vec<String> = ["-a", "127.0.0.1", "-p", "-1", "-js", "-n", "single", "-sd"]
        .iter()
        .map(ToString::to_string)
        .chain([store.display().to_string()])
        .chain(extra.iter().map(ToString::to_string))
        .collect();
    let (child, port) = spawn(&binary, &args, None)?;
    Ok(Some(ServerNode {
        binary,
        args,
        child: Some(child),
        port,
        cluster_port: None,
        name: "single".to_owned(),
        store,
    }))
}

/// A JetStream cluster of `size` nodes on loopback, each waiting until a metadata leader is
/// elected.
pub fn cluster(size: usize) -> Result<Option<Vec<ServerNode>>, ServerError> {
    cluster_with(&vec![Vec::new(); size])
}

/// A JetStream cluster of `extra.len()` nodes on loopback, node `i` started with the extra
/// arguments `extra[i]` (`-c server.conf`…), each waiting until a metadata leader is elected.
pub fn cluster_with(extra: &[Vec<String>]) -> Result<Option<Vec<ServerNode>>, ServerError> {
    let size = extra.len();
    let Some(binary) = server_binary()? else {
        return Ok(None);
    };
    let cluster_ports = (0..size)
        .map(|_| free_port())
        .collect::<Result<Vec<_>, _>>()?;
    let routes = cluster_ports
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let tag = format!("c{}", std::process::id());
    // Start all, then wait for each: the meta leader needs a quorum of them running.
    let mut started = Vec::new();
    for (i, cluster_port) in cluster_ports.iter().enumerate() {
        let name = format!("{tag}-n{i}");
        let store = store_dir(&name);
        let args: Vec<String> = [
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            "-1".into(),
            "-js".into(),
            "-n".into(),
            name.clone(),
            "-sd".into(),
            store.display().to_string(),
            "--cluster_name".into(),
            tag.clone(),
            "--cluster".into(),
            format!("nats://127.0.0.1:{cluster_port}"),
            "--routes".into(),
            routes.clone(),
        ]
        .into_iter()
        .chain(extra[i].iter().cloned())
        .collect();
        started.push((name, store, args, *cluster_port));
    }
    let handles: Vec<_> = started
        .into_iter()
        .map(|(name, store, args, cluster_port)| {
            let binary = binary.clone();
            std::thread::spawn(move || {
                spawn(&binary, &args, Some("metadata leader")).map(|(child, port)| ServerNode {
                    binary,
                    args,
                    child: Some(child),
                    port,
                    cluster_port: Some(cluster_port),
                    name,
                    store,
                })
            })
        })
        .collect();
    let mut nodes = Vec::new();
    let mut error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(node)) => nodes.push(node),
            Ok(Err(e)) => error = Some(e),
            Err(_) => error = Some(ServerError("a starter thread panicked".to_owned())),
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(Some(nodes)),
    }
}

/// The servers of `nodes` as a storage URL prefix: `nats://127.0.0.1:a,nats://127.0.0.1:b`.
pub fn urls(nodes: &[ServerNode]) -> String {
    nodes
        .iter()
        .map(ServerNode::url)
        .collect::<Vec<_>>()
        .join(",")
}

/// Connects to a freshly started server or cluster once it serves JetStream. A cluster whose
/// metadata leader was just elected may still answer JetStream requests with "temporarily
/// unavailable" or no responders for a moment: attempts are retried (50 ms apart) until
/// `deadline` has passed, then the last error is returned.
pub async fn connect_when_serving(
    url: &crate::StorageUrl,
    options: crate::StreamOptions,
    deadline: Duration,
) -> Result<crate::NatsStore, crate::NatsError> {
    let until = std::time::Instant::now() + deadline;
    loop {
        match crate::NatsStore::connect(url, options.clone()).await {
            Ok(store) => return Ok(store),
            Err(e) if std::time::Instant::now() >= until => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The names of every stream on the servers of `url` (sorted), read with a bare client: what
/// a test checks to see that a reader created nothing (the runs-index bucket is the stream
/// `KV_<STREAM>_RUNS`).
pub async fn stream_names(url: &str) -> Result<Vec<String>, ServerError> {
    use futures_util::StreamExt;
    let client = async_nats::connect(url)
        .await
        .map_err(|e| ServerError(format!("connecting to {url}: {e}")))?;
    let js = async_nats::jetstream::new(client);
    let mut names = Vec::new();
    let mut listed = js.stream_names();
    while let Some(name) = listed.next().await {
        names.push(name.map_err(|e| ServerError(format!("listing streams at {url}: {e}")))?);
    }
    names.sort();
    Ok(names)
}
