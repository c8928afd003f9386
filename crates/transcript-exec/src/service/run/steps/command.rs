//! The `command` step: shell source (`/bin/sh -c`; values arrive through
//! `env`, never in the text) or an argv, run in the workspace; the result
//! records the resolved command, its stdout, its stderr (when it wrote any: wire decision
//! 21, bounded like stdout) and exit code, and a non-zero exit fails the step.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::compiled::TemplateText;
use crate::process::{run_argv_input, run_shell_input};
use crate::service::context::{Flow, KindOut, StepCtx};
use crate::template::{Scope, StepValue, TemplateError};
use crate::tools::ToolError;
use crate::workflow::CommandLine;

/// A command line with its templates rendered.
enum Resolved {
    /// Shell source for `/bin/sh -c`.
    Shell(String),
    /// Program and arguments.
    Argv(Vec<String>),
}

fn resolve(command: &CommandLine, scope: &Scope) -> Result<Resolved, ToolError> {
    let resolved = match command {
        CommandLine::Shell(text) => text
            .compiled()
            .map_err(Clone::clone)
            .and_then(|t| t.render_shell_source(scope))
            .map(Resolved::Shell),
        CommandLine::Argv(argv) => {
            let rendered: Vec<String> = argv
                .iter()
                .map(|a| a.render(scope))
                .collect::<Result<_, _>>()
                .map_err(|e| ToolError::InvalidInput(e.to_string()))?;
            // Option injection (#39): a value read as an option fails the step before
            // the program starts.
            crate::workflow::argv_rule::check_options(&rendered, |i| argv.get(i)?.compiled().ok())
                .map_err(|e| ToolError::Failed(format!("command: {e}")))?;
            return Ok(Resolved::Argv(rendered));
        }
    };
    resolved.map_err(|e| ToolError::InvalidInput(e.to_string()))
}

/// The step's environment, values rendered in `scope`.
fn render_env(
    env: &BTreeMap<String, TemplateText>,
    scope: &Scope,
) -> Result<Vec<(String, String)>, TemplateError> {
    env.iter()
        .map(|(k, v)| Ok((k.clone(), v.render(scope)?)))
        .collect()
}

/// What a command step is about to run, for its `step.started` `result`:
/// `{"command": <shell source or argv>, "env": [<names>]}` (`env` only
/// when it has variables; names only, their values may be secrets;
/// `command` is `null` when it does not render). Written before the
/// process starts, so a step cancelled or killed before it completes
/// still records what ran.
pub(in crate::service) fn started_result(
    command: &CommandLine,
    env: &BTreeMap<String, TemplateText>,
    scope: &Scope,
) -> Value {
    let command = match resolve(command, scope) {
        Ok(Resolved::Shell(line)) => Value::String(line),
        Ok(Resolved::Argv(argv)) => json!(argv),
        Err(_) => Value::Null,
    };
    let mut started = json!({ "command": command });
    if !env.is_empty() {
        started["env"] = json!(env.keys().collect::<Vec<_>>());
    }
    started
}

/// Runs a `command` step.
pub(in crate::service) async fn run(
    sc: &StepCtx<'_>,
    command: &CommandLine,
    env: &BTreeMap<String, TemplateText>,
    stdin: Option<&TemplateText>,
) -> KindOut {
    let (ctx, scope, cancel) = (sc.run, sc.scope, sc.cancel);
    let ws = &ctx.inner.workspace;
    // Values reach the process as data: environment variables, typed argv
    // elements and standard input, never shell source.
    let env = match render_env(env, scope) {
        Ok(env) => env,
        Err(e) => return KindOut::flow(Flow::Failed(format!("env: {e}"))),
    };
    let input = match stdin.map(|t| t.render(scope)).transpose() {
        Ok(input) => input,
        Err(e) => return KindOut::flow(Flow::Failed(format!("stdin: {e}"))),
    };
    // A replay serving recorded commands: the command resolves as usual, does not run.
    let recorded = ctx
        .inner
        .recorded_commands
        .as_ref()
        .and_then(|r| r.take(&ctx.callers, sc.path, sc.iteration));
    if let Some(recorded) = recorded {
        return served(command, scope, (&env, input.as_deref()), recorded);
    }
    // The resolved command is part of the result: what ran, not
    // only what it printed (#20).
    let limits = sc.limits();
    let confined = limits.confinement.is_some();
    let (ran, resolved) = match resolve(command, scope) {
        Ok(Resolved::Shell(line)) => (
            run_shell_input(&line, &env, input.as_deref(), ws, cancel, limits.clone()).await,
            Value::String(line),
        ),
        Ok(Resolved::Argv(argv)) => (
            run_argv_input(&argv, &env, input.as_deref(), ws, cancel, limits.clone()).await,
            json!(argv),
        ),
        Err(e) => (Err(e), Value::Null),
    };
    match ran {
        Ok(out) => {
            let flow = exit_flow(out.exit_code, || {
                ctx.inner.observers.mask_whole(&out.stderr).into_owned()
            });
            let ran = Ran {
                resolved,
                stdout: out.stdout,
                stderr: out.stderr,
                exit_code: out.exit_code,
                env: &env,
                input: input.as_deref(),
                confined,
            };
            ran.into_out(flow)
        }
        Err(ToolError::Cancelled) => KindOut::flow(Flow::Cancelled),
        Err(e) => KindOut::flow(Flow::Failed(e.to_string())),
    }
}

/// How a command that exited with `code` ends its step: a failure names the last line of its
/// stderr, masked whole first (the last line of a multi-line secret, a PEM body or a folded
/// key, is no secret alone).
fn exit_flow(code: i64, masked_stderr: impl FnOnce() -> String) -> Flow {
    if code == 0 {
        return Flow::Done;
    }
    let stderr = masked_stderr();
    let tail = stderr.trim_end().lines().last().unwrap_or("");
    Flow::Failed(if tail.is_empty() {
        format!("command exited with code {code}")
    } else {
        format!("command exited with code {code}: {tail}")
    })
}

/// What a command step ran (or was served) and what came of it.
struct Ran<'a> {
    resolved: Value,
    stdout: String,
    /// What it wrote to its standard error (already bounded by the capture; empty: none).
    stderr: String,
    exit_code: i64,
    env: &'a [(String, String)],
    input: Option<&'a str>,
    /// It ran confined by the kernel (#56): the result says so.
    confined: bool,
}

impl Ran<'_> {
    /// The step's value and result (`command`, `stdout`, `exit_code`, `stderr` when it wrote
    /// any (wire decision 21), and `stdin` and `env` when it got some: what ran is the source
    /// plus its input and environment), ending as `flow`.
    fn into_out(self, flow: Flow) -> KindOut {
        let mut result = json!({
            "command": self.resolved,
            "stdout": self.stdout,
            "exit_code": self.exit_code,
        });
        if !self.stderr.is_empty() {
            result["stderr"] = Value::String(self.stderr);
        }
        if let Some(input) = self.input {
            result["stdin"] = Value::String(input.to_owned());
        }
        if self.confined {
            result["confined"] = Value::Bool(true);
        }
        if !self.env.is_empty() {
            result["env"] = self
                .env
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        let value = StepValue {
            output: Value::String(
                self.stdout
                    .strip_suffix('\n')
                    .unwrap_or(&self.stdout)
                    .to_owned(),
            ),
            exit_code: Some(self.exit_code),
            error: None,
        };
        KindOut {
            value,
            result: Some(result),
            ..KindOut::flow(flow)
        }
    }
}

/// A command step's outcome served from its recording: its resolved command, the recorded
/// stdout and exit code (and error), recorded in the result's usual shape.
fn served(
    command: &CommandLine,
    scope: &Scope,
    (env, input): (&[(String, String)], Option<&str>),
    recorded: crate::model_endpoint::RecordedCommand,
) -> KindOut {
    let resolved = match resolve(command, scope) {
        Ok(Resolved::Shell(line)) => Value::String(line),
        Ok(Resolved::Argv(argv)) => json!(argv),
        Err(e) => return KindOut::flow(Flow::Failed(e.to_string())),
    };
    let flow = match (recorded.exit_code, recorded.error) {
        (0, _) => Flow::Done,
        (_, Some(error)) => Flow::Failed(error),
        (code, None) => Flow::Failed(format!("command exited with code {code}")),
    };
    Ran {
        resolved,
        stdout: recorded.stdout,
        // A recording serves its stdout and exit code only (what the replay compares).
        stderr: String::new(),
        exit_code: recorded.exit_code,
        env,
        input,
        confined: false,
    }
    .into_out(flow)
}
