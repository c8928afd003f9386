//! `transcript replay`: runs a recorded run's workflow again with the recording as the model
//! (transcript-replay: one model server per agent execution on 127.0.0.1, its turns matched
//! strictly or in order), prints the new run as `run` does, then its comparison with the
//! recording (transcript-compare's diff). Exit 0 when equal, 1 when different, 4 on an error.
//! The workflow file and the inputs come from the recorded `run.started` (wire decision 16)
//! unless given; the new run's `run.started` names the run it replays (`replay_of`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use sha2::Digest as _;
use transcript_compare::{DiffOptions, RunRecord, diff};
use transcript_domain::{DecodedPayload, EventKind, EventType, RunId, WorkflowSource};
use transcript_replay::{Matching, Replayer, Tape};

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
}

/// The recorded run, read: its file, its id, its events and child runs as a comparison
/// record, its tape and its provenance (wire decision 16).
struct Recorded {
    path: PathBuf,
    run_id: RunId,
    record: RunRecord,
    tape: Tape,
    workflow: Option<WorkflowSource>,
    inputs: Map<String, Value>,
}

fn read_run(arg: &str, storage: &Path) -> Result<Recorded, CliError> {
    let run = source::open_run(arg, storage, None)?;
    let Some(first) = run.events.first() else {
        return Err(CliError::Read {
            path: run.path.clone(),
            message: "no line of it is a transcript event".to_owned(),
        });
    };
    let run_id = first.run_id;
    let tape = Tape::build(&run.events, &mut run.lookup()).map_err(|e| CliError::Read {
        path: run.path.clone(),
        message: e.to_string(),
    })?;
    let record = RunRecord::build(&run.events, &mut run.lookup(), None);
    run.children_read()?;
    let started = run.events.iter().find_map(|e| match (&e.kind, &e.payload) {
        (EventKind::Known(EventType::RunStarted), DecodedPayload::Step(s)) => Some(s),
        _ => None,
    });
    let workflow = started.and_then(|s| s.workflow.clone());
    let inputs = started
        .and_then(|s| s.inputs.as_ref())
        .and_then(|i| i.try_to_value().ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    Ok(Recorded {
        path: run.path,
        run_id,
        record,
        tape,
        workflow,
        inputs,
    })
}

/// Replays `replay.run` with `args` (its `workflow` replaced by the one to run); the exit code
/// follows the comparison: 0 equal, 1 different, 4 on an error (a signal keeps its own).
pub async fn run(
    replay: ReplayArgs,
    args: RunArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    as_replay_error(replay_inner(replay, args, out).await)
}

async fn replay_inner(
    replay: ReplayArgs,
    mut args: RunArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    if replay.commands == CommandsMode::Record {
        return Err(CliError::Usage(
            "--commands record is not supported yet: command steps run live".to_owned(),
        ));
    }
    let recorded = read_run(&replay.run, &args.storage)?;
    args.workflow = workflow_file(replay.workflow, &recorded)?;
    args.inputs = inputs(&recorded, std::mem::take(&mut args.inputs))?;
    args.replay_of = Some(recorded.run_id);
    let matching = match replay.matching {
        MatchMode::Strict => Matching::Strict,
        MatchMode::Fifo => Matching::Fifo,
    };
    let replayer = Replayer::new(recorded.tape.clone(), matching);
    args.endpoints = Some(Arc::new(crate::replay_endpoints::ReplayEndpoints::new(
        replayer,
    )));
    let storage = args.storage.clone();
    let mut started = None;
    let ran = crate::cmd::run::run_reporting(args, out, &mut started).await;
    let Some((_, path)) = started else {
        // Nothing recorded: the run's own error says why.
        return ran;
    };
    match ran {
        Ok(()) | Err(CliError::Reported(1)) => {}
        Err(other) => return Err(other),
    }
    let replayed = read_run(&path.display().to_string(), &storage)?;
    let doc = diff(&recorded.record, &replayed.record, &DiffOptions::default());
    let text = crate::cmd::replay_diff::render(&doc, &recorded.path.display().to_string());
    stdout_result(out.write_all(text.as_bytes()))?;
    if doc.equal {
        Ok(())
    } else {
        Err(CliError::Reported(1))
    }
}

/// The workflow to run: `--workflow`, else the file the recorded run names (said on stderr
/// when its bytes changed since).
fn workflow_file(given: Option<PathBuf>, recorded: &Recorded) -> Result<PathBuf, CliError> {
    if let Some(file) = given {
        return Ok(file);
    }
    let Some(source) = &recorded.workflow else {
        return Err(CliError::Usage(format!(
            "{}: the recorded run does not name its workflow file: give --workflow FILE",
            recorded.path.display()
        )));
    };
    let file = PathBuf::from(&source.path);
    let bytes = std::fs::read(&file).map_err(|e| CliError::Read {
        path: file.clone(),
        message: format!("the recorded run's workflow file: {e} (give --workflow FILE)"),
    })?;
    let now = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    if now != source.sha256 {
        crate::diag!(
            "transcript: replay: note: {} changed since the recording (sha256 {} then, {now} now)",
            crate::style::clean(&source.path),
            source.sha256
        );
    }
    Ok(file)
}

/// The recorded inputs with `--input` over them; a secret one was recorded masked (`"***"`)
/// and must be given again.
fn inputs(
    recorded: &Recorded,
    given: Vec<(String, String)>,
) -> Result<Vec<(String, String)>, CliError> {
    let mut all: Vec<(String, String)> = Vec::new();
    for (name, value) in &recorded.inputs {
        if given.iter().any(|(k, _)| k == name) {
            continue;
        }
        let text = match value {
            Value::String(s) if s == "***" => {
                return Err(CliError::Usage(format!(
                    "input '{name}' was recorded masked (secret): give --input {name}=VALUE"
                )));
            }
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        all.push((name.clone(), text));
    }
    all.extend(given);
    Ok(all)
}

/// Every error of a replay exits 4 (said on stderr), but a difference (1), a usage error (2),
/// a signal and a closed stdout keep their codes.
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
            Err(CliError::Reported(4))
        }
    }
}
