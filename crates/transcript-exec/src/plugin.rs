//! External plugins: a child process spoken to over NDJSON on stdio.
//!
//! # Protocol (version 1)
//!
//! One JSON object per line in each direction, UTF-8, `\n`-terminated. The
//! router sends one request at a time and waits for the response with the
//! same `id` (lines with another id, left over from a cancelled request, are
//! skipped). A cancelled call stops waiting for its response but never
//! leaves half a line behind: the request is written whole, and a response
//! line read in part is finished by the next call.
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
//! inherited, or, when started with a text mask
//! ([`ExternalPlugin::start_masked`], what `run --redact` does), piped and
//! copied to ours line by line, each line masked together with the lines
//! before it (a PEM body or a folded key's continuation is recognisable
//! only after its first line); a line whose masking would change what was
//! already printed is withheld. The copy runs on a thread of its own and,
//! when the plugin is dropped (and killed), is waited for up to
//! [`PluginLimits::stderr_drain`] so a line written before the plugin's last
//! answer still reaches our stderr. A plugin that exits or writes a line that is not JSON fails
//! the call in flight with [`ToolError::Plugin`]; nothing of the plugin is
//! changed to capture its calls: the router records them at its seam.
//!
//! # Limits (#28)
//!
//! * `describe` must announce `"protocol": 1` ([`PROTOCOL_VERSION`]); a
//!   plugin announcing another version, or none, is refused at start.
//! * The `describe` handshake has a deadline
//!   ([`PluginLimits::describe_timeout`], default 10 s): a plugin that
//!   never answers is killed and refused, rather than hanging the run
//!   before it starts.
//! * A line from the plugin is read up to [`PluginLimits::max_line_bytes`]
//!   (default 16 MiB, [`DEFAULT_MAX_LINE_BYTES`]): a longer one fails the
//!   call in flight without being buffered whole, and the plugin is then
//!   unusable (its stream is out of step): every later call fails at once
//!   with the same reason.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::audit::TextMask;
use crate::tools::{Plugin, ToolContext, ToolError};

/// The protocol version this runner speaks; `describe` must announce it.
pub const PROTOCOL_VERSION: u64 = 1;

/// Default cap of one line from a plugin (16 MiB).
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 20;

/// Bounds on what a plugin may make the runner wait for or buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimits {
    /// How long `describe` may take (default 10 s).
    pub describe_timeout: Duration,
    /// Longest line read from the plugin, newline excluded (default 16 MiB).
    pub max_line_bytes: usize,
    /// How long, when the plugin is dropped (and killed), the copy of its
    /// masked stderr may take to reach the end of what the plugin wrote
    /// (default 2 s; a grandchild holding the pipe open is not waited for
    /// longer).
    pub stderr_drain: Duration,
    /// Variables of the runner's environment the plugin does not inherit (default none; see
    /// [`crate::withheld_env`]).
    pub withheld_env: crate::WithheldEnv,
    /// The kernel confinement of the plugin process and all it starts (#56, see
    /// [`crate::sandbox`]); `None`: unconfined (the default here; `transcript run` confines
    /// its plugins to the workspace unless `--sandbox off`).
    pub confinement: Option<crate::sandbox::Confinement>,
    /// The network of the plugin process and all it starts (#57, see
    /// [`crate::sandbox::net`]); `None`: the host's (the default here; `transcript run`
    /// bounds its plugins by their workflow's `defaults: { network: … }`).
    pub network: Option<crate::sandbox::net::NetBounds>,
}

impl PluginLimits {
    /// The default limits, the plugin started without `withheld` ([`Self::withheld_env`]).
    pub fn withholding(withheld: crate::WithheldEnv) -> Self {
        Self {
            withheld_env: withheld,
            ..Self::default()
        }
    }
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            describe_timeout: Duration::from_secs(10),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            stderr_drain: Duration::from_secs(2),
            withheld_env: crate::WithheldEnv::default(),
            confinement: None,
            network: None,
        }
    }
}

struct Io {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    max_line_bytes: usize,
    /// Set once the stream is out of step (an over-long line): every later
    /// call fails with it.
    broken: Option<String>,
    /// The part of a line read so far: kept here, not in the reading
    /// future, so a read given up on cancellation loses no byte.
    partial: Vec<u8>,
    /// True while a request is being written: still true at the next call
    /// when the write was abandoned mid-line, which leaves the stream out
    /// of step.
    writing: bool,
    /// Signalled (or disconnected) once the masked stderr copy has reached
    /// the end of the plugin's stderr; `None` when stderr is inherited.
    stderr_done: Option<mpsc::Receiver<()>>,
    stderr_drain: Duration,
    child: Child,
    /// A confined plugin's private temporary directory, removed with it.
    _tmp: Option<crate::sandbox::PrivateTmp>,
}

impl Drop for Io {
    /// Kills the plugin, then waits (at most [`PluginLimits::stderr_drain`])
    /// for its masked stderr to be copied to the end: a line the plugin
    /// wrote before it answered is never lost because the run ended first.
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if let Some(done) = self.stderr_done.take() {
            let _ = done.recv_timeout(self.stderr_drain);
        }
    }
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
    /// Starts `argv` in `cwd` and asks it to describe itself (default
    /// [`PluginLimits`]).
    pub async fn start(argv: &[String], cwd: Option<PathBuf>) -> Result<Self, ToolError> {
        Self::start_with(argv, cwd, PluginLimits::default()).await
    }

    /// [`ExternalPlugin::start`] with explicit limits.
    pub async fn start_with(
        argv: &[String],
        cwd: Option<PathBuf>,
        limits: PluginLimits,
    ) -> Result<Self, ToolError> {
        Self::start_masked_with(argv, cwd, limits, None).await
    }

    /// [`ExternalPlugin::start`], its stderr passed through `mask` when
    /// given (see the module docs).
    pub async fn start_masked(
        argv: &[String],
        cwd: Option<PathBuf>,
        mask: Option<Arc<dyn TextMask>>,
    ) -> Result<Self, ToolError> {
        Self::start_masked_with(argv, cwd, PluginLimits::default(), mask).await
    }

    /// [`ExternalPlugin::start_masked`] with explicit limits.
    pub async fn start_masked_with(
        argv: &[String],
        cwd: Option<PathBuf>,
        limits: PluginLimits,
        mask: Option<Arc<dyn TextMask>>,
    ) -> Result<Self, ToolError> {
        let shown = argv.join(" ");
        let err = |message: String| ToolError::Plugin {
            plugin: shown.clone(),
            message,
        };
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| err("empty plugin command".into()))?;
        let mut cmd = crate::sandbox::net::command(program, limits.network.as_ref());
        limits.withheld_env.apply(&mut cmd);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if mask.is_some() {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .kill_on_drop(true);
        if let Some(cwd) = &cwd {
            cmd.current_dir(cwd);
        }
        // Confined, a plugin reads what its literal command line names.
        let confinement = (limits.confinement.clone()).map(|c| c.for_plugin(cwd.as_deref(), args));
        let (mut child, tmp) =
            crate::sandbox::spawn_bounded(&mut cmd, confinement.as_ref(), limits.network.as_ref())
                .map_err(|e| err(format!("cannot start: {e}")))?;
        let stderr_done = match (mask, child.stderr.take()) {
            (Some(mask), Some(stderr)) => Some(
                spawn_masked_copy(stderr, mask)
                    .map_err(|e| err(format!("cannot copy stderr: {e}")))?,
            ),
            _ => None,
        };
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
            stdout: BufReader::new(stdout),
            next_id: 0,
            max_line_bytes: limits.max_line_bytes,
            broken: None,
            partial: Vec::new(),
            writing: false,
            stderr_done,
            stderr_drain: limits.stderr_drain,
            child,
            _tmp: tmp,
        };
        // A plugin that never answers is dropped (and so killed) here.
        let described = tokio::time::timeout(
            limits.describe_timeout,
            exchange(&mut io, &shown, json!({"method": "describe"})),
        )
        .await
        .map_err(|_| {
            err(format!(
                "describe: no answer within {:?}",
                limits.describe_timeout
            ))
        })??;
        Self::from_description(&described, &shown, io)
    }

    /// The plugin `describe` answered with: its protocol checked, its name,
    /// operations and parameters read.
    fn from_description(described: &Value, shown: &str, io: Io) -> Result<Self, ToolError> {
        let err = |message: String| ToolError::Plugin {
            plugin: shown.to_owned(),
            message,
        };
        match described.get("protocol").and_then(Value::as_u64) {
            Some(PROTOCOL_VERSION) => {}
            Some(other) => {
                return Err(err(format!(
                    "describe: protocol {other} announced; this runner speaks protocol {PROTOCOL_VERSION}"
                )));
            }
            None => {
                return Err(err(format!(
                    "describe: no 'protocol' announced; this runner speaks protocol {PROTOCOL_VERSION}"
                )));
            }
        }
        let name = described
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(shown)
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

async fn exchange(io: &mut Io, plugin: &str, request: Value) -> Result<Value, ToolError> {
    exchange_until(io, plugin, request, &CancellationToken::new()).await
}

/// One request and its response; on `cancel` the wait for the response
/// ends with [`ToolError::Cancelled`] (the request is written whole first,
/// and a late answer is skipped by the next exchange).
async fn exchange_until(
    io: &mut Io,
    plugin: &str,
    mut request: Value,
    cancel: &CancellationToken,
) -> Result<Value, ToolError> {
    let err = |message: String| ToolError::Plugin {
        plugin: plugin.to_owned(),
        message,
    };
    if io.writing {
        io.broken = Some("a request was abandoned mid-line (cancelled while being written)".into());
    }
    if let Some(why) = &io.broken {
        return Err(err(why.clone()));
    }
    io.next_id += 1;
    let id = io.next_id;
    if let Some(obj) = request.as_object_mut() {
        obj.insert("id".into(), json!(id));
    }
    let mut line = request.to_string();
    line.push('\n');
    io.writing = true;
    io.stdin
        .write_all(line.as_bytes())
        .await
        .map_err(|e| err(format!("write failed: {e}")))?;
    io.stdin
        .flush()
        .await
        .map_err(|e| err(format!("flush failed: {e}")))?;
    io.writing = false;
    loop {
        let line = tokio::select! {
            l = read_line(io) => l.map_err(|e| err(format!("read failed: {e}")))?,
            _ = cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        let line = match line {
            Line::End => return Err(err("plugin exited".into())),
            Line::TooLong => {
                let why = format!(
                    "a response line exceeds {} bytes (the plugin line cap)",
                    io.max_line_bytes
                );
                io.broken = Some(why.clone());
                return Err(err(why));
            }
            Line::Text(l) => l,
        };
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

/// Lines of context a stderr line is masked with.
const MASK_CONTEXT_LINES: usize = 32;
/// Longest stderr line copied whole; a longer one is cut (and masked).
const MAX_STDERR_LINE: u64 = 64 * 1024;

/// Starts copying a plugin's stderr to ours on a thread of its own (see
/// [`copy_masked`]); the receiver is signalled once the copy reached the end.
fn spawn_masked_copy(
    stderr: tokio::process::ChildStderr,
    mask: Arc<dyn TextMask>,
) -> std::io::Result<mpsc::Receiver<()>> {
    let file = std::fs::File::from(stderr.into_owned_fd()?);
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("plugin-stderr".into())
        .spawn(move || {
            copy_masked(file, mask);
            let _ = tx.send(());
        })?;
    Ok(rx)
}

/// Copies a plugin's stderr to ours until it closes, each line masked with
/// the lines before it (see the module docs). Blocking: it runs on its own
/// thread, so the copy goes on while the runtime shuts down.
fn copy_masked(stderr: std::fs::File, mask: Arc<dyn TextMask>) {
    use std::io::{BufRead, Read, Write};
    let mut reader = std::io::BufReader::new(stderr);
    let mut masker = ContextMask::new(mask);
    loop {
        let mut line = Vec::new();
        match (&mut reader)
            .take(MAX_STDERR_LINE)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let shown = masker.line(&String::from_utf8_lossy(&line));
        // Nobody reading our stderr is not the plugin's failure.
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(shown.as_bytes());
        let _ = err.flush();
    }
}

/// Masks each new line of a stream together with the lines before it.
struct ContextMask {
    mask: Arc<dyn TextMask>,
    context: VecDeque<String>,
}

impl ContextMask {
    fn new(mask: Arc<dyn TextMask>) -> Self {
        Self {
            mask,
            context: VecDeque::new(),
        }
    }

    /// `line` (its terminator included) as it may be shown.
    fn line(&mut self, line: &str) -> String {
        let before: String = self.context.iter().map(String::as_str).collect();
        let masked_before = self.mask.mask(&before);
        let masked_all = self.mask.mask(&format!("{before}{line}"));
        self.context.push_back(line.to_owned());
        if self.context.len() > MASK_CONTEXT_LINES {
            self.context.pop_front();
        }
        let mut shown = match masked_all.strip_prefix(masked_before.as_str()) {
            Some(rest) => rest.to_owned(),
            None => {
                "[a plugin stderr line withheld: masking it changed the lines before it]".to_owned()
            }
        };
        if !shown.ends_with('\n') {
            shown.push('\n');
        }
        shown
    }
}

enum Line {
    Text(String),
    TooLong,
    End,
}

/// One line (newline excluded) of at most the cap, read without buffering
/// more than the cap plus one byte. Cancel-safe: the bytes of a line read
/// so far stay in [`Io::partial`] for the next call.
async fn read_line(io: &mut Io) -> std::io::Result<Line> {
    let cap = io.max_line_bytes;
    let room = (cap as u64 + 2).saturating_sub(io.partial.len() as u64);
    let n = (&mut io.stdout)
        .take(room)
        .read_until(b'\n', &mut io.partial)
        .await?;
    let mut buf = std::mem::take(&mut io.partial);
    if n == 0 && buf.is_empty() {
        return Ok(Line::End);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > cap {
        return Ok(Line::TooLong);
    }
    if buf.len() > cap {
        return Ok(Line::TooLong);
    }
    Ok(Line::Text(String::from_utf8_lossy(&buf).into_owned()))
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
        exchange_until(
            &mut io,
            &self.name,
            json!({
                "method": "call",
                "operation": operation,
                "input": input,
                "workspace": ctx.workspace.display().to_string(),
            }),
            &ctx.cancel,
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
    start_declared_plugins_masked(set, router, None).await
}

/// [`start_declared_plugins`], each plugin's stderr passed through `mask`
/// when given ([`ExternalPlugin::start_masked`]).
pub async fn start_declared_plugins_masked(
    set: &crate::workflow::WorkflowSet,
    router: &mut crate::tools::ToolRouter,
    mask: Option<Arc<dyn TextMask>>,
) -> Result<usize, ToolError> {
    start_declared_plugins_with(set, router, PluginLimits::default(), mask).await
}

/// [`start_declared_plugins_masked`] with explicit limits (and the variables the plugins do
/// not inherit, [`PluginLimits::withheld_env`]).
pub async fn start_declared_plugins_with(
    set: &crate::workflow::WorkflowSet,
    router: &mut crate::tools::ToolRouter,
    limits: PluginLimits,
    mask: Option<Arc<dyn TextMask>>,
) -> Result<usize, ToolError> {
    let specs = set.plugins();
    for spec in &specs {
        let plugin = ExternalPlugin::start_masked_with(
            &spec.argv,
            spec.cwd.clone(),
            limits.clone(),
            mask.clone(),
        )
        .await?;
        router.register_plugin(std::sync::Arc::new(plugin))?;
    }
    Ok(specs.len())
}
