//! `transcript run`: runs a workflow with the ExecutionService and the JSONL
//! recorder, showing live progress on stderr from a fan-out subscription
//! (the first live consumer of the recorder).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventKind, EventMask, EventType, RecorderFactory, Subscription};
use transcript_exec::{ExecutionService, ExternalPlugin, ToolRouter, WorkflowSet};
use transcript_infra::{Durability, JsonlRecorderFactory};

use crate::CliError;
use crate::cmd::tail::summary;
use crate::style::Style;

/// Everything `run` needs.
pub struct RunArgs {
    /// The workflow file.
    pub workflow: PathBuf,
    /// `--input k=v` pairs (values parsed as JSON when they parse, else strings).
    pub inputs: Vec<(String, String)>,
    /// Storage directory.
    pub storage: PathBuf,
    /// Working directory of the run's commands and file tools.
    pub workspace: PathBuf,
    /// External plugins (`--plugin "cmd args"`).
    pub plugins: Vec<String>,
    /// Masking stage for the recorder.
    pub mask: Option<Arc<dyn EventMask>>,
    /// Durability policy.
    pub durability: Durability,
    /// Sequential ids, a manual clock and sequential branches (byte-stable output).
    pub deterministic: bool,
    /// Live OTLP export: endpoint and content capture.
    pub otlp: Option<(String, bool)>,
    /// Stderr styling.
    pub style: Style,
}

/// Parses `k=v`.
pub fn parse_input(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// Runs the workflow; returns whether it succeeded.
pub async fn run(args: RunArgs) -> Result<bool, CliError> {
    let set = WorkflowSet::load(&args.workflow)
        .map_err(|e| CliError::Failed(format!("invalid workflow: {e}")))?;
    let root = set.root().cloned().ok_or_else(|| {
        CliError::Failed(format!("{}: no root workflow", args.workflow.display()))
    })?;
    std::fs::create_dir_all(&args.storage).map_err(|e| CliError::Read {
        path: args.storage.clone(),
        message: format!("cannot create storage: {e}"),
    })?;
    std::fs::create_dir_all(&args.workspace).map_err(|e| CliError::Read {
        path: args.workspace.clone(),
        message: format!("cannot create workspace: {e}"),
    })?;

    let (clock, ids) = crate::source::clock_and_ids(args.deterministic);
    let mut factory = JsonlRecorderFactory::new(&args.storage)
        .with_clock(clock.clone())
        .with_durability(args.durability);
    if let Some(mask) = &args.mask {
        factory = factory.with_mask(mask.clone());
    }
    let factory: Arc<dyn RecorderFactory> = Arc::new(factory);
    let live = match &args.otlp {
        Some((endpoint, capture)) => Some(crate::cmd::otel::start_live(endpoint, *capture)?),
        None => None,
    };
    let live_factory = live.as_ref().map(|l| {
        Arc::new(crate::cmd::otel::LiveFactory::new(
            factory.clone(),
            l.sender(),
        ))
    });
    let factory: Arc<dyn RecorderFactory> = match &live_factory {
        Some(f) => f.clone(),
        None => factory,
    };

    let mut router = ToolRouter::with_builtins();
    transcript_exec::start_declared_plugins(&set, &mut router)
        .await
        .map_err(|e| CliError::Failed(format!("{}: plugin: {e}", args.workflow.display())))?;
    for plugin in &args.plugins {
        let argv: Vec<String> = plugin.split_whitespace().map(str::to_owned).collect();
        let started = ExternalPlugin::start(&argv, None)
            .await
            .map_err(|e| CliError::Failed(format!("plugin {plugin:?}: {e}")))?;
        router
            .register_plugin(Arc::new(started))
            .map_err(|e| CliError::Failed(format!("plugin {plugin:?}: {e}")))?;
    }
    let builder = ExecutionService::builder(&args.workspace, clock.clone(), ids.clone())
        .deterministic(args.deterministic)
        .recorder_factory(factory.clone())
        .audit_file(args.storage.join("audit.jsonl"))
        .router(router);
    let service = transcript_exec::demo::register_demo_steps(builder)
        .map_err(CliError::Failed)?
        .build()
        .map_err(|e| CliError::Failed(e.to_string()))?;

    // Reject an invalid workflow before anything is recorded: no run id is
    // spent and no transcript file is created for a run that never starts.
    service
        .validate(&set)
        .map_err(|e| CliError::Failed(format!("invalid workflow: {e}")))?;
    let run_id = ids.next_run_id();
    let recorder = factory
        .create(run_id, None)
        .await
        .map_err(|e| CliError::Failed(format!("cannot open transcript: {e}")))?;
    let subscription = recorder
        .subscribe(None)
        .await
        .map_err(|e| CliError::Failed(format!("cannot subscribe: {e}")))?;
    let progress = tokio::spawn(show_progress(
        subscription,
        root.steps.len() as u64,
        args.style,
    ));

    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("transcript: interrupted, cancelling the run…");
            on_signal.cancel();
        }
    });

    let inputs: Map<String, Value> = args
        .inputs
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone())),
            )
        })
        .collect();
    let outcome = service
        .run_with_recorder(&set, inputs, recorder.clone(), cancel)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let closed = recorder.close().await;
    let _ = progress.await;
    if let (Some(live), Some(forwarding), Some((endpoint, _))) = (live, &live_factory, &args.otlp) {
        forwarding.drain().await;
        let report = tokio::task::spawn_blocking(move || live.finish()).await;
        match report {
            Ok(r) => crate::cmd::otel::report_live(endpoint, &r),
            Err(e) => eprintln!("transcript: warning: OTLP export thread failed: {e}"),
        }
    }
    closed.map_err(|e| CliError::Failed(format!("closing the transcript failed: {e}")))?;

    for e in &outcome.transcript_errors {
        eprintln!("transcript: warning: recorder: {e}");
    }
    for e in &outcome.audit_errors {
        eprintln!("transcript: warning: audit: {e}");
    }
    let path = args.storage.join(run_id.file_name());
    println!("run_id: {run_id}");
    println!("transcript: {}", path.display());
    match &outcome.error {
        Some(err) => {
            eprintln!(
                "transcript: run {} {}: {err}",
                outcome.workflow,
                status_word(outcome.succeeded())
            );
        }
        None => eprintln!(
            "transcript: run {} {}",
            outcome.workflow,
            status_word(outcome.succeeded())
        ),
    }
    Ok(outcome.succeeded())
}

fn status_word(ok: bool) -> &'static str {
    if ok { "succeeded" } else { "failed" }
}

/// Renders the live stream: a progress bar over the top-level steps on a
/// terminal, plain lines otherwise.
async fn show_progress(mut sub: Box<dyn Subscription>, top_level_steps: u64, style: Style) {
    let terminal = std::io::stderr().is_terminal();
    let bar = if terminal {
        let bar = ProgressBar::new(top_level_steps);
        if let Ok(s) = ProgressStyle::with_template("{bar:30} {pos}/{len} steps {wide_msg}") {
            bar.set_style(s);
        }
        Some(bar)
    } else {
        None
    };
    while let Some(event) = sub.next().await {
        let decoded: transcript_domain::DecodedEvent = (*event).clone().into();
        let interesting = matches!(
            decoded.kind,
            EventKind::Known(
                EventType::StepStarted
                    | EventType::StepCompleted
                    | EventType::CallWorkflowStarted
                    | EventType::CallWorkflowCompleted
                    | EventType::ToolCall
                    | EventType::ToolResult
                    | EventType::MessageAssistant
                    | EventType::RunCompleted
            )
        );
        let top_level_done = matches!(
            decoded.kind,
            EventKind::Known(EventType::StepCompleted | EventType::CallWorkflowCompleted)
        ) && !decoded.path.contains('.');
        match &bar {
            Some(bar) => {
                if interesting {
                    bar.println(summary(&decoded, &style));
                }
                if top_level_done {
                    bar.inc(1);
                }
                bar.set_message(decoded.path.clone());
            }
            None => {
                if interesting {
                    eprintln!("{}", summary(&decoded, &Style::plain()));
                }
            }
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let dropped = sub.dropped();
    if dropped > 0 {
        eprintln!(
            "transcript: progress display skipped {dropped} events (the transcript has all of them)"
        );
    }
}

/// The default workspace: the current directory.
pub fn default_workspace() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| Path::new(".").to_path_buf())
}
