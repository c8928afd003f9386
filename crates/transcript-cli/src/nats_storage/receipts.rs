//! `receipts --by …` on NATS storage (#44): the billed turns of every run from the runs index
//! (one key-value entry per run), never the stream's messages. Grouped, priced and printed by
//! the same code as on a directory (`transcript_export::Groups`), so both print the same.

use std::io::Write;
use std::path::Path;

use transcript_export::requests::{Requests, Source};
use transcript_nats::{NatsStore, RunEntry};

use crate::CliError;
use crate::cmd::receipts::{GroupBy, Pending};
use crate::exit::stdout_result;

/// Prints the receipts of every run of the index grouped `by`.
pub async fn run_grouped(
    store: &NatsStore,
    (by, json): (GroupBy, bool),
    pricing_file: Option<&Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let table = crate::cmd::receipts::pricing(pricing_file)?;
    let mut runs: Vec<RunEntry> = store
        .runs()
        .await
        .map_err(|e| CliError::Storage(e.to_string()))?;
    // A directory's runs are read in file-name (run id) order.
    runs.sort_by_key(|r| r.run_id);
    // Replays (and their child runs) were served from a recording: not spend, as on files.
    let summaries: Vec<crate::runs::RunSummary> = runs
        .iter()
        .map(|r| transcript_nats::stored_run(store.url(), r.clone()).into())
        .collect();
    let replays = crate::runs::replays(&summaries);
    runs.retain(|r| !replays.contains(&r.run_id));
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    // One request, one bill across runs (`transcript_export::requests`), as on a directory.
    let mut requests = Requests::new();
    for run in &runs {
        let run_id = run.run_id.to_string();
        for turn in &run.turns {
            let timestamp = turn.timestamp.to_string();
            let key = match by {
                GroupBy::Day => timestamp.get(..10).unwrap_or("?").to_owned(),
                GroupBy::Month => timestamp.get(..7).unwrap_or("?").to_owned(),
                // Runs recorded to NATS are not imported sessions: the session is the run,
                // the project its workflow (as on a directory without an import index).
                GroupBy::Session => run_id.clone(),
                GroupBy::Project => run.workflow.clone().unwrap_or_else(|| "?".to_owned()),
                GroupBy::Model => turn.model.clone(),
            };
            requests.add(
                Pending {
                    key,
                    run_id: run_id.clone(),
                    model: turn.model.clone(),
                    usage: turn.usage.clone(),
                },
                turn.request_id.as_deref(),
                // The runs index names no provider per turn: the ids of one storage's runs.
                Source {
                    run: &run_id,
                    session: &run_id,
                    provider: "",
                    sidechain: false,
                },
                &turn.usage,
            );
        }
    }
    let billed = requests.finish();
    let mut groups = transcript_export::Groups::new(&price);
    for kept in billed.kept {
        let t = kept.turn;
        groups.add_usage(t.key, &t.run_id, (&t.model, &t.usage), kept.first);
    }
    let (groups, unpriced) = groups.finish();
    let mut err = std::io::stderr();
    crate::cmd::receipts::warn_unpriced(&unpriced, pricing_file, &mut err);
    crate::cmd::receipts::note_duplicates(billed.duplicates, &mut err);
    let label = format!("{by:?}").to_lowercase();
    let text = if json {
        crate::cmd::to_json(&serde_json::json!({
            "by": label,
            "groups": groups,
            "duplicates": billed.duplicates,
        }))? + "\n"
    } else {
        crate::style::clean(&transcript_export::render_groups(&label, &groups))
    };
    stdout_result(out.write_all(text.as_bytes()))
}
