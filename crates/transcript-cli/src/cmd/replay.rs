//! `transcript replay`: runs a recorded run's workflow again with the recording as the model
//! (transcript-replay: one model server per agent execution on 127.0.0.1, its turns matched
//! strictly or in order), prints the new run as `run` does, then its comparison with the
//! recording (transcript-compare's diff). Exit 0 when equal, 1 when different, 4 on an error.
//! The workflow file and the inputs come from the recorded `run.started` (wire decision 16)
//! unless given; the new run's `run.started` names the run it replays (`replay_of`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_compare::{DiffOptions, RunRecord, diff};
use transcript_replay::{Matching, Recording, Replayer};

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
    /// How the comparison is painted on stdout.
    pub style: crate::style::Style,
}

/// A run read for a replay (the recording) or a comparison (both): its file, its record for
/// the diff, and what the replay needs of it.
struct Read {
    path: PathBuf,
    record: RunRecord,
    recording: Recording,
}

fn read_run(arg: &str, storage: &Path) -> Result<Read, CliError> {
    let run = source::open_run(arg, storage, None)?;
    let invalid = |message: String| CliError::Read {
        path: run.path.clone(),
        message,
    };
    let recording =
        Recording::read(&run.events, &mut run.lookup()).map_err(|e| invalid(e.to_string()))?;
    // Priced as `transcript diff` prices (the embedded table).
    let table = super::receipts::pricing(None)?;
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let record = RunRecord::build(&run.events, &mut run.lookup(), Some(&price));
    run.children_read()?;
    Ok(Read {
        path: run.path,
        record,
        recording,
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
    let recorded = read_run(&replay.run, &args.storage)?;
    args.workflow = workflow_file(replay.workflow, &recorded)?;
    args.inputs = recorded
        .recording
        .inputs_with(std::mem::take(&mut args.inputs))
        .map_err(|e| CliError::Usage(e.to_string()))?;
    args.replay_of = Some(recorded.recording.run_id);
    let matching = match replay.matching {
        MatchMode::Strict => Matching::Strict,
        MatchMode::Fifo => Matching::Fifo,
    };
    let replayer = Replayer::new(recorded.recording.tape.clone(), matching);
    let endpoints = Arc::new(crate::replay_endpoints::ReplayEndpoints::new(replayer));
    if replay.commands == CommandsMode::Record {
        args.recorded_commands = Some(endpoints.clone());
    }
    args.endpoints = Some(endpoints);
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
    // The comparison `transcript diff <recording> <replay>` prints.
    let doc = diff(&recorded.record, &replayed.record, &DiffOptions::default());
    let labels = (
        recorded.path.display().to_string(),
        replayed.path.display().to_string(),
    );
    let text = transcript_compare::render_diff_text(&doc, (&labels.0, &labels.1), &replay.style);
    stdout_result(out.write_all(text.as_bytes()))?;
    if doc.equal {
        Ok(())
    } else {
        Err(CliError::Reported(1))
    }
}

/// The workflow to run: `--workflow`, else the file the recorded run names (said on stderr
/// when its bytes changed since).
fn workflow_file(given: Option<PathBuf>, recorded: &Read) -> Result<PathBuf, CliError> {
    if let Some(file) = given {
        return Ok(file);
    }
    let Some(source) = &recorded.recording.workflow else {
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
    if let Some((then, now)) = recorded.recording.workflow_changed(&bytes) {
        crate::diag!(
            "transcript: replay: note: {} changed since the recording (sha256 {then} then, {now} now)",
            crate::style::clean(&source.path)
        );
    }
    Ok(file)
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
