//! External plugins: a child process spoken to over NDJSON on stdio.
//!
//! # Protocol (version 1)
//!
//! One JSON object per line in each direction, UTF-8, `\n`-terminated. The
//! router sends one request at a time and waits for the response with the
//! same `id` (lines with another id, left over from a cancelled request, are
//! skipped).
//!
//! ```text
//! → {"id":1,"method":"describe"}
//! ← {"id":1,"result":{"name":"text","protocol":1,"operations":["upper","fail"],
//!      "parameters":{"upper":{"type":"object","properties":{"text":{"type":"string"}}}}}}
//! → {"id":2,"method":"call","operation":"upper","input":{"text":"hi"},"workspace":"/abs/ws"}
//! ← {"id":2,"result":"HI"}
//! ← {"id":3,"error":{"message":"boom"}}          (an error may also be a plain string)
//! ```
//!
//! `parameters` (optional, additive in version 1) maps operations to the
//! JSON Schema of their input, offered to models as the function's
//! parameters; an operation without one takes any object.
//!
//! The plugin is started once ([`ExternalPlugin::start`]) and lives as long
//! as the router holds it; it is killed when dropped. Its stderr is
//! inherited. A plugin that exits or writes a line that is not JSON fails
//! the call in flight with [`ToolError::Plugin`]; nothing of the plugin is
//! changed to capture its calls: the router records them at its seam.

use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::Mutex;

use crate::tools::{Plugin, ToolContext, ToolError};

struct Io {
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    _child: Child,
}

/// A plugin process (see the module docs for the protocol).
pub struct ExternalPlugin {
    name: String,
    operations: Vec<String>,
    parameters: serde_json::Map<String, Value>,
    io: Mutex<Io>,
}

impl std::fmt::Debug for ExternalPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalPlugin")
            .field("name", &self.name)
            .field("operations", &self.operations)
            .finish()
    }
}

impl ExternalPlugin {
    /// Starts `argv` in `cwd` and asks it to describe itself.
    pub async fn start(argv: &[String], cwd: Option<PathBuf>) -> Result<Self, ToolError> {
        let shown = argv.join(" ");
        let err = |message: String| ToolError::Plugin {
            plugin: shown.clone(),
            message,
        };
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| err("empty plugin command".into()))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().map_err(|e| err(format!("cannot start: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| err("no stdin pipe".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| err("no stdout pipe".into()))?;
        let mut io = Io {
            stdin,
            stdout: BufReader::new(stdout).lines(),
            next_id: 0,
            _child: child,
        };
        let described = exchange(&mut io, &shown, json!({"method": "describe"})).await?;
        let name = described
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&shown)
            .to_owned();
        let operations = described
            .get("operations")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .ok_or_else(|| err("describe: missing 'operations' list".into()))?;
        let parameters = match described.get("parameters") {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(err("describe: 'parameters' must be an object".into())),
        };
        Ok(Self {
            name,
            operations,
            parameters,
            io: Mutex::new(io),
        })
    }
}

async fn exchange(io: &mut Io, plugin: &str, mut request: Value) -> Result<Value, ToolError> {
    let err = |message: String| ToolError::Plugin {
        plugin: plugin.to_owned(),
        message,
    };
    io.next_id += 1;
    let id = io.next_id;
    if let Some(obj) = request.as_object_mut() {
        obj.insert("id".into(), json!(id));
    }
    let mut line = request.to_string();
    line.push('\n');
    io.stdin
        .write_all(line.as_bytes())
        .await
        .map_err(|e| err(format!("write failed: {e}")))?;
    io.stdin
        .flush()
        .await
        .map_err(|e| err(format!("flush failed: {e}")))?;
    loop {
        let line = io
            .stdout
            .next_line()
            .await
            .map_err(|e| err(format!("read failed: {e}")))?
            .ok_or_else(|| err("plugin exited".into()))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| err(format!("response is not JSON ({e}): {line:.200}")))?;
        if v.get("id").and_then(Value::as_u64) != Some(id) {
            continue; // a late answer to a cancelled request
        }
        if let Some(e) = v.get("error") {
            let message = e
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| e.as_str().map(str::to_owned))
                .unwrap_or_else(|| e.to_string());
            return Err(ToolError::Failed(message));
        }
        return Ok(v.get("result").cloned().unwrap_or(Value::Null));
    }
}

#[async_trait]
impl Plugin for ExternalPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn operations(&self) -> Vec<String> {
        self.operations.clone()
    }

    fn parameters(&self, operation: &str) -> Value {
        self.parameters
            .get(operation)
            .cloned()
            .unwrap_or_else(crate::tools::any_object)
    }

    async fn call(
        &self,
        operation: &str,
        ctx: &ToolContext,
        input: Value,
    ) -> Result<Value, ToolError> {
        let mut io = self.io.lock().await;
        exchange(
            &mut io,
            &self.name,
            json!({
                "method": "call",
                "operation": operation,
                "input": input,
                "workspace": ctx.workspace.display().to_string(),
            }),
        )
        .await
    }
}

/// Starts every plugin the workflow set declares (`plugins:`; each in its
/// workflow's directory) and registers it on `router`. Returns how many were
/// started.
pub async fn start_declared_plugins(
    set: &crate::workflow::WorkflowSet,
    router: &mut crate::tools::ToolRouter,
) -> Result<usize, ToolError> {
    let specs = set.plugins();
    for spec in &specs {
        let plugin = ExternalPlugin::start(&spec.argv, spec.cwd.clone()).await?;
        router.register_plugin(std::sync::Arc::new(plugin))?;
    }
    Ok(specs.len())
}
