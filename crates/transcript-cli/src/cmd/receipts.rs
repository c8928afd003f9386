//! `transcript receipts`: per agent step, what the provider reported (model, tokens, the
//! CLI's own cost) and the cost priced from the price table (LiteLLM's, embedded, or
//! `--pricing FILE`), with per-run, per-model and total sums, from the transcript alone.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use transcript_export::requests::{Requests, Source};
use transcript_import::project::session_and_project;
use transcript_providers::Pricing;

use crate::CliError;
use crate::exit::stdout_result;
use crate::source;
use crate::style;

/// The price table: `file` (LiteLLM's format) when given, else the embedded one.
pub fn pricing(file: Option<&Path>) -> Result<Cow<'static, Pricing>, CliError> {
    let Some(path) = file else {
        return Ok(Cow::Borrowed(Pricing::embedded()));
    };
    let text = std::fs::read_to_string(path).map_err(|e| CliError::Read {
        path: path.to_owned(),
        message: format!("cannot read the price table: {e}"),
    })?;
    Pricing::from_json(&text)
        .map(Cow::Owned)
        .map_err(|e| CliError::Read {
            path: path.to_owned(),
            message: format!("not a price table: {e}"),
        })
}

/// The price table's name in messages: the file given, else the embedded LiteLLM table with
/// its pinned version.
pub fn table_name(file: Option<&Path>) -> String {
    match file {
        Some(f) => f.display().to_string(),
        None => format!(
            "the embedded LiteLLM {} table",
            transcript_providers::LITELLM_VERSION
        ),
    }
}

/// One warning per model the table cannot price (never shown as $0).
pub fn warn_unpriced(models: &[String], file: Option<&Path>, err: &mut dyn Write) {
    let table = table_name(file);
    for m in models {
        if m == transcript_domain::bill::NO_MODEL {
            // Not a gap of the table: the provider and the step named no model.
            let _ = writeln!(
                err,
                "transcript: warning: some turns name no model: their cost shows — (set the step's model:)"
            );
            continue;
        }
        let _ = writeln!(
            err,
            "transcript: warning: no price for model {} in {}: its cost shows — (pass --pricing FILE)",
            style::one_line(m),
            style::one_line(&table)
        );
    }
}

/// Prints the receipts of `run` (resolved in `storage`), as text or `--json`, priced with
/// `pricing_file` or the embedded table; unpriced models are warned on `err`.
pub fn run(
    run: &str,
    store: &crate::store::Store,
    json: bool,
    pricing_file: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let table = pricing(pricing_file)?;
    let source = source::open_run(run, store, None)?;
    let doc = source.document(&transcript_export::ExportOptions::default());
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let receipts = transcript_export::priced_receipts(&doc, &price);
    warn_unpriced(&receipts.unpriced_models, pricing_file, err);
    super::import::note_duplicates(receipts.duplicates, err);
    let replay_of = source
        .events
        .first()
        .and_then(|e| e.step())
        .and_then(|p| p.replay_of.clone());
    let mut text = if json {
        super::to_json(&receipts)? + "\n"
    } else {
        style::clean(&receipts.render())
    };
    if let Some(recorded) = replay_of {
        let note = format!(
            "replayed: this run replays {}; its turns were served from that recording and are \
             not spend (receipts --by leaves them out)\n",
            style::one_line(&recorded)
        );
        if json {
            crate::diag!("transcript: {}", note.trim_end());
        } else {
            text.push_str(&note);
        }
    }
    stdout_result(out.write_all(text.as_bytes()))?;
    // A child run that exists but could not be read is an error (exit 3), not a missing child.
    source.children_read()
}

/// How `receipts --by` groups turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// UTC day of each turn (YYYY-MM-DD).
    Day,
    /// UTC month of each turn (YYYY-MM).
    Month,
    /// Session: the imported session (a sub-agent's log counts for its parent session; a
    /// Copilot CLI session is its `session-state/<session-id>` directory), else the run.
    Session,
    /// Project: the directory the imported session ran in, named like Claude Code's
    /// `projects/<project>` (`transcript_import::project`), else the workflow.
    Project,
    /// Model of each turn: the one it is billed under (its own, else its step's), as
    /// `receipts` bills it.
    Model,
}

/// The session file a run was imported from by a file import (`import auto|claude FILE`):
/// its agent step's result's `provider`, `source` and `project` (the directory it recorded).
pub(crate) fn imported_file(
    doc: &transcript_export::ExportDocument,
) -> Option<(String, String, Option<String>)> {
    doc.run.steps.iter().find_map(|step| {
        let result = step.result.as_ref()?;
        let text = |key: &str| result.get(key)?.as_str().map(str::to_owned);
        Some((
            text("provider").unwrap_or_default(),
            text("source")?,
            text("project"),
        ))
    })
}

/// The runs `receipts --by` reads, each loaded in its turn: the run named (through the read
/// port), else every file of `storage` but replays and their child runs (not spend: their
/// turns were the recording's).
fn grouped_runs(run: Option<&str>, storage: &Path) -> Vec<Grouped> {
    match run {
        Some(r) => vec![Grouped::Run(r.to_owned())],
        None => {
            // A missing storage holds no runs (nothing to bill).
            let runs = crate::runs::all_runs(&crate::store::directory(storage)).unwrap_or_default();
            let replays = crate::runs::replays(&runs);
            runs.into_iter()
                .filter(|r| !replays.contains(&r.run_id))
                .map(|r| Grouped::File(r.path))
                .collect()
        }
    }
}

/// One run `receipts --by` bills.
enum Grouped {
    /// A transcript file of the storage directory.
    File(std::path::PathBuf),
    /// The run argument given.
    Run(String),
}

/// `transcript receipts --by <group>`: every run in `storage` (or the one named), its
/// billed turns grouped, as a table or `--json`.
pub fn run_grouped(
    run: Option<&str>,
    (storage, store): (&Path, &crate::store::Store),
    by: GroupBy,
    json: bool,
    pricing_file: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let table = pricing(pricing_file)?;
    // The import index of a storage directory (a NATS store keeps none).
    let index = match crate::nats_connect::url_of(storage)? {
        Some(_) => Default::default(),
        None => super::import::store::Index::load(storage)?,
    };
    let sources: std::collections::HashMap<&str, (&str, &str, Option<&str>)> = index
        .files
        .iter()
        .map(|(path, e)| {
            (
                e.run_id.as_str(),
                (e.provider.as_str(), path.as_str(), e.project.as_deref()),
            )
        })
        .collect();
    let runs = grouped_runs(run, storage);
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let mut grouping = Grouping {
        by,
        requests: Requests::new(),
    };
    let options = transcript_export::ExportOptions::default();
    for run in runs {
        let events = match run {
            Grouped::File(file) => source::load(&file)?.decoded(),
            Grouped::Run(arg) => source::open_run(&arg, store, None)?.events,
        };
        let doc = transcript_export::build_document(&events, &mut |_| None, &options);
        // One answer per session however it was imported (a store or files).
        let (source, sidechain) = match sources.get(doc.run.run_id.as_str()) {
            Some(&(provider, path, project)) => (
                session_and_project(provider, path, project),
                is_subagent_log(path),
            ),
            None => {
                imported_file(&doc).map_or(((None, None), false), |(provider, path, project)| {
                    (
                        session_and_project(&provider, &path, project.as_deref()),
                        is_subagent_log(&path),
                    )
                })
            }
        };
        grouping.add_run(&doc, source, sidechain);
    }
    let billed = grouping.requests.finish();
    let mut groups = transcript_export::Groups::new(&price);
    for kept in billed.kept {
        let t = kept.turn;
        groups.add_usage(t.key, &t.run_id, (&t.model, &t.usage), kept.first);
    }
    let (groups, unpriced) = groups.finish();
    warn_unpriced(&unpriced, pricing_file, err);
    super::import::note_duplicates(billed.duplicates, err);
    let text = if json {
        super::to_json(&serde_json::json!({
            "by": format!("{by:?}").to_lowercase(),
            "groups": groups,
            "duplicates": billed.duplicates,
        }))? + "\n"
    } else {
        style::clean(&transcript_export::render_groups(
            &format!("{by:?}").to_lowercase(),
            &groups,
        ))
    };
    stdout_result(out.write_all(text.as_bytes()))
}

/// Whether an imported session file is a sub-agent's log (`<session>/subagents/agent-*.jsonl`):
/// a side chain, whose copy of a request loses to the main chain's.
pub(crate) fn is_subagent_log(path: &str) -> bool {
    Path::new(path)
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "subagents")
}

/// One billed turn waiting for the requests to be resolved: its group, run, model and usage.
pub struct Pending {
    /// The group it goes to.
    pub key: String,
    /// Its run.
    pub run_id: String,
    /// The model it is billed under.
    pub model: String,
    /// Its usage.
    pub usage: transcript_domain::Usage,
}

/// The runs' billed turns being grouped by `by`: each with its request, so a request
/// repeated by several runs is billed once (`transcript_export::requests`); the sums, prices
/// and table are the export crate's [`transcript_export::Groups`].
struct Grouping {
    by: GroupBy,
    requests: Requests<Pending>,
}

impl Grouping {
    /// Every billed assistant turn of a run's steps, under the model it is billed under
    /// (`transcript_export::billed_turns`, as `receipts` bills it); `(session, project)` from
    /// the import index when the run was imported from a store; `sidechain`: the run is a
    /// sub-agent's log.
    fn add_run(
        &mut self,
        doc: &transcript_export::ExportDocument,
        (session, project): (Option<String>, Option<String>),
        sidechain: bool,
    ) {
        let run_id = &doc.run.run_id;
        let scope = session.clone().unwrap_or_else(|| run_id.clone());
        transcript_export::each_step(&doc.run, &mut |step| {
            // The one rule every report bills by (its model, else its step's).
            for turn in transcript_export::billed_turns(step) {
                let key = match self.by {
                    GroupBy::Day => turn.message.timestamp.get(..10).unwrap_or("?").to_owned(),
                    GroupBy::Month => turn.message.timestamp.get(..7).unwrap_or("?").to_owned(),
                    GroupBy::Session => session.clone().unwrap_or_else(|| run_id.clone()),
                    GroupBy::Project => project
                        .clone()
                        .or_else(|| doc.run.workflow.clone())
                        .unwrap_or_else(|| "?".to_owned()),
                    GroupBy::Model => turn.model.to_owned(),
                };
                self.requests.add(
                    Pending {
                        key,
                        run_id: run_id.clone(),
                        model: turn.model.to_owned(),
                        usage: turn.usage.clone(),
                    },
                    turn.message.request_id.as_deref(),
                    Source {
                        run: run_id,
                        session: &scope,
                        provider: turn.message.provider.as_deref().unwrap_or(""),
                        sidechain,
                    },
                    turn.usage,
                );
            }
        });
    }
}
