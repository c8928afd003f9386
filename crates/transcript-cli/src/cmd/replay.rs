//! `transcript replay`: runs a recorded run's workflow again with the recording as the model
//! (transcript-replay: one model server per agent execution on 127.0.0.1, its turns matched
//! strictly or in order), prints the new run as `run` does, then its comparison with the
//! recording. Exit 0 when equal, 1 when different, 4 on an error.

use std::path::PathBuf;
use std::sync::Arc;

use transcript_replay::{Matching, Replayer, Tape};

use crate::CliError;
use crate::cmd::replay_compare::RunFacts;
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

/// The recorded run, read: its file, its tape and its facts.
struct Recorded {
    path: PathBuf,
    tape: Tape,
    facts: RunFacts,
}

fn read_recorded(arg: &str, storage: &std::path::Path) -> Result<Recorded, CliError> {
    let run = source::open_run(arg, storage, None)?;
    if run.events.is_empty() {
        return Err(CliError::Read {
            path: run.path.clone(),
            message: "no line of it is a transcript event".to_owned(),
        });
    }
    let tape = Tape::build(&run.events, &mut run.lookup()).map_err(|e| CliError::Read {
        path: run.path.clone(),
        message: e.to_string(),
    })?;
    let tree = transcript_domain::tree::build_run_tree(&run.events, &mut run.lookup());
    run.children_read()?;
    let facts = RunFacts::of(&tree, &tape);
    Ok(Recorded {
        path: run.path,
        tape,
        facts,
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
    let recorded = read_recorded(&replay.run, &args.storage)?;
    args.workflow = match replay.workflow {
        Some(w) => w,
        None => {
            return Err(CliError::Usage(format!(
                "{}: the recorded run does not name its workflow file: give --workflow FILE",
                recorded.path.display()
            )));
        }
    };
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
    let replayed = read_recorded(&path.display().to_string(), &storage)?;
    let differences = recorded.facts.differences(&replayed.facts);
    report(&recorded, &differences, out)
}

/// Prints the comparison; `Reported(1)` when there are differences.
fn report(
    recorded: &Recorded,
    differences: &[String],
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let (steps, calls) = recorded.facts.counts();
    let against = recorded.path.display();
    if differences.is_empty() {
        stdout_result(writeln!(
            out,
            "replay: equal to {against} ({steps} step(s), {calls} tool call(s))"
        ))?;
        return Ok(());
    }
    stdout_result(writeln!(
        out,
        "replay: {} difference(s) from {against}:",
        differences.len()
    ))?;
    for d in differences {
        let text = crate::style::clean(d);
        for line in text.lines() {
            stdout_result(writeln!(out, "  {line}"))?;
        }
    }
    Err(CliError::Reported(1))
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
