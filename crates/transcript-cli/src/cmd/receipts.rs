//! `transcript receipts`: per agent step, what the provider reported (model, tokens, the
//! CLI's own cost) and the cost priced from the price table (LiteLLM's, embedded, or
//! `--pricing FILE`), with per-run, per-model and total sums, from the transcript alone.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use std::collections::HashMap;

use transcript_export::{GroupKey, Origin, RunTurns, group_runs};
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
    let started = source.events.first().and_then(|e| e.step());
    let replay_of = started.and_then(|p| p.replay_of.clone());
    let forked_at = started.and_then(|p| p.forked_at.clone());
    let mut text = if json {
        super::to_json(&receipts)? + "\n"
    } else {
        style::clean(&receipts.render())
    };
    if let Some(recorded) = replay_of {
        let (recorded, step) = (
            style::one_line(&recorded),
            forked_at.map(|s| style::one_line(&s)),
        );
        let note = match step {
            // A trial (#61): receipts --by bills its live part.
            Some(step) => format!(
                "trial of {recorded} forked at {step}: steps before it were served from the \
                 recording and are not spend; the live part from {step} on is\n"
            ),
            None => format!(
                "replayed: this run replays {recorded}; its turns were served from that \
                 recording and are not spend (receipts --by leaves them out)\n"
            ),
        };
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
    transcript_export::imported_from(doc).map(|i| (i.provider, i.source, i.project))
}

impl GroupBy {
    /// The export crate's key of this grouping.
    fn key(self) -> GroupKey {
        match self {
            GroupBy::Day => GroupKey::Day,
            GroupBy::Month => GroupKey::Month,
            GroupBy::Session => GroupKey::Session,
            GroupBy::Project => GroupKey::Project,
            GroupBy::Model => GroupKey::Model,
        }
    }
}

/// Where the runs of a storage directory were imported from, as `receipts --by` and the
/// viewer's `/receipts` group them: the import index (run id → provider, session file,
/// project), else what an imported run's step result says, through
/// `transcript_import::project` (a NATS store's directory keeps no index: none).
pub struct Origins {
    sources: HashMap<String, (String, String, Option<String>)>,
}

impl Origins {
    /// The import index of `storage`.
    pub fn load(storage: &Path) -> Result<Origins, CliError> {
        let index = match crate::nats_connect::url_of(storage)? {
            Some(_) => Default::default(),
            None => super::import::store::Index::load(storage)?,
        };
        let sources = index
            .files
            .into_iter()
            .map(|(path, e)| (e.run_id, (e.provider, path, e.project)))
            .collect();
        Ok(Origins { sources })
    }

    /// The session, project and side-chain-ness of `run` (one answer per session however it
    /// was imported: a store or files); all absent for a run that was not imported.
    pub fn origin(&self, run: &RunTurns) -> Origin {
        let from = match (self.sources.get(&run.run_id), &run.imported) {
            (Some((provider, path, project)), _) => (provider, path, project),
            (None, Some(i)) => (&i.provider, &i.source, &i.project),
            (None, None) => return Origin::default(),
        };
        let (session, project) = session_and_project(from.0, from.1, from.2.as_deref());
        Origin {
            session,
            project,
            sidechain: is_subagent_log(from.1),
        }
    }
}

/// The viewer's origins of `store`'s runs for `/receipts`, as `receipts --by` reads them: the
/// import index read again at each call (an import may run while it serves); a NATS store's
/// are none here.
pub fn viewer_origins(store: &crate::store::Store) -> transcript_viewer::Origins {
    let storage = std::path::PathBuf::from(store.location());
    std::sync::Arc::new(move || {
        let origins = match crate::nats_connect::url_of(&storage) {
            Ok(None) => Origins::load(&storage).map_err(|e| e.to_string())?,
            _ => Origins {
                sources: HashMap::new(),
            },
        };
        Ok(Box::new(move |run: &RunTurns| origins.origin(run)) as transcript_viewer::OriginFn)
    })
}

/// The runs `receipts --by` reads, each read once: the run named (through the read port),
/// else every file of `storage` (replays and trials among them: which of their turns are
/// spend is `transcript_export::group_runs`'s to say).
fn grouped_runs(
    run: Option<&str>,
    storage: &Path,
    store: &crate::store::Store,
) -> Result<Vec<RunTurns>, CliError> {
    if let Some(arg) = run {
        return Ok(vec![RunTurns::of(
            &source::open_run(arg, store, None)?.events,
        )]);
    }
    // A missing storage holds no runs (nothing to bill).
    let runs = crate::runs::all_runs(&crate::store::directory(storage)).unwrap_or_default();
    runs.iter()
        .map(|r| Ok(RunTurns::of(&source::load(&r.path)?.decoded())))
        .collect()
}

/// `transcript receipts --by <group>`: every run in `storage` (or the one named), its
/// billed turns grouped (`transcript_export::group_runs`: spend only, one request one bill),
/// as a table or `--json` (the groups and the `duplicates` set aside).
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
    let origins = Origins::load(storage)?;
    let runs = grouped_runs(run, storage, store)?;
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let runs: Vec<&RunTurns> = runs.iter().collect();
    let grouped = group_runs(&runs, &mut |r| origins.origin(r), &[by.key()], &price);
    warn_unpriced(&grouped.unpriced, pricing_file, err);
    super::import::note_duplicates(grouped.duplicates, err);
    let groups = grouped
        .groups
        .into_iter()
        .next()
        .map(|g| g.1)
        .unwrap_or_default();
    let label = by.key().name();
    let text = if json {
        super::to_json(&serde_json::json!({
            "by": label,
            "groups": groups,
            "duplicates": grouped.duplicates,
        }))? + "\n"
    } else {
        style::clean(&transcript_export::render_groups(label, &groups))
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
