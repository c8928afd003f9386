//! `transcript replay`: runs a recorded run's workflow again with the recording as the model
//! (transcript-replay: one model server per agent execution on 127.0.0.1, its turns matched
//! strictly or in order), prints the new run as `run` does, then its comparison with the
//! recording (transcript-compare's diff). Exit 0 when equal, 1 when different, 2 on a usage
//! error (a secret input not given again), 3 when the run or a file is not found or invalid,
//! 4 on any other error.
//! The workflow file and the inputs come from the recorded `run.started` (wire decision 16)
//! unless given; the new run's `run.started` names the run it replays (`replay_of`).

mod trials;

use std::path::PathBuf;
use std::sync::Arc;

use transcript_compare::{DiffOptions, RunRecord, diff_with_definitions};
use transcript_domain::DecodedEvent;
use transcript_replay::engine::ReplayEndpoints;
use transcript_replay::{
    ChosenWorkflow, Matching, Recording, Replayer, WorkflowChoiceError, WorkspaceRoots,
    choose_workflow,
};

use crate::CliError;
use crate::cmd::run::RunArgs;
use crate::exit::stdout_result;
use crate::source;

/// How command steps run during a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CommandsMode {
    /// Run them again, for real.
    Live,
    /// Serve their recorded output and exit code.
    Record,
}

/// How requests are matched against the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MatchMode {
    /// The prompt and every turn's tool results must equal the recorded ones; the first
    /// difference fails its step.
    Strict,
    /// Serve the recorded turns in order; differences are warnings.
    Fifo,
}

// `transcript replay`'s arguments (no doc comment: the variant's is the command's help).
#[derive(Debug, clap::Args)]
pub struct ReplayCmd {
    /// The recorded run: a transcript file, a run id (or unique prefix) or `latest`.
    pub run: String,
    /// The workflow to run (default: the file the recorded run names); give it for a changed
    /// copy.
    #[arg(long, value_name = "FILE")]
    pub workflow: Option<PathBuf>,
    /// strict: the prompt and each turn's tool results must equal the recorded ones (the first
    /// difference fails its step); fifo: serve the recorded turns in order, differences are
    /// warnings.
    #[arg(long = "match", value_enum, default_value_t = MatchMode::Strict)]
    pub matching: MatchMode,
    /// live: command steps run again; record: they get their recorded output and exit code.
    #[arg(long, value_enum, default_value_t = CommandsMode::Live)]
    pub commands: CommandsMode,
    /// Workflow input (`KEY=VALUE`), over the recorded run's; repeatable.
    #[arg(long = "input", value_name = "KEY=VALUE", value_parser = crate::cmd::run::parse_input)]
    pub inputs: Vec<(String, String)>,
    /// Working directory for commands and file tools (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// `off`: run every process without the kernel's confinement (Landlock), warned once and
    /// written in each step.started.
    #[arg(long, value_name = "on|off", default_value_t = transcript_exec::sandbox::SandboxMode::Confined)]
    pub sandbox: transcript_exec::sandbox::SandboxMode,
    /// `all`: every process uses the host's network, whatever its step's `network:` says;
    /// `declared` (default): each step reaches only what it declares (and an agent CLI its
    /// replayed model endpoint).
    #[arg(long, value_name = "declared|all", default_value_t = transcript_exec::sandbox::net::RunNetwork::Declared)]
    pub network: transcript_exec::sandbox::net::RunNetwork,
    /// What if (#61): the steps that started before STEP are served from the recording; STEP
    /// (`path`, `path#N` for an iteration) and the rest run live, as `run` runs them.
    #[arg(long, value_name = "STEP")]
    pub live_from: Option<String>,
    /// With --live-from: how many trials (each a run of its own).
    #[arg(long, default_value_t = 1, requires = "live_from", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub trials: u32,
    /// With --live-from: how many trials run at once (their progress printed in trial order).
    /// They share the workspace: give more than 1 only to a workflow whose steps do not
    /// write files another trial reads.
    #[arg(long, default_value_t = 1, requires = "live_from", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// With --live-from: the `check` expectations each trial is held to.
    #[arg(long, value_name = "FILE", requires = "live_from")]
    pub expect: Option<PathBuf>,
    /// With --live-from: JUnit XML, one test case per trial and expectation.
    #[arg(long, value_name = "FILE", requires = "live_from")]
    pub junit: Option<PathBuf>,
    /// With --live-from: the report as JSON.
    #[arg(long, requires = "live_from")]
    pub json: bool,
}

/// `transcript replay`: the run's arguments (defaults of `run`) with the replay's own.
pub fn command(
    cmd: ReplayCmd,
    (storage, nats): (PathBuf, Option<transcript_nats::StorageUrl>),
    color: crate::style::ColorChoice,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let store = crate::store::open(&storage)?;
    let mut args = RunArgs {
        redactor: None,
        workflow: PathBuf::new(),
        inputs: cmd.inputs,
        // On NATS the run records there (its audit trail in the default directory, as `run`).
        storage: match nats {
            Some(_) => PathBuf::from(crate::source::DEFAULT_STORAGE),
            None => storage,
        },
        nats: None,
        workspace: cmd
            .workspace
            .unwrap_or_else(crate::cmd::run::default_workspace),
        plugins: Vec::new(),
        mask: None,
        durability: transcript_infra::Durability::None,
        deterministic: false,
        otlp: None,
        otlp_flush_timeout: std::time::Duration::from_secs(5),
        style: crate::style::Style::for_stderr(color),
        kill_grace: std::time::Duration::from_secs(2),
        wire: None,
        sandbox: (cmd.sandbox, cmd.network),
    };
    let replay = ReplayArgs {
        run: cmd.run,
        workflow: cmd.workflow,
        matching: cmd.matching,
        commands: cmd.commands,
        style: crate::style::Style::for_stdout(color),
        store,
        trials: cmd.live_from.map(|live_from| trials::TrialArgs {
            live_from,
            trials: cmd.trials,
            jobs: cmd.jobs,
            expect: cmd.expect,
            junit: cmd.junit,
            json: cmd.json,
        }),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        // On NATS storage the new run is recorded there; the recording is read through the
        // read port (from the store, or the file named).
        if let Some(url) = &nats {
            args.nats = Some(crate::nats_connect::connect_for_run(url, args.durability).await?);
        }
        run(replay, args, out).await
    })
}

/// What `replay` needs besides the run's usual arguments.
pub struct ReplayArgs {
    /// The recorded run (file, run id, prefix or `latest`).
    pub run: String,
    /// The workflow file (default: the one the recorded run names).
    pub workflow: Option<PathBuf>,
    /// Matching.
    pub matching: MatchMode,
    /// Command steps.
    pub commands: CommandsMode,
    /// How the comparison is painted on stdout.
    pub style: crate::style::Style,
    /// Where the recording is read, and the replay read back after it ran.
    pub store: crate::store::Store,
    /// `--live-from`: fork the recording there and run trials (#61).
    pub trials: Option<trials::TrialArgs>,
}

/// The engine's wiring of a replay: `endpoints` for every agent execution (and, with
/// `--commands record`, every command step), the new run naming the one it replays.
pub(super) fn wire<E>(
    endpoints: Arc<E>,
    commands: CommandsMode,
    replay_of: transcript_domain::RunId,
) -> crate::cmd::run::EngineWiring
where
    E: transcript_exec::model_endpoint::ModelEndpoints
        + transcript_exec::model_endpoint::RecordedCommands
        + 'static,
{
    Box::new(move |builder| {
        let builder = builder
            .model_endpoints(endpoints.clone())
            .replay_of(replay_of);
        match commands {
            CommandsMode::Record => builder.recorded_commands(endpoints.clone()),
            CommandsMode::Live => builder,
        }
    })
}

/// A trial's run arguments: `base`'s, without the engine's wiring (each trial has its own).
pub(super) fn trial_args(base: &RunArgs) -> RunArgs {
    RunArgs {
        workflow: base.workflow.clone(),
        inputs: base.inputs.clone(),
        storage: base.storage.clone(),
        nats: base.nats.clone(),
        workspace: base.workspace.clone(),
        plugins: base.plugins.clone(),
        mask: base.mask.clone(),
        redactor: base.redactor.clone(),
        durability: base.durability,
        deterministic: base.deterministic,
        otlp: None,
        otlp_flush_timeout: base.otlp_flush_timeout,
        style: base.style,
        kill_grace: base.kill_grace,
        wire: None,
        sandbox: base.sandbox,
    }
}

/// A run read for a replay (the recording) or a comparison (both): its file, its record for
/// the diff, and what the replay needs of it.
pub(super) struct Read {
    /// Its file (or location).
    pub(super) path: PathBuf,
    /// Its record for the comparison.
    pub(super) record: RunRecord,
    /// What a replay needs of it.
    pub(super) recording: Recording,
    /// Its events (the root run's).
    pub(super) events: Vec<DecodedEvent>,
    /// The workspace root its `run.started` records (wire decision 20).
    pub(super) workspace: Option<PathBuf>,
    /// Its step definitions, from the workflow text it keeps (#58 item 3).
    pub(super) definitions: transcript_compare::StepDefinitions,
    /// Its child runs' events, by id (every level).
    pub(super) children: std::collections::HashMap<transcript_domain::RunId, Vec<DecodedEvent>>,
}

/// Reads `arg` for a replay or its comparison; `roots` maps the replay's workspace root back to
/// the recorded one in every event first (the comparison of a replay in another checkout).
pub(super) fn read_run(
    arg: &str,
    store: &crate::store::Store,
    roots: Option<&WorkspaceRoots>,
) -> Result<Read, CliError> {
    let run = source::open_run(arg, store, None)?;
    let invalid = |message: String| CliError::Read {
        path: run.path.clone(),
        message,
    };
    // Every child run read once, kept for a fork inside one (`call/step`).
    let mut children = std::collections::HashMap::new();
    let recording = {
        let mut lookup = run.lookup();
        Recording::read(&run.events, &mut |id| {
            let events = lookup(id)?;
            children.insert(id, events.clone());
            Some(events)
        })
        .map_err(|e| invalid(e.to_string()))?
    };
    // Priced as `transcript diff` prices (the embedded table).
    let table = super::receipts::pricing(None)?;
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let mapped = |events: Vec<DecodedEvent>| match roots {
        Some(r) => events.into_iter().map(|e| r.event_to_recorded(e)).collect(),
        None => events,
    };
    let record = {
        let mut lookup = run.lookup();
        let mut lookup = |id| lookup(id).map(mapped);
        RunRecord::build(&mapped(run.events.clone()), &mut lookup, Some(&price))
    };
    run.children_read()?;
    let workspace = run
        .events
        .iter()
        .find_map(|e| e.step().and_then(|s| s.workspace.clone()))
        .map(PathBuf::from);
    let definitions = super::diff::definitions(&run.events);
    Ok(Read {
        path: run.path,
        record,
        recording,
        events: run.events,
        workspace,
        definitions,
        children,
    })
}

/// Replays `replay.run` with `args` (its `workflow` replaced by the one to run); the exit code
/// follows the comparison: 0 equal, 1 different, 4 on an error (a signal keeps its own).
pub async fn run(
    replay: ReplayArgs,
    args: RunArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    match replay.trials.clone() {
        Some(trials) => as_replay_error(trials::run(replay, args, trials, out).await),
        None => as_replay_error(replay_inner(replay, args, out).await),
    }
}

async fn replay_inner(
    replay: ReplayArgs,
    mut args: RunArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let recorded = read_run(&replay.run, &replay.store, None)?;
    let here = args
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| args.workspace.clone());
    let roots = (recorded.workspace.as_deref()).and_then(|then| WorkspaceRoots::new(then, &here));
    let chosen = workflow_to_run(replay.workflow, &recorded, roots.as_ref())?;
    args.workflow = chosen.file.clone();
    args.inputs = recorded
        .recording
        .inputs_with(std::mem::take(&mut args.inputs))
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let matching = match replay.matching {
        MatchMode::Strict => Matching::Strict,
        MatchMode::Fifo => Matching::Fifo,
    };
    let mut replayer = Replayer::new(recorded.recording.tape.clone(), matching);
    if let Some(then) = &recorded.workspace {
        // Paths in the recording name its workspace; this replay's are under its own (#58).
        replayer = replayer.with_workspace_roots(then.clone(), here.clone());
    }
    // Every agent execution on its recorded turns, command steps on their recorded outcomes
    // with `--commands record`, the new run naming the replayed one.
    let endpoints = Arc::new(ReplayEndpoints::new(replayer));
    args.wire = Some(wire(endpoints, replay.commands, recorded.recording.run_id));
    let mut started = None;
    let ran = crate::cmd::run::run_reporting(args, out, &mut started).await;
    let Some((run_id, _)) = started else {
        // Nothing recorded: the run's own error says why.
        return ran;
    };
    match ran {
        Ok(()) | Err(CliError::Reported(1)) => {}
        Err(other) => return Err(other),
    }
    // Read back from the store it was recorded to (the directory, or NATS).
    let replayed = read_run(&run_id.to_string(), &replay.store, roots.as_ref())?;
    // The comparison `transcript diff <recording> <replay>` prints.
    let doc = diff_with_definitions(
        &recorded.record,
        &replayed.record,
        &DiffOptions::default(),
        (&recorded.definitions, &replayed.definitions),
    );
    let labels = (
        recorded.path.display().to_string(),
        replayed.path.display().to_string(),
    );
    let text = transcript_compare::render_diff_text(&doc, (&labels.0, &labels.1), &replay.style);
    stdout_result(out.write_all(text.as_bytes()))?;
    fifo_warnings(&replayed.record);
    if doc.equal {
        Ok(())
    } else {
        Err(CliError::Reported(1))
    }
}

/// Says at the end, on stderr, every difference a `--match fifo` replay kept as a warning (in
/// its steps' results, where `show` prints them too).
fn fifo_warnings(record: &RunRecord) {
    let lines: Vec<String> = (record.warnings().into_iter())
        .map(|(step, text)| format!("  step {step}: {text}"))
        .collect();
    if !lines.is_empty() {
        crate::diag!(
            "transcript: replay: {} warning(s) (--match fifo):\n{}",
            lines.len(),
            crate::style::clean(&lines.join("\n"))
        );
    }
}

/// The workflow to run (transcript-replay's `choose_workflow`), said on stderr when it is the
/// text the recording keeps.
pub(super) fn workflow_to_run(
    given: Option<PathBuf>,
    recorded: &Read,
    roots: Option<&WorkspaceRoots>,
) -> Result<ChosenWorkflow, CliError> {
    let chosen = choose_workflow(given, recorded.recording.workflow.as_ref(), roots).map_err(
        |e| match e {
            WorkflowChoiceError::NotNamed => {
                CliError::Usage(format!("{}: {e}", recorded.path.display()))
            }
            WorkflowChoiceError::NotHere(path) => CliError::NotFound {
                what: "the recorded run's workflow file (give --workflow FILE)".to_owned(),
                path,
            },
            other => CliError::Failed(other.to_string()),
        },
    )?;
    if let Some(file) = &chosen.instead_of {
        crate::diag!(
            "transcript: replay: note: {} is not here: running the workflow text the recording keeps",
            crate::style::clean(&file.display().to_string())
        );
    }
    note_changed(&chosen.file, recorded);
    Ok(chosen)
}

/// Says on stderr when the workflow file to run is not the one recorded (its step definitions
/// then show in the comparison).
fn note_changed(file: &std::path::Path, recorded: &Read) {
    let Ok(bytes) = std::fs::read(file) else {
        return;
    };
    if let Some((then, now)) = recorded.recording.workflow_changed(&bytes) {
        crate::diag!(
            "transcript: replay: note: {} changed since the recording (sha256 {then} then, {now} now)",
            crate::style::clean(&file.display().to_string())
        );
    }
}

/// An error of a replay is said once on stderr and exits 3 when something named was not found
/// or is invalid (an unknown run, an unreadable recording, an invalid workflow), else 4; a
/// difference (1), a usage error (2), a signal and a closed stdout keep their codes.
fn as_replay_error(result: Result<(), CliError>) -> Result<(), CliError> {
    match result {
        Ok(()) => Ok(()),
        Err(
            e @ (CliError::Reported(_)
            | CliError::Usage(_)
            | CliError::Interrupted(_)
            | CliError::BrokenPipe),
        ) => Err(e),
        Err(e) => {
            crate::diag!(
                "transcript: replay: {}",
                crate::style::clean(&e.to_string())
            );
            Err(CliError::Reported(if e.exit_code() == 3 { 3 } else { 4 }))
        }
    }
}
