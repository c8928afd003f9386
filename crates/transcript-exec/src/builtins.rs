//! The builtin tools (`read_file`, `write_file`, `list_dir`,
//! `run_command`). The file tools are confined to the workspace by the
//! kernel ([`crate::confined`]: `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`, regular files with one link only); processes are
//! run by [`crate::process`].
//!
//! A path that points outside (symlinks included) and one that does not
//! exist get the same [`ToolError::PathEscapes`], so a model cannot probe
//! what exists outside.

pub use crate::process::{ShellOutput, run_argv, run_shell};
use crate::process::{run_argv_input, run_shell_input};
use crate::tool::{Tool, ToolContext};
use crate::tool_error::ToolError;
use async_trait::async_trait;
use serde_json::{Value, json};

fn str_field<'a>(input: &'a Value, field: &str) -> Result<&'a str, ToolError> {
    input
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidInput(format!("missing string field '{field}'")))
}

/// The file tools never reach what the run's confinement hides (#56: the transcript storage
/// and audit file, even inside the workspace), as its processes never do: refused like a path
/// that escapes (the answer says nothing of what is there).
fn refuse_hidden(ctx: &ToolContext, path: &str) -> Result<(), ToolError> {
    match &ctx.limits.confinement {
        Some(c) if c.hides(std::path::Path::new(path)) => {
            Err(ToolError::PathEscapes(path.to_owned()))
        }
        _ => Ok(()),
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(ToolError::Failed(format!("file tool task failed: {e}"))))
}

/// Room `read_file` leaves under the output cap for its note
/// (`…[truncated: SIZE bytes; read_file reads the first N]`, at most
/// 3 + 12 + 20 + 34 + 20 + 1 bytes), so the answer fits the cap and is
/// never cut again when recorded.
pub const READ_FILE_NOTE_RESERVE: usize = 128;

/// `read_file {path}` → the file's text: at most the tool output cap
/// ([`crate::ProcessLimits::max_output_bytes`]) is read; a larger file
/// answers its first bytes followed by
/// `…[truncated: SIZE bytes; read_file reads the first N]`.
#[derive(Debug)]
pub struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn description(&self) -> Option<String> {
        Some("Reads a text file of the workspace.".into())
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "A file path relative to the workspace."}},
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let path = str_field(&input, "path")?.to_owned();
        refuse_hidden(ctx, &path)?;
        let ws = ctx.workspace.clone();
        let cap = ctx
            .limits
            .max_output_bytes
            .saturating_sub(READ_FILE_NOTE_RESERVE)
            .max(1);
        let read = blocking(move || crate::confined::read_text(&ws, &path, cap)).await?;
        let mut text = read.text;
        if read.truncated {
            text.push_str(&format!(
                "…[truncated: {} bytes; read_file reads the first {}]",
                read.size,
                text.len()
            ));
        }
        Ok(Value::String(text))
    }
}

/// `write_file {path, content}` → `{"bytes": n}` (non-string content is
/// written as its JSON text).
#[derive(Debug)]
pub struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn description(&self) -> Option<String> {
        Some("Writes a text file of the workspace (replacing it).".into())
    }

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
        let path = str_field(&input, "path")?.to_owned();
        // A single-reference template may have rendered a number or an
        // object; write its text form rather than refusing it.
        let content = match input.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => {
                return Err(ToolError::InvalidInput("missing field 'content'".into()));
            }
            Some(other) => crate::template::value_to_text(other),
        };
        let bytes = content.len();
        refuse_hidden(ctx, &path)?;
        let ws = ctx.workspace.clone();
        blocking(move || crate::confined::write_text(&ws, &path, content.as_bytes())).await?;
        Ok(json!({ "bytes": bytes }))
    }
}

/// `list_dir {path?}` → sorted entry names (directories end with `/`).
#[derive(Debug)]
pub struct ListDir;

#[async_trait]
impl Tool for ListDir {
    fn description(&self) -> Option<String> {
        Some("Lists the entries of a directory of the workspace.".into())
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "A directory relative to the workspace (default '.')."}},
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let path = input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or(".")
            .to_owned();
        refuse_hidden(ctx, &path)?;
        let ws = ctx.workspace.clone();
        let names = blocking(move || crate::confined::list(&ws, &path)).await?;
        Ok(json!(names))
    }
}

/// The builtin tool that runs shell commands.
pub const SHELL_TOOL: &str = "run_command";

/// `run_command {command, env?, stdin?}` → `{stdout, stderr, exit_code}`; a string
/// runs with `/bin/sh -c`, a list of strings as an argv without a shell, in
/// the workspace, with `env` (names to strings) added to its environment and `stdin`
/// (text) written to its standard input, then closed; a non-zero exit is an error that
/// keeps the output.
#[derive(Debug)]
pub struct RunCommand;

#[async_trait]
impl Tool for RunCommand {
    fn description(&self) -> Option<String> {
        Some("Runs a command in the workspace and returns its stdout, stderr and exit code.".into())
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {
                    "description": "A shell command (/bin/sh -c) or a program and its arguments (no shell).",
                    "anyOf": [
                        {"type": "string"},
                        {"type": "array", "items": {"type": "string"}, "minItems": 1}
                    ]
                },
                "env": {
                    "description": "Environment variables added to the command's process (a script reads them as \"$NAME\").",
                    "type": "object",
                    "additionalProperties": {"type": "string"}
                },
                "stdin": {
                    "description": "Text written to the command's standard input, then closed.",
                    "type": "string"
                }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let env = match input.get("env") {
            None | Some(Value::Null) => Vec::new(),
            // A single-reference template may have rendered a number or an
            // object: its text form is the variable's value.
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| (k.clone(), crate::template::value_to_text(v)))
                .collect(),
            Some(_) => {
                return Err(ToolError::InvalidInput(
                    "'env' must be an object of strings".into(),
                ));
            }
        };
        let stdin = match input.get("stdin") {
            None | Some(Value::Null) => None,
            Some(v) => Some(crate::template::value_to_text(v)),
        };
        let stdin = stdin.as_deref();
        let out = match input.get("command") {
            Some(Value::String(command)) => {
                run_shell_input(
                    command,
                    &env,
                    stdin,
                    &ctx.workspace,
                    &ctx.cancel,
                    ctx.limits.clone(),
                )
                .await?
            }
            Some(Value::Array(items)) => {
                let argv = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        ToolError::InvalidInput("'command' list must hold strings".into())
                    })?;
                run_argv_input(
                    &argv,
                    &env,
                    stdin,
                    &ctx.workspace,
                    &ctx.cancel,
                    ctx.limits.clone(),
                )
                .await?
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
