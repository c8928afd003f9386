//! `receipts --by …` on NATS storage (#44): the billed turns of every run from the runs index
//! (one key-value entry per run), never the stream's messages. Grouped, priced and printed by
//! the same code as on a directory (`transcript_export::Groups`), so both print the same.

use std::io::Write;
use std::path::Path;

use transcript_export::{BilledTurn, MessageExport};
use transcript_nats::{NatsStore, RunEntry};

use crate::CliError;
use crate::cmd::receipts::GroupBy;
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
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let mut groups = transcript_export::Groups::new(&price);
    for run in &runs {
        let run_id = run.run_id.to_string();
        for turn in &run.turns {
            let timestamp = turn.timestamp.to_string();
            let message = MessageExport {
                seq: turn.seq,
                role: "assistant".to_owned(),
                timestamp: timestamp.clone(),
                provider: None,
                model: Some(turn.model.clone()),
                usage: Some(turn.usage.clone()),
                cost_usd: None,
                blocks: Vec::new(),
            };
            let key = match by {
                GroupBy::Day => timestamp.get(..10).unwrap_or("?").to_owned(),
                GroupBy::Month => timestamp.get(..7).unwrap_or("?").to_owned(),
                // Runs recorded to NATS are not imported sessions: the session is the run,
                // the project its workflow (as on a directory without an import index).
                GroupBy::Session => run_id.clone(),
                GroupBy::Project => run.workflow.clone().unwrap_or_else(|| "?".to_owned()),
                GroupBy::Model => turn.model.clone(),
            };
            let billed = BilledTurn {
                message: &message,
                usage: &turn.usage,
                model: &turn.model,
            };
            groups.add(key, &run_id, &billed);
        }
    }
    let (groups, unpriced) = groups.finish();
    crate::cmd::receipts::warn_unpriced(&unpriced, pricing_file, &mut std::io::stderr());
    let label = format!("{by:?}").to_lowercase();
    let text = if json {
        crate::cmd::to_json(&serde_json::json!({ "by": label, "groups": groups }))? + "\n"
    } else {
        crate::style::clean(&transcript_export::render_groups(&label, &groups))
    };
    stdout_result(out.write_all(text.as_bytes()))
}
