//! `receipts --by …` on NATS storage (#44): the billed turns of every run from the runs index
//! (one key-value entry per run), never the stream's messages. Grouped, priced and printed by
//! the same code as on a directory (`transcript_export::Groups`), so both print the same.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use transcript_export::requests::{Requests, Source};
use transcript_import::project::session_and_project;
use transcript_nats::{NatsStore, RunEntry};

use crate::CliError;
use crate::cmd::receipts::{GroupBy, Pending};
use crate::exit::stdout_result;

/// The session and project of an imported run (its workflow `import …`), read from its agent
/// step's result as a directory's receipts read it, and whether it is a sub-agent's log; none
/// for a run recorded by `run` (its session is the run, its project the workflow).
fn imported(
    reader: &mut Option<transcript_nats::NatsRunStore>,
    store: &NatsStore,
    run: &RunEntry,
) -> ((Option<String>, Option<String>), bool) {
    use transcript_domain::run_store::RunStore as _;
    let none = ((None, None), false);
    if !run
        .workflow
        .as_deref()
        .is_some_and(|w| w.starts_with("import "))
    {
        return none;
    }
    // The read port, connected at the first imported run (its own thread and runtime).
    if reader.is_none() {
        *reader = transcript_nats::NatsRunStore::connect(store.url(), store.options().clone()).ok();
    }
    let Some(events) = reader
        .as_ref()
        .and_then(|r| r.read(run.run_id).ok())
        .flatten()
        .and_then(|lines| crate::source::decode(lines).ok())
        .map(|loaded| loaded.decoded())
    else {
        return none;
    };
    let options = transcript_export::ExportOptions::default();
    let doc = transcript_export::build_document(&events, &mut |_| None, &options);
    crate::cmd::receipts::imported_file(&doc).map_or(none, |(provider, path, project)| {
        (
            session_and_project(&provider, &path, project.as_deref()),
            crate::cmd::receipts::is_subagent_log(&path),
        )
    })
}

/// The store's import index as run id → (provider, session file, project).
async fn store_imports(
    store: &NatsStore,
) -> Result<HashMap<String, (String, String, Option<String>)>, CliError> {
    let index = transcript_nats::import_index(store)
        .await
        .map_err(|e| CliError::Storage(e.to_string()))?;
    let index: transcript_import::store::Index = match index {
        Some(v) => serde_json::from_value(v)
            .map_err(|e| CliError::Storage(format!("the store's import index: {e}")))?,
        None => return Ok(HashMap::new()),
    };
    Ok(index
        .files
        .into_iter()
        .map(|(path, e)| (e.run_id, (e.provider, path, e.project)))
        .collect())
}

/// Every billed turn of `runs` keyed as `by` groups it, one request one bill
/// (`transcript_export::requests`), as on a directory.
fn bill_runs(
    store: &NatsStore,
    runs: &[RunEntry],
    sources: &HashMap<String, (String, String, Option<String>)>,
    by: GroupBy,
) -> Requests<Pending> {
    let mut requests = Requests::new();
    let mut reader = None;
    for run in runs {
        let run_id = run.run_id.to_string();
        // An imported session groups by its session and project, as on a directory (#59):
        // a store import's from the import index, a file import's from its run.
        let ((session, project), sidechain) = match sources.get(&run_id) {
            Some((provider, path, project)) => (
                session_and_project(provider, path, project.as_deref()),
                crate::cmd::receipts::is_subagent_log(path),
            ),
            None => imported(&mut reader, store, run),
        };
        let scope = session.clone().unwrap_or_else(|| run_id.clone());
        for turn in &run.turns {
            let timestamp = turn.timestamp.to_string();
            let key = match by {
                GroupBy::Day => timestamp.get(..10).unwrap_or("?").to_owned(),
                GroupBy::Month => timestamp.get(..7).unwrap_or("?").to_owned(),
                GroupBy::Session => scope.clone(),
                GroupBy::Project => project
                    .clone()
                    .or_else(|| run.workflow.clone())
                    .unwrap_or_else(|| "?".to_owned()),
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
                    session: &scope,
                    provider: "",
                    sidechain,
                },
                &turn.usage,
            );
        }
    }
    requests
}

/// Keeps, of each trial and every run under one, the turns the bill counts, as on files
/// (`transcript_export::spend`: their events, and their recordings', through the read port).
fn bill_trials(store: &NatsStore, runs: &mut [RunEntry]) {
    use transcript_domain::run_store::RunStore as _;
    let ids: Vec<(String, Option<String>)> = (runs.iter())
        .map(|r| (r.run_id.to_string(), r.parent_run_id.map(|p| p.to_string())))
        .collect();
    let listed: Vec<transcript_export::spend::Listed<'_>> = (runs.iter().zip(&ids))
        .map(|(r, (id, parent))| transcript_export::spend::Listed {
            run_id: id,
            parent_run_id: parent.as_deref(),
            replay_of: r.replay_of.as_deref(),
            forked_at: r.forked_at.as_deref(),
        })
        .collect();
    let reader = transcript_nats::NatsRunStore::connect(store.url(), store.options().clone()).ok();
    let billed = transcript_export::spend::trial_bills(&listed, &mut |id| {
        let lines = reader.as_ref()?.read(id.parse().ok()?).ok()??;
        Some(crate::source::decode(lines).ok()?.decoded())
    });
    for run in runs.iter_mut() {
        if let Some(keep) = billed.get(&run.run_id.to_string()) {
            run.turns.retain(|t| keep.contains(&t.seq));
        }
    }
}

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
    // Plain replays (and their child runs) were served from a recording: not spend, as on
    // files; a trial is billed for its live part (`bill_trials`).
    let replays = transcript_domain::replays::replayed_runs(runs.iter().map(|r| {
        let plain = r.replay_of.is_some() && r.forked_at.is_none();
        (r.run_id, r.parent_run_id, plain)
    }));
    runs.retain(|r| !replays.contains(&r.run_id));
    bill_trials(store, &mut runs);
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let sources = store_imports(store).await?;
    let requests = bill_runs(store, &runs, &sources, by);
    let billed = requests.finish();
    let mut groups = transcript_export::Groups::new(&price);
    for kept in billed.kept {
        let t = kept.turn;
        groups.add_usage(t.key, &t.run_id, (&t.model, &t.usage), kept.first);
    }
    let (groups, unpriced) = groups.finish();
    let mut err = std::io::stderr();
    crate::cmd::receipts::warn_unpriced(&unpriced, pricing_file, &mut err);
    crate::cmd::import::note_duplicates(billed.duplicates, &mut err);
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
