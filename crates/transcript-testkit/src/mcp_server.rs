//! A tiny scripted MCP server of our own, speaking MCP's stdio transport (one JSON-RPC
//! message per line), whose tools are faults: the peer the MCP proxy's tests
//! (`crates/transcript-mcp`) start as a real child process.
//!
//! It is written at the byte level on purpose, like [`crate::model_server`]: a fault
//! injector must be able to break the protocol (a malformed result, a crash mid-call, an
//! answer that never comes), which an SDK would not let it do.
//!
//! Tools ([`TOOLS`]):
//! - `echo {text}`: answers `text` as a text block (and `{"echo": text}` as structured content);
//! - `fail {text}`: a tool error (`isError: true`) with `text`;
//! - `getenv {name}`: the value of environment variable `name` (empty text when unset);
//! - `big {bytes}`: a text block of `bytes` × `x`;
//! - `malformed`: a result whose `content` is a string, which no MCP client can decode;
//! - `garbage`: a line that is not JSON at all;
//! - `crash`: the process exits (status 70) without answering;
//! - `hang`: never answers (the process stays until it is killed).
//!
//! With `TRANSCRIPT_MCP_FAULT_LOG=<file>`, the name of every `tools/call` received is appended
//! to that file, one per line: the tests' proof of what reached the server. With
//! `TRANSCRIPT_MCP_FAULT_CHILD=1`, the server first starts a `sleep` child, which stays in the
//! server's process group (as the node an `npx` wrapper starts does), so tests can check that grandchildren end too; its
//! pid is appended to the log as `child <pid>`.

use std::io::{self, BufRead, Write};

use serde_json::{Value, json};

/// The server's tools, as `tools/list` shows them.
pub const TOOLS: &[&str] = &[
    "echo",
    "fail",
    "big",
    "malformed",
    "garbage",
    "crash",
    "hang",
];

/// Environment variable naming the call log file.
pub const LOG_ENV: &str = "TRANSCRIPT_MCP_FAULT_LOG";

/// Environment variable choosing a faulty `tools/list` (see `list_reply`): `endless` (every
/// page has a `nextCursor`), `huge:<bytes>` (one tool whose description is that many bytes),
/// `many:<n>` (`n` tools on one page), `hang` (no answer).
pub const LIST_ENV: &str = "TRANSCRIPT_MCP_FAULT_LIST";

/// Environment variable asking for a grandchild `sleep` process.
pub const CHILD_ENV: &str = "TRANSCRIPT_MCP_FAULT_CHILD";

fn log(line: &str) {
    let Some(path) = std::env::var_os(LOG_ENV) else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

fn tool(name: &str, description: &str, properties: Value) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties},
    })
}

fn tools_list() -> Value {
    json!({"tools": [
        tool("echo", "Echoes text", json!({"text": {"type": "string"}})),
        tool("fail", "Reports a tool error", json!({"text": {"type": "string"}})),
        tool("getenv", "Answers an environment variable", json!({"name": {"type": "string"}})),
        tool("big", "Answers `bytes` bytes", json!({"bytes": {"type": "integer"}})),
        tool("malformed", "Answers a result no client can decode", json!({})),
        tool("garbage", "Answers a line that is not JSON", json!({})),
        tool("crash", "Exits without answering", json!({})),
        tool("hang", "Never answers", json!({})),
    ]})
}

/// The answer to `tools/list` under the fault `mode` ([`LIST_ENV`]); `None`: the real list.
fn list_reply(params: &Value, mode: Option<&str>, ok: impl Fn(Value) -> Reply) -> Reply {
    let number = |prefix: &str| {
        mode.and_then(|m| m.strip_prefix(prefix))
            .and_then(|n| n.parse::<usize>().ok())
    };
    match mode {
        Some("endless") => {
            let page = params
                .get("cursor")
                .and_then(Value::as_str)
                .and_then(|c| c.parse::<u64>().ok())
                .unwrap_or(0);
            let mut list = tools_list();
            list["nextCursor"] = json!((page + 1).to_string());
            ok(list)
        }
        Some("hang") => Reply::Hang,
        Some(m) if m.starts_with("huge:") => {
            let mut list = tools_list();
            list["tools"][0]["description"] = json!("x".repeat(number("huge:").unwrap_or(0)));
            ok(list)
        }
        Some(m) if m.starts_with("many:") => {
            let tools: Vec<Value> = (0..number("many:").unwrap_or(0))
                .map(|i| tool(&format!("t{i}"), "One of many", json!({})))
                .collect();
            ok(json!({ "tools": tools }))
        }
        _ => ok(tools_list()),
    }
}

fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// What one request line asks the server to do.
enum Reply {
    /// Write this JSON-RPC message.
    Message(Value),
    /// Write this raw line.
    Raw(String),
    /// Write nothing (a notification).
    Nothing,
    /// Exit without answering.
    Crash,
    /// Never answer.
    Hang,
}

fn reply(request: &Value) -> Reply {
    let id = request.get("id").cloned();
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    let Some(id) = id else {
        return Reply::Nothing;
    };
    let ok = |result: Value| Reply::Message(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    match method {
        "initialize" => ok(json!({
            "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-06-18")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "transcript-testkit-fault", "version": "1.0.0"},
        })),
        "ping" => ok(json!({})),
        "tools/list" => list_reply(&params, std::env::var(LIST_ENV).ok().as_deref(), ok),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            log(name);
            let text = args
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            match name {
                "echo" => {
                    let mut r = text_result(&text, false);
                    r["structuredContent"] = json!({"echo": text});
                    ok(r)
                }
                "fail" => ok(text_result(&text, true)),
                "getenv" => {
                    let var = args.get("name").and_then(Value::as_str).unwrap_or("");
                    ok(text_result(&std::env::var(var).unwrap_or_default(), false))
                }
                "big" => {
                    let n = args.get("bytes").and_then(Value::as_u64).unwrap_or(0);
                    ok(text_result(
                        &"x".repeat(usize::try_from(n).unwrap_or(0)),
                        false,
                    ))
                }
                "malformed" => ok(json!({"content": "not an array", "isError": "maybe"})),
                "garbage" => Reply::Raw("this is not JSON {".into()),
                "crash" => Reply::Crash,
                "hang" => Reply::Hang,
                other => ok(text_result(&format!("unknown tool {other}"), true)),
            }
        }
        _ => Reply::Message(json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": format!("method not found: {method}")},
        })),
    }
}

/// Serves MCP on `input` / `output` until `input` ends. `crash` exits the process (status
/// 70); `hang` blocks this thread forever.
pub fn serve(input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    if std::env::var_os(CHILD_ENV).is_some() {
        let child = std::process::Command::new("sleep").arg("1000").spawn()?;
        log(&format!("child {}", child.id()));
    }
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match reply(&request) {
            Reply::Message(m) => writeln!(output, "{m}")?,
            Reply::Raw(raw) => writeln!(output, "{raw}")?,
            Reply::Nothing => continue,
            Reply::Crash => std::process::exit(70),
            Reply::Hang => loop {
                std::thread::park();
            },
        }
        output.flush()?;
    }
    Ok(())
}

/// [`serve`] on the process's stdin / stdout: the `main` of a fault server binary.
pub fn serve_stdio() -> io::Result<()> {
    serve(io::stdin().lock(), io::stdout().lock())
}
