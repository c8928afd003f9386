//! `transcript replay <RUN> --live-from STEP [--trials K] [--expect FILE] [--junit OUT]
//! [--jobs N] [--json]` (#61): the recording forked at a step (transcript-replay's `ForkEndpoints`: the
//! steps that started before it are served from the recording, it and the rest run live as
//! `run` runs them), K trials, each a run of its own naming the recording (`replay_of`), each
//! compared with the recording and checked against the expectations; transcript-compare's
//! `TrialsReport` printed. Exit 0 when every trial passes (without `--expect`: when every trial
//! ran), 1 when one fails, 2 on usage, 3 for an unknown run or step, 4 on an error.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;

use transcript_compare::trials::{Trial, TrialsReport};
use transcript_compare::{DiffOptions, diff_with_definitions};
use transcript_replay::fork::{ForkEndpoints, ForkPoint};
use transcript_replay::{Matching, Replayer, WorkspaceRoots};

use super::{MatchMode, Read, ReplayArgs, read_run};
use crate::CliError;
use crate::cmd::run::RunArgs;
use crate::exit::stdout_result;

/// The fork's own arguments.
#[derive(Debug, Clone)]
pub struct TrialArgs {
    /// The step the trials run live from.
    pub live_from: String,
    /// How many trials.
    pub trials: u32,
    /// How many trials run at once (`--jobs`, default 1).
    pub jobs: u32,
    /// Expectations each trial is checked against.
    pub expect: Option<PathBuf>,
    /// Where JUnit XML goes: one test case per trial and expectation.
    pub junit: Option<PathBuf>,
    /// The report as JSON.
    pub json: bool,
}

/// Runs the trials of `replay.run` forked at `trial.live_from`.
pub(super) async fn run(
    replay: ReplayArgs,
    args: RunArgs,
    trial: TrialArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let recorded = read_run(&replay.run, &replay.store, None)?;
    let fork = ForkPoint::find_with(&recorded.events, &trial.live_from, &mut |id| {
        recorded.children.get(&id).cloned()
    })
    .map_err(|e| CliError::Invalid(format!("{}: {e}", recorded.path.display())))?;
    let expectations = match &trial.expect {
        Some(file) => Some(crate::cmd::check::read_expectations(file)?),
        None => None,
    };
    let here = args
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| args.workspace.clone());
    let roots = (recorded.workspace.as_deref()).and_then(|then| WorkspaceRoots::new(then, &here));
    let chosen = super::workflow_to_run(replay.workflow.clone(), &recorded, roots.as_ref())?;
    let inputs = recorded
        .recording
        .inputs_with(args.inputs.clone())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let live = |chain: &[(String, u64)]| fork.prefix().side(chain);
    // Set by a trial that was interrupted (a signal reaches every running trial): no trial
    // starts after it.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let one = |_| {
        let mut a = super::trial_args(&args);
        a.workflow = chosen.file.clone();
        a.inputs = inputs.clone();
        a.wire = Some(wiring(&replay, &recorded, &fork, &here));
        let (stop, roots, expectations) = (&stop, roots.as_ref(), expectations.as_ref());
        let (replay, recorded, live) = (&replay, &recorded, &live);
        async move {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                return None;
            }
            Some(one_trial(a, replay, recorded, (roots, expectations), live).await)
        }
    };
    // Up to `jobs` trials at once, each printing into its own buffer; the buffers reach
    // stdout in trial order, so the output reads as if they had run one after another.
    let mut running = futures_util::stream::iter(0..trial.trials.max(1))
        .map(one)
        .buffered(trial.jobs.max(1) as usize);
    let (mut trials, mut failed) = (Vec::new(), None);
    while let Some(ran) = running.next().await {
        let Some((printed, judged)) = ran else {
            continue; // not started: an earlier trial was interrupted
        };
        // A trial that could not be judged does not stop the others mid-run (each would be
        // left without its run.completed): the first error is the answer once all ended,
        // after the report of the trials that were judged.
        let _ = out.write_all(&printed);
        match judged {
            Ok(t) => trials.push(t),
            Err(e) => {
                if matches!(e, CliError::Interrupted(_)) {
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                failed = failed.or(Some(e));
            }
        }
    }
    let passed = report(&recorded, &trial, trials, &live, out)?;
    match failed {
        Some(e) => Err(e),
        None if passed => Ok(()),
        None => Err(CliError::Reported(1)),
    }
}

/// Prints the report of the judged `trials` (and writes its JUnit); whether every one passed.
fn report(
    recorded: &Read,
    trial: &TrialArgs,
    trials: Vec<Trial>,
    live: transcript_compare::trials::LivePart<'_>,
    out: &mut dyn std::io::Write,
) -> Result<bool, CliError> {
    if trials.is_empty() {
        return Ok(false);
    }
    let report = TrialsReport::new(&recorded.record, &trial.live_from, trials, live);
    if let Some(path) = &trial.junit {
        let file = trial.expect.as_ref().map(|f| f.display().to_string());
        let xml = report.junit_xml(file.as_deref().unwrap_or(""));
        crate::cmd::export::write_output(Some(path), &xml, out)?;
    }
    let text = if trial.json {
        crate::cmd::to_json(&report)? + "\n"
    } else {
        crate::style::clean(&report.render_text())
    };
    stdout_result(out.write_all(text.as_bytes()))?;
    Ok(report.all_passed)
}

/// One trial: the run (its progress printed into the returned buffer), read back, compared
/// with the recording and judged.
async fn one_trial(
    args: RunArgs,
    replay: &ReplayArgs,
    recorded: &Read,
    (roots, expectations): (
        Option<&WorkspaceRoots>,
        Option<&transcript_compare::Expectations>,
    ),
    live: transcript_compare::trials::LivePart<'_>,
) -> (Vec<u8>, Result<Trial, CliError>) {
    let mut printed = Vec::new();
    let mut started = None;
    let ran = crate::cmd::run::run_reporting(args, &mut printed, &mut started).await;
    let Some((run_id, _)) = started else {
        // It never started (an invalid workflow, a refused sandbox): that error is the answer.
        return (printed, Err(ran.err().unwrap_or(CliError::Reported(4))));
    };
    let judged = match ran {
        Ok(()) | Err(CliError::Reported(1)) => read_run(&run_id.to_string(), &replay.store, roots)
            .map(|ran| {
                let doc = diff_with_definitions(
                    &recorded.record,
                    &ran.record,
                    &DiffOptions::default(),
                    (&recorded.definitions, &ran.definitions),
                );
                Trial::judge(&ran.record, &doc, expectations, live)
            }),
        Err(other) => Err(other),
    };
    (printed, judged)
}

/// The engine's wiring of one trial: the fork's endpoints (a fresh replayer of the tape).
fn wiring(
    replay: &ReplayArgs,
    recorded: &Read,
    fork: &ForkPoint,
    here: &std::path::Path,
) -> crate::cmd::run::EngineWiring {
    let matching = match replay.matching {
        MatchMode::Strict => Matching::Strict,
        MatchMode::Fifo => Matching::Fifo,
    };
    let mut replayer = Replayer::new(recorded.recording.tape.clone(), matching);
    if let Some(then) = &recorded.workspace {
        replayer = replayer.with_workspace_roots(then.clone(), here.to_path_buf());
    }
    let endpoints = Arc::new(ForkEndpoints::new(replayer, fork.clone()));
    let wire = super::wire(endpoints, replay.commands, recorded.recording.run_id);
    // The trial's run.started names the step it was forked at (wire decision 22).
    let step = fork.step.clone();
    Box::new(move |builder| wire(builder).forked_at(step.clone()))
}
