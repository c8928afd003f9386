//! Shared test support: an in-memory recorder, the fault server's path, a downstream MCP
//! client (the test plays the agent CLI), and OS checks for surviving processes.
#![allow(dead_code, missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use transcript_domain::{
    EventDraft, ExchangeEvent, Payload, RecordError, Recorder, RunId, Seq, Subscription, Timestamp,
    ToolPayload,
};
use transcript_mcp::{Endpoint, McpServer, ProxyEndpoints, RecordTarget, Upstream};

/// Keeps every draft; `fail` makes every write fail (a full disk).
#[derive(Default)]
pub struct MemRecorder {
    pub drafts: Mutex<Vec<EventDraft>>,
    pub fail: bool,
    pub written: tokio::sync::Notify,
}

#[async_trait]
impl Recorder for MemRecorder {
    fn run_id(&self) -> RunId {
        RunId::parse("00000000-0000-4000-8000-000000000001").expect("valid id")
    }
    fn parent_run_id(&self) -> Option<RunId> {
        None
    }
    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        if self.fail {
            return Err(RecordError::Storage {
                path: "mem".into(),
                message: "disk full".into(),
                source: None,
            });
        }
        let n = {
            let mut d = self.drafts.lock().unwrap();
            d.push(draft);
            d.len() as u64
        };
        self.written.notify_waiters();
        Ok(n)
    }
    async fn subscribe(&self, _from: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Err(RecordError::Closed)
    }
    async fn close(&self) -> Result<(), RecordError> {
        Ok(())
    }
}

impl MemRecorder {
    /// Waits until at least `n` events are recorded.
    pub async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.written.notified();
            if self.drafts.lock().unwrap().len() >= n {
                return;
            }
            notified.await;
        }
    }

    /// The recorded tool payloads, in order, as (event type, payload).
    pub fn tools(&self) -> Vec<(&'static str, ToolPayload)> {
        self.drafts
            .lock()
            .unwrap()
            .iter()
            .filter_map(|d| match &d.payload {
                Payload::ToolCall(p) => Some(("tool.call", p.clone())),
                Payload::ToolResult(p) => Some(("tool.result", p.clone())),
                _ => None,
            })
            .collect()
    }

    /// The recorded drafts as events (seq in order), for the correlation functions.
    pub fn events(&self) -> Vec<ExchangeEvent> {
        let ts = Timestamp::parse("2026-01-01T00:00:00.000Z").expect("ts");
        self.drafts
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, d)| d.into_event(i as u64 + 1, self.run_id(), None, ts))
            .collect()
    }
}

pub fn target(recorder: Arc<MemRecorder>) -> RecordTarget {
    RecordTarget {
        recorder,
        path: "agent".into(),
        iteration: 0,
        call_id_prefix: "agent#0".into(),
    }
}

/// The fault server binary (`examples/fault_server.rs`), built by `cargo test -p
/// transcript-mcp` and `cargo test --workspace`; `cargo test --test proxy` alone does not
/// rebuild it (run `cargo build -p transcript-mcp --examples` after changing the testkit).
/// `TRANSCRIPT_MCP_FAULT_SERVER` names it instead where the examples live elsewhere
/// (`cargo xtask coverage`: cargo-llvm-cov builds test targets only).
pub fn fault_server_path() -> PathBuf {
    if let Some(path) = std::env::var_os("TRANSCRIPT_MCP_FAULT_SERVER") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join("examples").join("fault_server");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p transcript-mcp`, which builds the examples",
        path.display()
    );
    path
}

pub fn fault_server(name: &str, env: &[(&str, &str)]) -> McpServer {
    McpServer {
        name: name.into(),
        upstream: Upstream::Stdio {
            command: fault_server_path().to_string_lossy().into_owned(),
            args: vec![],
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        },
    }
}

pub type Client = RunningService<RoleClient, ()>;

/// Connects to one endpoint as the agent CLI would, with the secret header.
pub async fn connect(endpoints: &ProxyEndpoints, server: &str) -> Client {
    let Endpoint { url, .. } = endpoints
        .endpoints
        .iter()
        .find(|e| e.server == server)
        .expect("endpoint")
        .clone();
    let mut headers = std::collections::HashMap::new();
    headers.insert(
        http::HeaderName::try_from(endpoints.secret_header.as_str()).unwrap(),
        http::HeaderValue::try_from(endpoints.secret.as_str()).unwrap(),
    );
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    let transport = StreamableHttpClientTransport::with_client(http_client(), config);
    ().serve(transport).await.expect("downstream initialize")
}

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("the proxy answers every call")
}

pub fn text_of(result: &CallToolResult) -> String {
    let v = serde_json::to_value(result).unwrap();
    v["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a process with this pid exists and is not a zombie (the OS's word, /proc).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // state is the field after the ")" that closes the command name
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some(Some('Z')) | Some(Some('X')))
        }
    }
}

/// Whether the process `pid` can never run its own code again (the kernel's word, /proc): it
/// is gone or a zombie, or it is exiting (`PF_EXITING` in `stat`'s flags), or a `SIGKILL`
/// is pending for it (`SigPnd`/`ShdPnd` in `status`). A group SIGKILL is queued by `kill`;
/// the target dies when it is next scheduled, which on a loaded machine is a little later.
pub fn doomed(pid: u32) -> bool {
    const PF_EXITING: u64 = 0x4;
    const SIGKILL_BIT: u64 = 1 << (9 - 1);
    if !alive(pid) {
        return true;
    }
    let exiting = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // Fields after the ")" that closes the command name: state is the 3rd field of
            // the line, flags the 9th, so the 1st and 7th after it.
            let rest = stat.rsplit_once(')')?.1.to_owned();
            rest.split_whitespace().nth(6)?.parse::<u64>().ok()
        })
        .is_some_and(|flags| flags & PF_EXITING != 0);
    let killed = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            l.strip_prefix("SigPnd:")
                .or_else(|| l.strip_prefix("ShdPnd:"))
        })
        .filter_map(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .any(|mask| mask & SIGKILL_BIT != 0);
    // Gone between the two reads counts too.
    exiting || killed || !alive(pid)
}

/// Every live process whose process group is `pgid` (from /proc).
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // fields[0] = state, [1] = ppid, [2] = pgrp
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
            && !matches!(fields.first(), Some(&"Z") | Some(&"X"))
        {
            out.push(pid);
        }
    }
    out
}

/// The log the fault server appends each received call to.
pub fn read_log(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A reqwest client (the workspace's reqwest has no default crypto provider).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().expect("client")
}
