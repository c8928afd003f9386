//! `transcript list`: the recent runs of a store, newest first, as the read port lists them
//! (a directory's from each file's first and last lines, NATS's from the runs index).

use std::fmt::Write as _;
use std::io::Write;

use crate::CliError;
use crate::exit::stdout_result;
use crate::runs::{RunStatus, RunSummary, all_runs};
use crate::style::{Style, clean};

/// What `list` shows: how many, child runs too, only runs of one status, as JSON.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ListOptions {
    /// How many runs (newest first).
    #[arg(short = 'n', long, default_value_t = 20)]
    pub limit: usize,
    /// With child runs (the runs `call_workflow` steps started; by default only root runs).
    #[arg(long)]
    pub all: bool,
    /// Only runs of this status (`running`: its runner holds the run; `abandoned`: no
    /// run.completed and no runner).
    #[arg(long, value_enum)]
    pub status: Option<RunStatus>,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `list` on `store`.
pub fn run(
    store: &crate::store::Store,
    options: ListOptions,
    style: &Style,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    print(all_runs(store.as_ref())?, options, style, out)
}

/// Prints `runs` (newest first; root runs only unless `all`; of one status with `status`), at
/// most `limit`.
pub fn print(
    mut runs: Vec<RunSummary>,
    ListOptions {
        limit,
        all,
        status,
        json,
    }: ListOptions,
    style: &Style,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    runs.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then(a.run_id.cmp(&b.run_id))
    });
    let runs: Vec<RunSummary> = runs
        .into_iter()
        .filter(|r| all || r.parent_run_id.is_none())
        .filter(|r| status.is_none_or(|s| r.status == s))
        .collect();
    let total = runs.len();
    let runs = &runs[..limit.min(total)];
    let text = if json {
        super::to_json(&runs)? + "\n"
    } else {
        let mut text = render(runs, style);
        // Say what is not shown (#59).
        if runs.len() < total {
            let _ = writeln!(text, "{} of {total} runs (-n N for more)", runs.len());
        }
        text
    };
    stdout_result(out.write_all(text.as_bytes()))
}

fn render(runs: &[RunSummary], style: &Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<36}  {:<20}  {:<10}  {:<24}  {:>9}  {:>6}",
        "run_id", "workflow", "status", "started", "duration", "events"
    );
    for r in runs {
        let cell = format!("{:<10}", r.status.as_str());
        let status = match r.status {
            RunStatus::Succeeded => style.green(&cell),
            RunStatus::Failed => style.red(&cell),
            RunStatus::Running | RunStatus::Open => style.yellow(&cell),
            RunStatus::Abandoned => style.red(&cell),
        };
        let workflow: String = clean(r.workflow.as_deref().unwrap_or("?"))
            .chars()
            .take(20)
            .collect();
        // A replay says so, and which run it replays (its turns are not spend, #58).
        // A trial names the step it was forked at too (#61).
        let replay = r.replay_of.as_deref().map_or(String::new(), |of| {
            let of = clean(of.get(..8).unwrap_or(of));
            match &r.forked_at {
                Some(step) => format!("  trial of {of} from {}", clean(step)),
                None => format!("  replay of {of}"),
            }
        });
        let _ = writeln!(
            out,
            "{:<36}  {:<20}  {}  {:<24}  {:>9}  {:>6}{replay}",
            r.run_id,
            workflow,
            status,
            r.started_at.map_or("—".to_owned(), |t| t.to_string()),
            crate::cmd::tree::duration(r.duration_ms),
            r.events
        );
    }
    out
}
