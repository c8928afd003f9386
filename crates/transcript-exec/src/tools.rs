//! The tools router: one [`ToolRouter::call_tool`] seam for operation steps
//! and agents, builtin tools confined to the run's workspace, and plugins
//! (Rust [`Plugin`]s and external NDJSON plugins, see [`crate::plugin`]).
//!
//! Every call emits `tool.call` (output `null`) before the tool runs and
//! `tool.result` (input `null`, decision 6) after it, with the same
//! `call_id`, fidelity `router`, at the path and iteration of the calling
//! step (decision 5). Tools are never modified to be observed: capture
//! happens at this boundary (NFR-003).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{Fidelity, Payload, RawJson, ToolPayload};

use crate::emit::Emitter;

/// Why a tool call failed. Recorded in `tool.result.error`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool is registered under this name.
    #[error("unknown tool '{0}'")]
    UnknownTool(String),
    /// The input does not fit the tool.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A file tool's path does not resolve to an entry inside the
    /// workspace: it points outside (symlinks included) or does not exist.
    /// Both get the same answer, so a model cannot probe what exists
    /// outside the workspace.
    #[error("path '{0}' is outside the workspace or does not exist")]
    PathEscapes(String),
    /// A file system operation failed.
    #[error("{op} '{path}': {message}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The path as given.
        path: String,
        /// The OS error.
        message: String,
    },
    /// A command exited unsuccessfully; its output is still recorded.
    #[error("command exited with code {exit_code}")]
    CommandFailed {
        /// Exit code (-1 when killed by a signal).
        exit_code: i64,
        /// What the command printed (`stdout`, `stderr`, `exit_code`).
        output: Value,
    },
    /// The tool reported a failure.
    #[error("{0}")]
    Failed(String),
    /// A plugin broke its protocol or died.
    #[error("plugin '{plugin}': {message}")]
    Plugin {
        /// The plugin name.
        plugin: String,
        /// What went wrong.
        message: String,
    },
    /// An agent asked for a tool its step does not offer (unknown tools
    /// included); nothing ran.
    #[error("tool '{tool}' is not offered to this step (offered: {})", if offered.is_empty() { "none".to_owned() } else { offered.join(", ") })]
    NotOffered {
        /// The tool the agent named.
        tool: String,
        /// The step's `tools:` list.
        offered: Vec<String>,
    },
    /// The call was cancelled (run cancelled or step timed out).
    #[error("cancelled")]
    Cancelled,
    /// The tool panicked (caught at the router).
    #[error("tool panicked: {0}")]
    Panicked(String),
}

impl ToolError {
    /// Output recorded alongside the error in `tool.result` (`null` if none).
    pub fn output(&self) -> Value {
        match self {
            ToolError::CommandFailed { output, .. } => output.clone(),
            _ => Value::Null,
        }
    }
}

/// What a tool sees of the call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The run's workspace (canonical).
    pub workspace: PathBuf,
    /// Cancelled when the run is cancelled or the step times out.
    pub cancel: CancellationToken,
    /// The call's correlation id.
    pub call_id: String,
}

/// A tool callable through the router.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The JSON Schema of the tool's input, offered to models as the
    /// function's parameters (default: any object).
    fn parameters(&self) -> Value {
        any_object()
    }

    /// Runs the tool.
    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError>;
}

/// A Rust plugin: a named bundle of operations.
#[async_trait]
pub trait Plugin: Send + Sync {
    /// The plugin's name (errors, logs).
    fn name(&self) -> &str;
    /// The operations it offers; each becomes a router tool of that name.
    fn operations(&self) -> Vec<String>;
    /// The JSON Schema of `operation`'s input (default: any object).
    fn parameters(&self, operation: &str) -> Value {
        let _ = operation;
        any_object()
    }
    /// Runs `operation`.
    async fn call(
        &self,
        operation: &str,
        ctx: &ToolContext,
        input: Value,
    ) -> Result<Value, ToolError>;
}

struct PluginTool {
    plugin: Arc<dyn Plugin>,
    operation: String,
}

/// The schema of a tool that declares none: any JSON object.
pub fn any_object() -> Value {
    json!({"type": "object"})
}

#[async_trait]
impl Tool for PluginTool {
    fn parameters(&self) -> Value {
        self.plugin.parameters(&self.operation)
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        self.plugin.call(&self.operation, ctx, input).await
    }
}

/// Where a call happens: the run's emitter, the calling step's location
/// and workspace, and the cancellation of the step.
#[derive(Debug, Clone)]
pub struct CallScope {
    /// The run's transcript emitter.
    pub emitter: Emitter,
    /// Path of the step during which the tool runs (decision 5).
    pub path: String,
    /// Its iteration.
    pub iteration: u64,
    /// The run's workspace directory.
    pub workspace: PathBuf,
    /// Cancellation of the calling step.
    pub cancel: CancellationToken,
    /// Counter for router-generated call ids (shared per run).
    pub call_counter: Arc<AtomicU64>,
}

impl CallScope {
    /// A scope with a fresh call counter.
    pub fn new(
        emitter: Emitter,
        path: impl Into<String>,
        iteration: u64,
        workspace: PathBuf,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            emitter,
            path: path.into(),
            iteration,
            workspace,
            cancel,
            call_counter: Arc::default(),
        }
    }

    fn next_call_id(&self) -> String {
        let n = self.call_counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("router-{n}")
    }
}

/// The tools router.
#[derive(Clone, Default)]
pub struct ToolRouter {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRouter")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRouter {
    /// A router without tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// A router with the builtin tools `read_file`, `write_file`,
    /// `list_dir` and `run_command`.
    pub fn with_builtins() -> Self {
        let mut r = Self::new();
        r.register("read_file", Arc::new(ReadFile));
        r.register("write_file", Arc::new(WriteFile));
        r.register("list_dir", Arc::new(ListDir));
        r.register(SHELL_TOOL, Arc::new(RunCommand));
        r
    }

    /// Registers (or replaces) a tool.
    pub fn register(&mut self, name: impl Into<String>, tool: Arc<dyn Tool>) {
        self.tools.insert(name.into(), tool);
    }

    /// Registers each operation of a plugin as a tool of the same name.
    /// Fails without registering anything if a name is already taken.
    pub fn register_plugin(&mut self, plugin: Arc<dyn Plugin>) -> Result<(), ToolError> {
        let ops = plugin.operations();
        if let Some(taken) = ops.iter().find(|op| self.tools.contains_key(*op)) {
            return Err(ToolError::Plugin {
                plugin: plugin.name().to_owned(),
                message: format!("operation '{taken}' is already a registered tool"),
            });
        }
        for op in ops {
            self.tools.insert(
                op.clone(),
                Arc::new(PluginTool {
                    plugin: plugin.clone(),
                    operation: op,
                }),
            );
        }
        Ok(())
    }

    /// Whether `name` is registered.
    pub fn has(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// The input schema of tool `name`, if registered.
    pub fn parameters(&self, name: &str) -> Option<Value> {
        self.tools.get(name).map(|t| t.parameters())
    }

    /// Registered tool names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// The seam: emits `tool.call`, runs the tool (panics caught,
    /// cancellation observed), emits `tool.result`. `call_id` is the
    /// model's id for agent-driven calls, else the router generates one.
    pub async fn call_tool(
        &self,
        scope: &CallScope,
        name: &str,
        input: Value,
        call_id: Option<String>,
    ) -> Result<Value, ToolError> {
        let gate = Gate {
            refuse: None,
            record_call: true,
            record_result: &|| true,
        };
        self.call_tool_gated(scope, name, input, call_id, gate)
            .await
    }

    /// [`ToolRouter::call_tool`] with the agent seam's controls: a refusal
    /// recorded in place of running the tool, and whether the call and the
    /// result are still to be recorded (another report may have claimed the
    /// call id first).
    pub(crate) async fn call_tool_gated(
        &self,
        scope: &CallScope,
        name: &str,
        input: Value,
        call_id: Option<String>,
        gate: Gate<'_>,
    ) -> Result<Value, ToolError> {
        let call_id = call_id.unwrap_or_else(|| scope.next_call_id());
        if gate.record_call {
            scope
                .emitter
                .emit(&scope.path, scope.iteration, || {
                    Payload::ToolCall(ToolPayload::call(
                        name,
                        call_id.clone(),
                        RawJson::from_value(&input).unwrap_or_default(),
                        Fidelity::Router,
                    ))
                })
                .await;
        }
        let result = match (gate.refuse, self.tools.get(name)) {
            (Some(refusal), _) => Err(refusal),
            (None, None) => Err(ToolError::UnknownTool(name.to_owned())),
            (None, Some(tool)) => {
                let ctx = ToolContext {
                    workspace: scope.workspace.clone(),
                    cancel: scope.cancel.clone(),
                    call_id: call_id.clone(),
                };
                let fut = CatchUnwind::new(tool.call(&ctx, input));
                tokio::select! {
                    r = fut => r.unwrap_or_else(|p| Err(ToolError::Panicked(p))),
                    _ = scope.cancel.cancelled() => Err(ToolError::Cancelled),
                }
            }
        };
        if !(gate.record_result)() {
            return result;
        }
        scope
            .emitter
            .emit(&scope.path, scope.iteration, || {
                let (output, error) = match &result {
                    Ok(v) => (RawJson::from_value(v).unwrap_or_default(), None),
                    Err(e) => (
                        RawJson::from_value(&e.output()).unwrap_or_default(),
                        Some(e.to_string()),
                    ),
                };
                Payload::ToolResult(ToolPayload::result(
                    name,
                    call_id.clone(),
                    output,
                    error,
                    Fidelity::Router,
                ))
            })
            .await;
        result
    }
}

/// How [`ToolRouter::call_tool_gated`] records and whether it runs.
pub(crate) struct Gate<'a> {
    /// Record this error instead of running the tool.
    pub(crate) refuse: Option<ToolError>,
    /// Record `tool.call`.
    pub(crate) record_call: bool,
    /// Asked once the tool finished: record `tool.result`?
    pub(crate) record_result: &'a (dyn Fn() -> bool + Send + Sync),
}

/// Polls a future inside `catch_unwind`, turning a panic into `Err(message)`.
pub(crate) struct CatchUnwind<'a, T> {
    inner: Pin<Box<dyn Future<Output = T> + Send + 'a>>,
}

impl<'a, T> CatchUnwind<'a, T> {
    pub(crate) fn new(fut: impl Future<Output = T> + Send + 'a) -> Self {
        Self {
            inner: Box::pin(fut),
        }
    }
}

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.inner;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

// ------------------------------------------------------------ workspace paths

/// Resolves `requested` inside `workspace` (canonical) for reading an
/// existing entry: the canonical target (symlinks resolved) must lie inside.
/// A missing entry and one outside get the same [`ToolError::PathEscapes`]:
/// telling them apart would reveal what exists outside the workspace.
pub fn resolve_existing(workspace: &Path, requested: &str) -> Result<PathBuf, ToolError> {
    let joined = workspace.join(requested);
    let canonical = joined
        .canonicalize()
        .map_err(|_| ToolError::PathEscapes(requested.to_owned()))?;
    if canonical.starts_with(workspace) {
        Ok(canonical)
    } else {
        Err(ToolError::PathEscapes(requested.to_owned()))
    }
}

/// Resolves `requested` for writing: the parent must exist inside the
/// workspace, the name must be a plain file name, and an existing entry
/// (a symlink in particular) must resolve inside the workspace too.
pub fn resolve_for_write(workspace: &Path, requested: &str) -> Result<PathBuf, ToolError> {
    let rel = Path::new(requested);
    let Some(Component::Normal(file_name)) = rel.components().next_back() else {
        return Err(ToolError::InvalidInput(format!(
            "'{requested}' does not name a file"
        )));
    };
    let parent_rel = rel.parent().unwrap_or(Path::new(""));
    let parent = if parent_rel.as_os_str().is_empty() {
        workspace.to_path_buf()
    } else {
        resolve_existing(workspace, &parent_rel.to_string_lossy()).map_err(|e| match e {
            ToolError::PathEscapes(_) => ToolError::PathEscapes(requested.to_owned()),
            other => other,
        })?
    };
    if !parent.starts_with(workspace) {
        return Err(ToolError::PathEscapes(requested.to_owned()));
    }
    let target = parent.join(file_name);
    if std::fs::symlink_metadata(&target).is_ok() {
        // Existing entry: follow it (a symlink pointing out is refused).
        let canonical = target.canonicalize().map_err(|_| {
            // A dangling symlink: refuse rather than create its target.
            ToolError::PathEscapes(requested.to_owned())
        })?;
        if !canonical.starts_with(workspace) {
            return Err(ToolError::PathEscapes(requested.to_owned()));
        }
        return Ok(canonical);
    }
    Ok(target)
}

fn str_field<'a>(input: &'a Value, field: &str) -> Result<&'a str, ToolError> {
    input
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidInput(format!("missing string field '{field}'")))
}

fn io_err(op: &'static str, path: &str, e: std::io::Error) -> ToolError {
    ToolError::Io {
        op,
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// `read_file {path}` → the file's text.
#[derive(Debug)]
pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "A file path relative to the workspace."}},
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let path = str_field(&input, "path")?;
        let resolved = resolve_existing(&ctx.workspace, path)?;
        let text = tokio::fs::read_to_string(&resolved)
            .await
            .map_err(|e| io_err("read", path, e))?;
        Ok(Value::String(text))
    }
}

/// `write_file {path, content}` → `{"bytes": n}` (non-string content is
/// written as its JSON text).
#[derive(Debug)]
pub struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "A file path relative to the workspace; its directory must exist."},
                "content": {"type": "string", "description": "The text to write (replaces the file)."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let path = str_field(&input, "path")?;
        // A single-reference template may have rendered a number or an
        // object; write its text form rather than refusing it.
        let content = match input.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => {
                return Err(ToolError::InvalidInput("missing field 'content'".into()));
            }
            Some(other) => crate::template::value_to_text(other),
        };
        let resolved = resolve_for_write(&ctx.workspace, path)?;
        tokio::fs::write(&resolved, &content)
            .await
            .map_err(|e| io_err("write", path, e))?;
        Ok(json!({ "bytes": content.len() }))
    }
}

/// `list_dir {path?}` → sorted entry names (directories end with `/`).
#[derive(Debug)]
pub struct ListDir;

#[async_trait]
impl Tool for ListDir {
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "A directory relative to the workspace (default '.')."}},
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let path = input.get("path").and_then(Value::as_str).unwrap_or(".");
        let resolved = resolve_existing(&ctx.workspace, path)?;
        let mut entries = tokio::fs::read_dir(&resolved)
            .await
            .map_err(|e| io_err("list", path, e))?;
        let mut names = Vec::new();
        while let Some(entry) = entries
            .next_entry()
            .await
            .map_err(|e| io_err("list", path, e))?
        {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().await.map(|t| t.is_dir()).unwrap_or(false) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok(json!(names))
    }
}

/// The builtin tool that runs shell commands.
pub const SHELL_TOOL: &str = "run_command";

/// `run_command {command}` → `{stdout, stderr, exit_code}`; a string runs
/// with `sh -c`, a list of strings as an argv without a shell, in the
/// workspace; a non-zero exit is an error that keeps the output.
#[derive(Debug)]
pub struct RunCommand;

#[async_trait]
impl Tool for RunCommand {
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"command": {
                "description": "A shell command (sh -c) or a program and its arguments (no shell).",
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1}
                ]
            }},
            "required": ["command"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let out = match input.get("command") {
            Some(Value::String(command)) => run_shell(command, &ctx.workspace, &ctx.cancel).await?,
            Some(Value::Array(items)) => {
                let argv = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        ToolError::InvalidInput("'command' list must hold strings".into())
                    })?;
                run_argv(&argv, &ctx.workspace, &ctx.cancel).await?
            }
            _ => {
                return Err(ToolError::InvalidInput(
                    "missing field 'command' (a string or a list of strings)".into(),
                ));
            }
        };
        let value = json!({
            "stdout": out.stdout,
            "stderr": out.stderr,
            "exit_code": out.exit_code,
        });
        if out.exit_code == 0 {
            Ok(value)
        } else {
            Err(ToolError::CommandFailed {
                exit_code: out.exit_code,
                output: value,
            })
        }
    }
}

/// What a shell command printed.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellOutput {
    /// Standard output (lossy UTF-8).
    pub stdout: String,
    /// Standard error (lossy UTF-8).
    pub stderr: String,
    /// Exit code (-1 when killed by a signal).
    pub exit_code: i64,
}

/// Runs `sh -c command` in `cwd`, killing it on cancellation.
pub async fn run_shell(
    command: &str,
    cwd: &Path,
    cancel: &CancellationToken,
) -> Result<ShellOutput, ToolError> {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c").arg(command);
    run_process(cmd, "sh", cwd, cancel).await
}

/// Runs `argv` (program, then arguments) in `cwd` without a shell, killing
/// it on cancellation. A relative program path with a `/` is taken relative
/// to `cwd`; a bare name is looked up in `PATH`.
pub async fn run_argv(
    argv: &[String],
    cwd: &Path,
    cancel: &CancellationToken,
) -> Result<ShellOutput, ToolError> {
    let Some((program, args)) = argv.split_first().filter(|(p, _)| !p.is_empty()) else {
        return Err(ToolError::InvalidInput("empty command".into()));
    };
    let path = Path::new(program);
    let resolved = if path.is_relative() && program.contains('/') {
        cwd.join(path)
    } else {
        path.to_path_buf()
    };
    let mut cmd = tokio::process::Command::new(resolved);
    cmd.args(args);
    run_process(cmd, program, cwd, cancel).await
}

async fn run_process(
    mut cmd: tokio::process::Command,
    program: &str,
    cwd: &Path,
    cancel: &CancellationToken,
) -> Result<ShellOutput, ToolError> {
    let child = cmd
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolError::Failed(format!("cannot start {program}: {e}")))?;
    tokio::select! {
        out = child.wait_with_output() => {
            let out = out.map_err(|e| ToolError::Failed(format!("command failed: {e}")))?;
            Ok(ShellOutput {
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                exit_code: out.status.code().map(i64::from).unwrap_or(-1),
            })
        }
        // Dropping the wait future drops the child, which kills it.
        _ = cancel.cancelled() => Err(ToolError::Cancelled),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn path_checks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::write(ws.join("a.txt"), "x").unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        assert!(resolve_existing(&ws, "a.txt").is_ok());
        assert!(resolve_existing(&ws, "sub/../a.txt").is_ok());
        assert_eq!(
            resolve_existing(&ws, "../").unwrap_err(),
            ToolError::PathEscapes("../".into())
        );
        assert!(matches!(
            resolve_existing(&ws, "/etc/hostname"),
            Err(ToolError::PathEscapes(_) | ToolError::Io { .. })
        ));
        assert!(resolve_for_write(&ws, "new.txt").is_ok());
        assert!(resolve_for_write(&ws, "sub/new.txt").is_ok());
        assert!(matches!(
            resolve_for_write(&ws, "../out.txt"),
            Err(ToolError::InvalidInput(_) | ToolError::PathEscapes(_))
        ));
        assert!(matches!(
            resolve_for_write(&ws, "sub/.."),
            Err(ToolError::InvalidInput(_))
        ));
        std::os::unix::fs::symlink("/tmp", ws.join("out")).unwrap();
        assert_eq!(
            resolve_for_write(&ws, "out/x").unwrap_err(),
            ToolError::PathEscapes("out/x".into())
        );
        std::os::unix::fs::symlink("/etc/hostname", ws.join("link")).unwrap();
        assert_eq!(
            resolve_for_write(&ws, "link").unwrap_err(),
            ToolError::PathEscapes("link".into())
        );
        assert_eq!(
            resolve_existing(&ws, "link").unwrap_err(),
            ToolError::PathEscapes("link".into())
        );
        std::os::unix::fs::symlink(ws.join("nowhere"), ws.join("dangling")).unwrap();
        assert!(resolve_for_write(&ws, "dangling").is_err());
    }
}
