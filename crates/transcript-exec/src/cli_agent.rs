//! CLI agents: a real subprocess whose stdout is fed, as it arrives, to the
//! provider's normalizer (transcript-providers); every normalized item goes
//! straight to the [`AgentSeam`].
//!
//! The prompt and system prompt reach the process as the environment
//! variables `TRANSCRIPT_PROMPT` and `TRANSCRIPT_SYSTEM_PROMPT` (argv may
//! carry them too, through templates). A non-zero exit, a provider-reported
//! error, a cancellation or a timeout fail the step; whatever the process
//! printed before is still normalized and recorded, including a turn whose
//! tool_use never got its result (it stays dangling, decision 11).
//!
//! Without a command, a provider with a preset (`claude`, `codex`,
//! `gemini`) runs its real CLI with the flags of [`crate::preset`]. The
//! process inherits the runner's environment, less what the runner consumed for
//! itself ([`crate::withheld_env`]), plus the step's `env:`.
//!
//! For offline runs, the command can replay a recorded provider stream:
//! `["cat", "fixtures/agents/claude-review.jsonl"]`.

use std::process::Stdio;

use async_trait::async_trait;
use tokio::io::AsyncReadExt;
use transcript_domain::{BlockBody, MessagePayload};
use transcript_providers::{
    DiagnosticKind, Normalizer, Output, Provider, UnknownProvider, gemini_session_id,
};

use crate::agent::{AgentError, AgentReply, AgentRequest, AgentRunner, AgentSeam};
use crate::mcp::step::{PrivateDir, preset_args};
use crate::process::ProcessGroup;

/// Most stderr bytes kept for the error message.
const STDERR_KEEP: usize = 4096;

/// Runs CLI agents (see the module docs). One instance serves every provider
/// the normalizer registry knows.
#[derive(Debug, Default, Clone)]
pub struct CliAgentRunner;

impl CliAgentRunner {
    /// A runner.
    pub fn new() -> Self {
        Self
    }
}

#[derive(Default)]
struct Collected {
    last_text: Option<String>,
    provider_errors: Vec<String>,
    warnings: Vec<String>,
    /// Gemini CLI: its turns, held until it exited ([`crate::gemini_session`]).
    gemini: Option<crate::gemini_session::Held>,
}

/// Most warnings kept per agent run (a CLI repeating one stays bounded).
const WARNINGS_KEEP: usize = 16;

async fn dispatch(outputs: &mut Vec<Output>, seam: &AgentSeam, c: &mut Collected) {
    for item in outputs.drain(..) {
        match item {
            Output::ToolCall(p) => seam.agent_tool_call(&p.name, &p.call_id, p.input).await,
            Output::ToolResult(p) => {
                seam.agent_tool_result(&p.name, &p.call_id, p.output, p.error)
                    .await
            }
            Output::Turn(m) => match &mut c.gemini {
                Some(held) => held.turns.push(m),
                None => record_turn(m, seam, c).await,
            },
            Output::Diagnostic(d) if d.kind == DiagnosticKind::Metadata => {
                if let (Some(held), Some(id)) = (&mut c.gemini, gemini_session_id(&d)) {
                    held.session_id = Some(id.to_owned());
                }
            }
            Output::Diagnostic(d) if d.kind == DiagnosticKind::ProviderError => {
                c.provider_errors.push(if d.detail.is_empty() {
                    d.record.clone()
                } else {
                    d.detail.clone()
                });
            }
            Output::Diagnostic(d) if d.kind == DiagnosticKind::Warning => {
                if c.warnings.len() < WARNINGS_KEEP {
                    c.warnings.push(if d.detail.is_empty() {
                        d.record.clone()
                    } else {
                        d.detail.clone()
                    });
                }
            }
            Output::Diagnostic(_) => {}
        }
    }
}

/// Records an assistant turn; its text is the agent's answer so far.
async fn record_turn(m: MessagePayload, seam: &AgentSeam, c: &mut Collected) {
    let text: Vec<&str> = m
        .blocks
        .iter()
        .filter_map(|b| match &b.body {
            BlockBody::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if !text.is_empty() {
        c.last_text = Some(text.join(""));
    }
    seam.assistant(m).await;
}

/// Records the turns held for a Gemini CLI run, with their model and usage from its
/// session file when it can be used ([`crate::gemini_session`]).
async fn release_held(request: &AgentRequest, seam: &AgentSeam, c: &mut Collected) {
    let Some(held) = c.gemini.take() else {
        return;
    };
    let (turns, warning) = held.release(&request.env).await;
    if let Some(w) = warning
        && c.warnings.len() < WARNINGS_KEEP
    {
        c.warnings.push(w);
    }
    for m in turns {
        record_turn(m, seam, c).await;
    }
}

/// The step's command, else its provider's preset command line, with the private directory
/// (mode `0o700`, removed on drop) holding the preset's policy file when it needs one
/// (Gemini with tools: [`crate::preset::Preset::policy_toml`]); keep it until the agent ended.
fn command_line(request: &AgentRequest) -> Result<(Vec<String>, Option<PrivateDir>), AgentError> {
    if !request.command.is_empty() {
        return Ok((request.command.clone(), None));
    }
    let Some(preset) = crate::preset::Preset::of_agent(&request.provider) else {
        return Err(AgentError::Setup(format!(
            "agent step has no command and provider '{}' has no preset (claude, codex, gemini)",
            request.provider
        )));
    };
    let bin = preset
        .locate(&request.env)
        .map_err(|e| AgentError::Setup(e.to_string()))?;
    let mut argv = vec![bin.display().to_string()];
    let policy = preset
        .policy_toml(&request.tools)
        .map_err(|e| AgentError::Setup(e.to_string()))?;
    let dir = match policy {
        Some(_) => Some(PrivateDir::create().map_err(|e| AgentError::Setup(e.to_string()))?),
        None => None,
    };
    argv.extend(match &dir {
        Some(dir) => preset_args(preset, request, &dir.path).map_err(AgentError::Setup)?,
        None => preset
            .args(request)
            .map_err(|e| AgentError::Setup(e.to_string()))?,
    });
    Ok((argv, dir))
}

#[async_trait]
impl AgentRunner for CliAgentRunner {
    async fn run(&self, request: AgentRequest, seam: &AgentSeam) -> Result<AgentReply, AgentError> {
        let provider = request.provider.known().ok_or_else(|| {
            AgentError::Setup(format!(
                "no normalizer: {}",
                UnknownProvider(request.provider.name().to_owned())
            ))
        })?;
        // The preset's private directory lives until the agent ended.
        let limits = seam.process_limits();
        let (mut child, group, _private) = spawn(&request, &limits)?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| AgentError::Transport("agent has no stdout pipe".into()))?;
        let mut stderr_task = child.stderr.take().map(|e| tokio::spawn(stderr_tail(e)));
        let mut normalizer = provider.normalizer();
        let mut collected = Collected {
            gemini: (provider == Provider::Gemini).then(Default::default),
            ..Collected::default()
        };
        let read = read_stdout(&mut stdout, normalizer.as_mut(), seam, &mut collected).await;
        let finished = match read {
            Read::Cancelled => None,
            _ => wait_watching(&mut child, &mut stderr_task, seam.cancel()).await,
        };
        if finished.is_none() {
            group
                .terminate(&mut child, seam.process_limits().kill_grace)
                .await;
            if let Some(t) = stderr_task {
                t.abort();
            }
        } else {
            // It exited on its own: what it left running ends with it (crate::reaper).
            group.finish().await;
        }
        // Flush the last turn (a dangling tool_use stays in it).
        let mut outputs = Vec::new();
        normalizer.finish(&mut outputs);
        dispatch(&mut outputs, seam, &mut collected).await;
        release_held(&request, seam, &mut collected).await;
        let Some((status, stderr)) = finished else {
            return Err(AgentError::Cancelled);
        };
        if let Read::Failed(e) = read {
            return Err(AgentError::Transport(format!(
                "reading agent output failed: {e}"
            )));
        }
        let status =
            status.map_err(|e| AgentError::Transport(format!("waiting for agent failed: {e}")))?;
        reply(status, &stderr, collected)
    }
}

/// Starts the agent's command in its own process group, in the workspace,
/// with the prompts in its environment and its stdout and stderr piped.
fn spawn(
    request: &AgentRequest,
    limits: &crate::process::ProcessLimits,
) -> Result<(tokio::process::Child, ProcessGroup, Option<PrivateDir>), AgentError> {
    let withheld = &limits.withheld_env;
    let (argv, private) = command_line(request)?;
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| AgentError::Setup("agent step has no command".into()))?;
    // Bounded, the CLI reaches its model endpoint and the runner's doors for it too
    // ([`AgentRequest::reach`]).
    let network = (limits.network.clone()).map(|n| n.allowing(request.reach.iter().cloned()));
    let mut cmd = crate::sandbox::net::command(program, network.as_ref());
    // The runner's own variables go first, so that the step's `env:` can set them.
    withheld.apply(&mut cmd);
    cmd.args(args)
        .envs(&request.env)
        .current_dir(&request.workspace)
        .env("TRANSCRIPT_PROMPT", &request.prompt)
        .env("TRANSCRIPT_SYSTEM_PROMPT", &request.system_prompt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Confined like a command step, plus the CLI's own state and the runner's files for it.
    let confinement = limits.confinement.as_ref().map(|c| {
        let c = crate::agent_sandbox::grant(c.clone(), request);
        match &private {
            Some(dir) => c.write(&dir.path),
            None => c,
        }
    });
    let (child, group) =
        ProcessGroup::spawn_bounded(&mut cmd, confinement.as_ref(), network.as_ref())
            .map_err(|e| AgentError::Setup(format!("cannot start agent '{program}': {e}")))?;
    Ok((child, group, private))
}

/// The last [`STDERR_KEEP`] bytes the agent printed on stderr, trimmed:
/// only the tail is kept, so memory stays bounded whatever it prints.
async fn stderr_tail(mut stderr: tokio::process::ChildStderr) -> String {
    let mut tail = Vec::with_capacity(2 * STDERR_KEEP);
    let mut buf = vec![0u8; 8 * 1024];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_KEEP {
            tail.drain(..tail.len() - STDERR_KEEP);
        }
    }
    let start = tail.len().saturating_sub(STDERR_KEEP);
    String::from_utf8_lossy(&tail[start..]).trim().to_owned()
}

/// How reading the agent's stdout ended.
enum Read {
    /// End of file.
    Eof,
    /// The step was cancelled first.
    Cancelled,
    /// Reading failed.
    Failed(String),
}

/// Feeds the agent's stdout to `normalizer` as it arrives, dispatching
/// what it produces through the seam, until end of file, a read error or
/// the step's cancellation.
async fn read_stdout(
    stdout: &mut tokio::process::ChildStdout,
    normalizer: &mut dyn Normalizer,
    seam: &AgentSeam,
    collected: &mut Collected,
) -> Read {
    let mut outputs = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            n = stdout.read(&mut buf) => match n {
                Ok(0) => return Read::Eof,
                Ok(n) => {
                    normalizer.feed(&buf[..n], &mut outputs);
                    dispatch(&mut outputs, seam, collected).await;
                }
                Err(e) => return Read::Failed(e.to_string()),
            },
            _ = seam.cancel().cancelled() => return Read::Cancelled,
        }
    }
}

/// The reply of an agent that exited with `status`: its last text, or why
/// it failed (the provider's own message first: the CLI often prints it
/// on stdout only, then the tail of stderr).
fn reply(
    status: std::process::ExitStatus,
    stderr: &str,
    collected: Collected,
) -> Result<AgentReply, AgentError> {
    if !status.success() {
        // The provider's own message first (the CLI often prints it on stdout only).
        let reasons = collected
            .provider_errors
            .first()
            .cloned()
            .into_iter()
            .chain((!stderr.is_empty()).then(|| stderr.to_owned()))
            .collect();
        return Err(AgentError::Exited {
            code: status.code(),
            reasons,
        });
    }
    if let Some(e) = collected.provider_errors.first() {
        return Err(AgentError::Provider(e.clone()));
    }
    Ok(AgentReply {
        output: collected.last_text.unwrap_or_default(),
        warnings: collected.warnings,
    })
}

/// Once its stdout closed, an agent may still linger (and its children
/// with it): waits for its exit and the end of its stderr while watching
/// `cancel`, so the caller's group guard stays armed until then. `None`
/// when cancelled first.
async fn wait_watching(
    child: &mut tokio::process::Child,
    stderr_task: &mut Option<tokio::task::JoinHandle<String>>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<(std::io::Result<std::process::ExitStatus>, String)> {
    let finish = async {
        let status = child.wait().await;
        let stderr = match stderr_task.as_mut() {
            Some(t) => t.await.unwrap_or_default(),
            None => String::new(),
        };
        (status, stderr)
    };
    tokio::select! {
        r = finish => Some(r),
        _ = cancel.cancelled() => None,
    }
}
