//! The builtin tools (`read_file`, `write_file`, `list_dir`,
//! `run_command`) and the workspace path checks they share (processes are
//! run by [`crate::process`]).
//!
//! File paths resolve inside the workspace or not at all: a path that
//! points outside (symlinks included) and one that does not exist get the
//! same [`ToolError::PathEscapes`], so a model cannot probe what exists
//! outside.

use std::path::{Component, Path, PathBuf};

pub use crate::process::{ShellOutput, run_argv, run_shell};
use crate::process::{run_argv_env, run_shell_env};
use crate::tools::{Tool, ToolContext, ToolError};
use async_trait::async_trait;
use serde_json::{Value, json};

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

/// `run_command {command, env?}` → `{stdout, stderr, exit_code}`; a string
/// runs with `/bin/sh -c`, a list of strings as an argv without a shell, in
/// the workspace, with `env` (names to strings) added to its environment;
/// a non-zero exit is an error that keeps the output.
#[derive(Debug)]
pub struct RunCommand;

#[async_trait]
impl Tool for RunCommand {
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
                }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<Value, ToolError> {
        let env = match input.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ToolError::InvalidInput("'env' values must be strings".into()))?,
            Some(_) => {
                return Err(ToolError::InvalidInput(
                    "'env' must be an object of strings".into(),
                ));
            }
        };
        let out = match input.get("command") {
            Some(Value::String(command)) => {
                run_shell_env(command, &env, &ctx.workspace, &ctx.cancel, ctx.limits).await?
            }
            Some(Value::Array(items)) => {
                let argv = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        ToolError::InvalidInput("'command' list must hold strings".into())
                    })?;
                run_argv_env(&argv, &env, &ctx.workspace, &ctx.cancel, ctx.limits).await?
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
