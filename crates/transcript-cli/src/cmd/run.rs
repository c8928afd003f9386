//! `transcript run`: runs a workflow with the ExecutionService and the JSONL
//! recorder, showing live progress on stderr from a fan-out subscription
//! (the first live consumer of the recorder).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use transcript_domain::{EventMask, RecorderFactory};
use transcript_exec::sandbox::net::RunNetwork;
use transcript_exec::sandbox::{SandboxMode, SandboxPolicy};
use transcript_exec::workflow::given_inputs;
use transcript_exec::{ExecutionService, ExternalPlugin, ToolRouter, WorkflowSet};
use transcript_infra::{Durability, JsonlRecorderFactory};

use super::run_report::{exit_status, masked, masked_lines, report_problems, verdict};
use crate::CliError;
use crate::style::Style;

/// Everything `run` needs.
pub struct RunArgs {
    /// The workflow file.
    pub workflow: PathBuf,
    /// `--input k=v` pairs (values parsed as JSON when they parse, else strings).
    pub inputs: Vec<(String, String)>,
    /// Storage directory.
    pub storage: PathBuf,
    /// NATS storage (#44): the runs are recorded there (the audit trail stays in `storage`).
    pub nats: Option<transcript_nats::NatsStore>,
    /// Working directory of the run's commands and file tools.
    pub workspace: PathBuf,
    /// External plugins (`--plugin "cmd args"`).
    pub plugins: Vec<String>,
    /// Masking stage for the recorder.
    pub mask: Option<Arc<dyn EventMask>>,
    /// The same redactor, for the messages printed about the run (errors can quote content).
    pub redactor: Option<Arc<transcript_redact::Redactor>>,
    /// Durability policy.
    pub durability: Durability,
    /// Sequential ids, a manual clock and sequential branches (byte-stable output).
    pub deterministic: bool,
    /// Live OTLP export: where and how (flags over the environment), and content capture.
    pub otlp: Option<(transcript_otel::OtlpHttpConfig, bool)>,
    /// How long the end of the run waits for the live export to deliver what is queued.
    pub otlp_flush_timeout: std::time::Duration,
    /// Stderr styling.
    pub style: Style,
    /// Time a cancelled command's process group gets between SIGTERM and SIGKILL.
    pub kill_grace: std::time::Duration,
    /// More wiring of the engine (`transcript replay`'s ports), if any.
    pub wire: Option<EngineWiring>,
    /// Whether the run's processes are confined by the kernel (#56), and their network (#57).
    pub sandbox: (SandboxMode, RunNetwork),
}

/// A command's own wiring of the engine, applied last to the service builder.
pub type EngineWiring =
    Box<dyn Fn(transcript_exec::ServiceBuilder) -> transcript_exec::ServiceBuilder + Send + Sync>;

/// Parses `k=v`.
pub fn parse_input(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// Checks `--input` names against the workflow's declared inputs before anything is created,
/// so a typo leaves no empty transcript or audit trail behind.
fn check_inputs(
    root: &transcript_exec::Workflow,
    inputs: &[(String, String)],
    workspace: &Path,
) -> Result<(), CliError> {
    let given = inputs
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    // Typed paths resolved beneath the workspace by the kernel (#56 item 2), before anything.
    match root.resolve_inputs_in(given, workspace) {
        Ok(_) => Ok(()),
        Err(transcript_exec::ExecError::UnknownInput { input, .. }) => {
            let declared: Vec<&str> = root.inputs.iter().map(|i| i.name.as_str()).collect();
            Err(CliError::Invalid(format!(
                "workflow '{}' has no input '{input}' (declared: {})",
                root.name,
                if declared.is_empty() {
                    "none".to_owned()
                } else {
                    declared.join(", ")
                }
            )))
        }
        Err(transcript_exec::ExecError::MissingInput { input, .. }) => Err(CliError::Invalid(
            format!("workflow '{}' needs --input {input}=VALUE", root.name),
        )),
        // A value without its declared shape (#48): a usage error, before anything runs.
        Err(transcript_exec::ExecError::BadInput {
            input, from, rule, ..
        }) => Err(CliError::Usage(format!(
            "workflow '{}': input 'inputs.{input}' from {} is refused: {rule}",
            root.name,
            match from {
                transcript_exec::InputSource::Given => format!("--input {input}=…"),
                transcript_exec::InputSource::Default => "its default".to_owned(),
            }
        ))),
        Err(e) => Err(CliError::Invalid(e.to_string())),
    }
}

/// The run's secret inputs (#48: declared `secret: true`) masked like `--redact` masks
/// keys, with or without it: in every record (the recorder's mask), the audit trail, the
/// plugins' stderr and every message printed about the run. `run.started` records them as
/// `"***"` (exec); the mask catches them wherever else they travel (an env value echoed, a
/// prompt, an error). A secret shorter than 4 characters would mask every occurrence of
/// common text: it is refused, naming the input.
fn with_secrets_masked(
    mut args: RunArgs,
    root: &transcript_exec::Workflow,
) -> Result<RunArgs, CliError> {
    let given: serde_json::Map<String, serde_json::Value> = args
        .inputs
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let resolved = root
        .resolve_inputs(given)
        .map_err(|e| CliError::Invalid(e.to_string()))?;
    let secrets: Vec<(&str, String)> = root
        .inputs
        .iter()
        .filter(|i| i.secret)
        .filter_map(|i| {
            let v = resolved.get(&i.name)?;
            Some((i.name.as_str(), transcript_exec::template::value_to_text(v)))
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if secrets.is_empty() {
        return Ok(args);
    }
    if let Some((name, _)) = secrets.iter().find(|(_, v)| v.chars().count() < 4) {
        return Err(CliError::Usage(format!(
            "input 'inputs.{name}' is secret and shorter than 4 characters: masking it would \
             mask every occurrence of such common text; give a real secret"
        )));
    }
    // The redactor main built is shared with the mask only: drop that one, then own it.
    args.mask = None;
    let base = match args.redactor.take().map(Arc::try_unwrap) {
        None => transcript_redact::Redactor::empty(),
        Some(Ok(redactor)) => redactor,
        Some(Err(_)) => {
            return Err(CliError::Usage(
                "internal: the redactor is shared before the run's secrets are added".to_owned(),
            ));
        }
    };
    let redactor = secrets
        .iter()
        .try_fold(base, |r, (name, value)| r.with_secret(name, value))
        .map_err(|e| CliError::Usage(format!("secret inputs: {e}")))?;
    let redactor = Arc::new(redactor);
    args.mask = Some(redactor.clone() as Arc<dyn EventMask>);
    args.redactor = Some(redactor);
    Ok(args)
}

/// Runs the workflow. Errors carry the exit code: a failed run (1), invalid input (3), an
/// incomplete transcript (4, takes precedence over success: a run whose transcript lost events
/// never reports success) or a signal (128+N).
pub async fn run(args: RunArgs, out: &mut dyn std::io::Write) -> Result<(), CliError> {
    run_reporting(args, out, &mut None).await
}

/// [`run`], telling `started` the run's id and transcript path once it has them.
pub async fn run_reporting(
    args: RunArgs,
    out: &mut dyn std::io::Write,
    started: &mut Option<(transcript_domain::RunId, PathBuf)>,
) -> Result<(), CliError> {
    let set = WorkflowSet::load(&args.workflow)
        .map_err(|e| CliError::Invalid(format!("invalid workflow: {e}")))?;
    let root = set.root().cloned().ok_or_else(|| {
        CliError::Invalid(format!("{}: no root workflow", args.workflow.display()))
    })?;
    check_inputs(&root, &args.inputs, &args.workspace)?;
    // Before anything starts: a kernel that cannot confine refuses the run (exit 2).
    let (sandbox, warnings) =
        SandboxPolicy::prepare(args.sandbox, &args.storage, &set, &args.workspace)
            .map_err(CliError::Usage)?;
    warnings.iter().for_each(|w| crate::diag!("{w}"));
    let args = with_secrets_masked(args, &root)?;
    let plugin_argvs = plugin_argvs(&args.plugins)?;
    // Before anything is created: a signal from now on cancels the run (see `signals`).
    let cancel = CancellationToken::new();
    let signals = crate::cmd::signals::Signals::register(cancel.clone());
    create_directories(&args)?;

    let (clock, ids) = crate::source::clock_and_ids(args.deterministic);
    let views = Views::wire(&args, clock.clone())?;
    let router = start_plugins(&args, &set, &plugin_argvs, &sandbox).await?;
    let service =
        build_service(&args, (clock, ids.clone()), views.factory.clone(), router)?.sandbox(sandbox);
    let service = service
        .build()
        .map_err(|e| CliError::Failed(e.to_string()))?;

    // Reject an invalid workflow before anything is recorded: no run id is
    // spent and no transcript file is created for a run that never starts.
    service
        .validate(&set)
        .map_err(|e| CliError::Invalid(format!("invalid workflow: {e}")))?;
    // A signal while plugins started: nothing is recorded for a run that never started.
    if let Some(signal) = signals.received() {
        return Err(CliError::Interrupted(signal));
    }
    signals.transcript_opening();
    let run_id = ids.next_run_id();
    let path = match &args.nats {
        Some(store) => PathBuf::from(format!("{}#{run_id}", store.url())),
        None => args.storage.join(run_id.file_name()),
    };
    let recorder = views
        .factory
        .create(run_id, None)
        .await
        .map_err(open_error)?;
    // The id first, so `transcript tail -f <id>` can follow the run from another terminal.
    crate::diag!("transcript: run {run_id} → {}", path.display());
    *started = Some((run_id, path.clone()));

    let outcome = service
        .run_with_recorder(&set, given_inputs(&args.inputs), recorder.clone(), cancel)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let closed = recorder.close().await;
    signals.transcript_closed();
    let internal = views.finish(&args).await;

    // Storage failures: the first with its cause, then how many more (not one line each).
    let mut storage_errors = outcome.transcript_errors.clone();
    if let Err(e) = closed {
        storage_errors.push(format!("closing the transcript failed: {e}"));
    }
    let masked = |text: &str| masked(args.redactor.as_deref(), text);
    report_problems(&storage_errors, &outcome.audit_errors, &masked);
    crate::exit::stdout_result(writeln!(out, "run_id: {run_id}"))?;
    crate::exit::stdout_result(writeln!(out, "transcript: {}", path.display()))?;
    let lines = |text: &str| masked_lines(args.redactor.as_deref(), text);
    verdict(&outcome, &storage_errors, (&masked, &lines));
    match signals.received() {
        Some(signal) => Err(CliError::Interrupted(signal)),
        None => exit_status(&outcome, &storage_errors, &internal),
    }
}

/// The `--plugin` commands split like a POSIX shell would (quotes, escapes), without running
/// one; before anything is created, like every other argument check.
fn plugin_argvs(plugins: &[String]) -> Result<Vec<Vec<String>>, CliError> {
    plugins
        .iter()
        .map(|plugin| match shell_words::split(plugin) {
            Ok(argv) if !argv.is_empty() => Ok(argv),
            Ok(_) => Err(CliError::Usage("--plugin needs a command".to_owned())),
            Err(e) => Err(CliError::Usage(format!("--plugin {plugin:?}: {e}"))),
        })
        .collect()
}

/// The storage and workspace directories, private to the user.
fn create_directories(args: &RunArgs) -> Result<(), CliError> {
    private_dir_all(&args.storage).map_err(|e| {
        CliError::Storage(format!(
            "{}: cannot create the storage directory: {e}",
            args.storage.display()
        ))
    })?;
    private_dir_all(&args.workspace).map_err(|e| CliError::Read {
        path: args.workspace.clone(),
        message: format!("cannot create the workspace directory: {e}"),
    })
}

/// The recorder factory with what watches the run live: the progress view on stderr and,
/// with `--otlp`, the live export.
struct Views {
    /// What the service records with: the JSONL recorder behind the live taps.
    factory: Arc<dyn RecorderFactory>,
    live: Option<transcript_otel::LiveExporter>,
    /// Why the live export could not start (said in the summary line).
    live_off: Option<String>,
    live_factory: Option<Arc<crate::cmd::tap::TapFactory>>,
    progress_factory: Arc<crate::cmd::progress::ProgressFactory>,
}

impl Views {
    /// The JSONL recorder factory (masked, with the run's clock and durability), wrapped in
    /// the live export's tap and the progress view's.
    fn wire(args: &RunArgs, clock: Arc<dyn transcript_domain::Clock>) -> Result<Views, CliError> {
        let factory: Arc<dyn RecorderFactory> = match &args.nats {
            Some(store) => {
                let mut factory = transcript_nats::NatsRecorderFactory::new(store.clone(), clock);
                if let Some(mask) = &args.mask {
                    factory = factory.with_mask(mask.clone());
                }
                Arc::new(factory)
            }
            None => {
                let mut factory = JsonlRecorderFactory::new(&args.storage)
                    .with_clock(clock)
                    .with_durability(args.durability);
                if let Some(mask) = &args.mask {
                    factory = factory.with_mask(mask.clone());
                }
                Arc::new(factory)
            }
        };
        // Live export never stops a run: settings that leave nothing to export to are
        // reported in the summary line at the end.
        let (live, live_off) = match &args.otlp {
            Some((config, capture)) => match crate::cmd::otel::start_live(config, *capture) {
                Ok(live) => (Some(live), None),
                Err(why) => (None, Some(why)),
            },
            None => (None, None),
        };
        let live_factory = live
            .as_ref()
            .map(|l| Arc::new(crate::cmd::otel::live_factory(factory.clone(), l.sender())));
        let factory: Arc<dyn RecorderFactory> = match &live_factory {
            Some(f) => f.clone(),
            None => factory,
        };
        let progress_factory = crate::cmd::progress::ProgressFactory::new(factory, args.style);
        Ok(Views {
            factory: progress_factory.clone(),
            live,
            live_off,
            live_factory,
            progress_factory,
        })
    }

    /// Ends the views once the recorder is closed: the progress view, then the live export
    /// (waiting at most `--otlp-flush-timeout`). A panicking view or tap does not hide behind a
    /// successful exit: its error is returned.
    async fn finish(self, args: &RunArgs) -> Vec<String> {
        let mut internal: Vec<String> = Vec::new();
        internal.extend(
            self.progress_factory
                .finish()
                .await
                .iter()
                .map(ToString::to_string),
        );
        if let (Some(live), Some(forwarding), Some((config, _))) =
            (self.live, &self.live_factory, &args.otlp)
        {
            internal.extend(forwarding.drain("the live OTLP export").await.err());
            flush_live(live, config, args.otlp_flush_timeout).await;
        }
        if let (Some(why), Some((config, _))) = (&self.live_off, &args.otlp) {
            crate::cmd::otel::report_live_off(config, why);
        }
        internal
    }
}

/// Waits for the live export to deliver what is queued, at most `timeout`, and reports it.
async fn flush_live(
    live: transcript_otel::LiveExporter,
    config: &transcript_otel::OtlpHttpConfig,
    timeout: std::time::Duration,
) {
    let endpoint = config.display_traces_url();
    // A plain thread, not the runtime's blocking pool: if the endpoint never answers, the
    // command does not wait for it past the flush timeout (the process exits regardless).
    let progress = live.progress();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(live.finish());
    });
    match tokio::task::spawn_blocking(move || rx.recv_timeout(timeout)).await {
        Ok(Ok(r)) => crate::cmd::otel::report_live(config, &r),
        _ => {
            let p = progress.snapshot();
            crate::diag!(
                "transcript: warning: OTLP export to {endpoint} did not finish within {}s: {} spans sent, {} failed, {} not sent (queued or in a request that did not return), {} events not yet mapped to spans",
                timeout.as_secs(),
                p.spans_sent,
                p.spans_failed,
                p.spans_pending(),
                p.events_pending()
            )
        }
    }
}

/// The tool router: the built-in tools, the workflows' declared plugins and the `--plugin`
/// ones.
async fn start_plugins(
    args: &RunArgs,
    set: &WorkflowSet,
    plugin_argvs: &[Vec<String>],
    sandbox: &SandboxPolicy,
) -> Result<ToolRouter, CliError> {
    let mut router = ToolRouter::with_builtins();
    let mask = args.redactor.clone().map(text_mask);
    let mut limits = transcript_exec::PluginLimits::withholding(withheld_env(args));
    limits.confinement = sandbox.for_plugins(&args.workspace);
    limits.network = sandbox.net_for_step(None);
    transcript_exec::start_declared_plugins_with(set, &mut router, limits.clone(), mask.clone())
        .await
        .map_err(|e| CliError::Failed(format!("{}: plugin: {e}", args.workflow.display())))?;
    for (plugin, argv) in args.plugins.iter().zip(plugin_argvs) {
        let started = ExternalPlugin::start_masked_with(argv, None, limits.clone(), mask.clone())
            .await
            .map_err(|e| CliError::Failed(format!("plugin {plugin:?}: {e}")))?;
        router
            .register_plugin(Arc::new(started))
            .map_err(|e| CliError::Failed(format!("plugin {plugin:?}: {e}")))?;
    }
    Ok(router)
}

/// What no process of the run inherits: the runner's NATS credentials (those it consumed).
fn withheld_env(args: &RunArgs) -> transcript_exec::WithheldEnv {
    let nats = args
        .nats
        .is_some()
        .then_some(&transcript_nats::CREDENTIAL_ENV[..]);
    transcript_exec::WithheldEnv::present(nats.unwrap_or_default())
}

/// The execution service: the workspace, clock and ids, the recorder factory, the audit trail
/// (masked like the transcript), the tools, the HTTP agent and the demo steps.
fn build_service(
    args: &RunArgs,
    (clock, ids): (
        Arc<dyn transcript_domain::Clock>,
        Arc<dyn transcript_domain::RunIdGenerator>,
    ),
    factory: Arc<dyn RecorderFactory>,
    router: ToolRouter,
) -> Result<transcript_exec::ServiceBuilder, CliError> {
    let mut builder = ExecutionService::builder(&args.workspace, clock, ids)
        .deterministic(args.deterministic)
        .kill_grace(args.kill_grace)
        .withheld_env(withheld_env(args))
        .recorder_factory(factory)
        .audit_file(args.storage.join("audit.jsonl"))
        .router(router)
        // `provider: openai`: the OpenAI-compatible HTTP agent, its endpoint and key from the
        // step's env: or OPENAI_BASE_URL / OPENAI_API_KEY. claude, codex and gemini run their
        // CLI presets without registration.
        .agent_runner(
            "openai",
            Arc::new(transcript_exec::HttpAgentRunner::from_env()),
        )
        // Agent steps with `mcp_servers:` reach them through transcript-mcp's proxy.
        .mcp_gateway(Arc::new(crate::mcp_gateway::ProxyGateway));
    // `transcript replay`: every agent execution talks to its recorded turns.
    if let Some(wire) = &args.wire {
        builder = wire(builder);
    }
    // On NATS every event's line must fit the servers' max_payload (#44).
    if let Some(store) = &args.nats {
        let wanted = transcript_exec::bounded::DEFAULT_MAX_VALUE_BYTES;
        builder = builder
            .max_value_bytes(store.run_value_cap(wanted))
            .max_line_bytes(store.max_payload());
    }
    // The audit trail beside the transcript is masked like it.
    if let Some(mask) = args.redactor.clone().map(text_mask) {
        builder = builder.audit_mask(mask);
    }
    crate::demo::register_demo_steps(builder).map_err(CliError::Failed)
}

/// A transcript that cannot be opened: a run id that already has one (`--deterministic` twice
/// into one storage) is an input problem, not a storage failure.
fn open_error(e: transcript_domain::RecordError) -> CliError {
    let exists = run_exists(&e);
    let message = format!("cannot open the transcript: {e}");
    if exists {
        CliError::Invalid(message)
    } else {
        CliError::Storage(message)
    }
}

/// Whether opening a transcript failed because its run already has one: infra reports that as
/// `RecordError::Storage` whose source has the kind `AlreadyExists` (a typed fact, never the
/// message's words: a storage directory named "already exists" is no match).
fn run_exists(e: &transcript_domain::RecordError) -> bool {
    matches!(
        e,
        transcript_domain::RecordError::Storage { source: Some(io), .. }
            if io.kind() == std::io::ErrorKind::AlreadyExists
    )
}

/// Creates `dir` and its missing parents as `0o700`, whatever the umask (which can only remove
/// permission bits): the directories we create hold transcripts and audit trails.
fn private_dir_all(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The default workspace: the current directory.
pub fn default_workspace() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| Path::new(".").to_path_buf())
}

/// The redactor as the exec crate's text mask: the audit trail, a failing
/// command's stderr and the plugins' stderr are masked like the transcript.
fn text_mask(redactor: Arc<transcript_redact::Redactor>) -> Arc<dyn transcript_exec::TextMask> {
    Arc::new(move |text: &str| redactor.mask_text(text).into_owned())
}
