//! An agent execution's MCP proxy: started before the CLI (the wiring applied to its
//! request), stopped after it whatever the outcome, its private directory removed; a lost
//! observation fails the step.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventDraft, RecordError, Recorder, RunId, Seq, Subscription};

use super::port::{McpFile, McpGateway, McpSession, McpStart, McpWiring};
use crate::agent::AgentRequest;
use crate::preset::Preset;
use crate::workflow::McpServerSpec;

/// Where the proxy's observations go.
pub(crate) struct Target {
    /// The run's recorder (`None`: a run without transcript).
    pub(crate) recorder: Option<Arc<dyn Recorder>>,
    /// The run's id.
    pub(crate) run_id: RunId,
    /// The engine's cap of one recorded value.
    pub(crate) max_value_bytes: usize,
    /// The engine's cap of one recorded line.
    pub(crate) max_line_bytes: usize,
    /// The agent step's path.
    pub(crate) path: String,
    /// Its iteration.
    pub(crate) iteration: u64,
    /// The agent execution's call id prefix.
    pub(crate) call_id_prefix: String,
    /// The step's confinement, for the stdio servers the proxy starts.
    pub(crate) confinement: Option<crate::sandbox::Confinement>,
    /// The step's network bounds, for the same servers.
    pub(crate) network: Option<crate::sandbox::net::NetBounds>,
}

/// A running proxy and the private directory of its wiring.
pub(crate) struct StepProxy {
    session: Box<dyn McpSession>,
    dir: PrivateDir,
}

/// Starts the proxy of `servers` and points `request` (a CLI preset's) at it: the preset's
/// command line with the wiring's arguments, its environment, its files written. With no
/// servers the wiring is the same, for an empty set: the CLI then reaches no MCP server at
/// all, none of the user's own configuration included (#40 follow-up; the caller asks for it
/// only for a CLI preset step). `None` without servers when there is no gateway.
pub(crate) async fn start(
    gateway: Option<&Arc<dyn McpGateway>>,
    servers: &[McpServerSpec],
    request: &mut AgentRequest,
    target: Target,
    call_deadline: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<Option<StepProxy>, String> {
    let Some(gateway) = gateway else {
        if servers.is_empty() {
            return Ok(None);
        }
        return Err("the step has mcp_servers but this runner has no MCP gateway (ServiceBuilder::mcp_gateway)".into());
    };
    let dir = PrivateDir::create().map_err(|e| format!("MCP proxy: {e}"))?;
    let start = McpStart {
        servers: servers.to_vec(),
        tools: request.tools.clone(),
        provider: request.provider.name().to_owned(),
        config_dir: dir.path.clone(),
        recorder: Arc::new(StepRecorder {
            inner: target.recorder,
            run_id: target.run_id,
            max_value_bytes: target.max_value_bytes,
            max_line_bytes: target.max_line_bytes,
        }),
        path: target.path,
        iteration: target.iteration,
        call_id_prefix: target.call_id_prefix,
        call_deadline,
        cancel: cancel.clone(),
        env: request.env.clone(),
        workspace: request.workspace.clone(),
        confinement: target.confinement,
        network: target.network,
    };
    let session = gateway.start(start).await.map_err(|e| e.to_string())?;
    let proxy = StepProxy { session, dir };
    match wire(request, &proxy.session.wiring(), &proxy.dir.path) {
        Ok(()) => Ok(Some(proxy)),
        Err(e) => {
            // Nothing of the proxy outlives a step that could not use it.
            let _ = proxy.finish().await;
            Err(e)
        }
    }
}

/// Stops `proxy`, if any ([`StepProxy::finish`]).
pub(crate) async fn finish(proxy: Option<StepProxy>) -> Result<(), String> {
    match proxy {
        Some(p) => p.finish().await,
        None => Ok(()),
    }
}

impl StepProxy {
    /// Stops the proxy and removes its directory; the proxy's error when it lost an
    /// observation.
    pub(crate) async fn finish(self) -> Result<(), String> {
        let result = self.session.shutdown().await.map_err(|e| e.to_string());
        drop(self.dir);
        result
    }
}

/// Applies `wiring` to the request of a CLI preset step.
fn wire(request: &mut AgentRequest, wiring: &McpWiring, dir: &Path) -> Result<(), String> {
    let preset = Preset::of_agent(&request.provider).ok_or_else(|| {
        format!(
            "mcp_servers needs a CLI preset (claude, codex, gemini), not '{}'",
            request.provider
        )
    })?;
    for file in &wiring.files {
        write_private(file, dir).map_err(|e| format!("MCP proxy: {e}"))?;
    }
    request.env.extend(wiring.env.clone());
    request.reach.extend(wiring.reach.iter().cloned());
    request.private_dirs.push(dir.to_path_buf());
    let bin = preset.locate(&request.env).map_err(|e| e.to_string())?;
    let mut args = preset_args(preset, request, dir)?;
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.splice(at..at, wiring.args.iter().cloned());
    request.command = std::iter::once(bin.display().to_string())
        .chain(args)
        .collect();
    Ok(())
}

/// Where a preset's policy file ([`Preset::policy_toml`]) goes in the step's private directory.
const POLICY_FILE: &str = "policy.toml";

/// `preset`'s arguments for `request`, its policy file ([`Preset::policy_toml`] of the
/// step's tools, when it needs one) written new, mode `0o600`, in `dir` (the step's private
/// `0o700` directory) and passed ([`Preset::args_with_policy`]).
pub(crate) fn preset_args(
    preset: Preset,
    request: &AgentRequest,
    dir: &Path,
) -> Result<Vec<String>, String> {
    let policy = match preset
        .policy_toml(&request.tools)
        .map_err(|e| e.to_string())?
    {
        Some(contents) => {
            let file = McpFile {
                path: dir.join(POLICY_FILE),
                contents,
            };
            write_private(&file, dir).map_err(|e| format!("{} policy file: {e}", preset.name()))?;
            Some(file.path)
        }
        None => None,
    };
    preset
        .args_with_policy(request, policy.as_deref())
        .map_err(|e| e.to_string())
}

/// Writes `file` inside `dir` (missing directories created `0o700`), new, mode `0o600`.
fn write_private(file: &McpFile, dir: &Path) -> std::io::Result<()> {
    let inside = file.path.strip_prefix(dir).is_ok_and(|rel| {
        rel.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
    });
    if !inside {
        return Err(std::io::Error::other(format!(
            "{} is not a file of the proxy's directory",
            file.path.display()
        )));
    }
    if let Some(parent) = file.path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file.path)?;
    f.write_all(file.contents.as_bytes())?;
    f.sync_all()
}

/// A fresh directory, mode `0o700`, under the system's temporary directory; removed on drop.
pub(crate) struct PrivateDir {
    pub(crate) path: PathBuf,
}

impl PrivateDir {
    /// Creates it (never through a planted symlink).
    pub(crate) fn create() -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("transcript-mcp-{}-{n}", std::process::id()));
            // mkdir never follows a planted symlink: it fails with AlreadyExists.
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Self { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1 << 20 => {}
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("cannot create {}: {e}", path.display()),
                    ));
                }
            }
        }
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The run's recorder as the proxy sees it: values bounded like the engine's own records;
/// never closes the run's transcript; without a transcript, records nowhere.
struct StepRecorder {
    inner: Option<Arc<dyn Recorder>>,
    run_id: RunId,
    max_value_bytes: usize,
    max_line_bytes: usize,
}

#[async_trait]
impl Recorder for StepRecorder {
    fn run_id(&self) -> RunId {
        self.run_id
    }

    fn parent_run_id(&self) -> Option<RunId> {
        self.inner.as_ref().and_then(|r| r.parent_run_id())
    }

    async fn record(&self, mut draft: EventDraft) -> Result<Seq, RecordError> {
        let Some(inner) = &self.inner else {
            return Ok(0);
        };
        crate::bounded::bound_payload_within(
            &mut draft.payload,
            self.max_value_bytes,
            self.max_line_bytes,
        );
        inner.record(draft).await
    }

    async fn subscribe(&self, _from: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Err(RecordError::Closed)
    }

    async fn close(&self) -> Result<(), RecordError> {
        Ok(())
    }
}
