//! `transcript import`: argument parsing and printing over the `transcript-import` library
//! (the pipeline, its invariants and its threat model are documented there). One line per
//! imported run on stdout (`run_id<TAB>provider<TAB>path`), a summary per input and every
//! failure on stderr, control characters escaped.

use std::path::PathBuf;
use std::sync::Arc;

use transcript_import::{ImportBill, ImportContext, ImportError, Importer, Notice, Progress};
use transcript_providers::{Pricing, Provider};

use crate::CliError;

pub mod store;

impl From<ImportError> for CliError {
    fn from(e: ImportError) -> Self {
        match e {
            ImportError::NotFound { what, path } => CliError::NotFound { what, path },
            ImportError::Read { path, message } => CliError::Read { path, message },
            ImportError::Invalid(m) => CliError::Invalid(m),
            ImportError::Storage(m) => CliError::Storage(m),
            ImportError::Usage(m) => CliError::Usage(m),
        }
    }
}

/// The import's settings from the command line; progress notices go to stderr.
pub fn context(
    storage: PathBuf,
    provider: Option<Provider>,
    mask: Option<Arc<dyn transcript_domain::EventMask>>,
    deterministic: bool,
) -> ImportContext {
    let progress: Progress = Arc::new(print_notice);
    ImportContext {
        storage,
        provider,
        mask,
        deterministic,
        progress: Some(progress),
    }
}

/// A progress notice on stderr.
fn print_notice(notice: Notice<'_>) {
    if let Notice::Diagnostics {
        input,
        kind,
        count,
        first,
    } = notice
    {
        crate::diag!(
            "transcript: {}: {count} {kind} diagnostic(s), first: {}",
            input.display(),
            crate::style::one_line(first)
        );
    }
}

/// What an import does once its runs are written and indexed, before it says so (NATS storage
/// publishes them); `Ok(())` on a directory.
pub type Commit<'a> = &'a mut dyn FnMut() -> Result<(), CliError>;

/// `transcript import`: session files one run each, or session stores and directories
/// (incremental).
pub fn command(
    cmd: crate::ImportCmd,
    storage: PathBuf,
    out: &mut dyn std::io::Write,
    commit: Commit<'_>,
) -> Result<(), CliError> {
    let crate::ImportCmd {
        provider,
        logs,
        store,
        since,
        deterministic,
        redaction,
    } = cmd;
    let redactor = redaction.redactor()?.map(Arc::new);
    let ctx = context(
        storage,
        parse_provider(&provider)?,
        redactor
            .clone()
            .map(|r| r as Arc<dyn transcript_domain::EventMask>),
        deterministic,
    );
    let dirs = logs.iter().filter(|l| l.is_dir()).count();
    if !store && dirs == 0 {
        if since.is_some() {
            return Err(CliError::Usage(
                "import: --since applies to session stores and directories".to_owned(),
            ));
        }
        return run(&ctx, &logs, (redactor.as_deref(), commit), out);
    }
    if dirs != logs.len() {
        return Err(CliError::Usage(
            "import: give either session files or session directories, not both".to_owned(),
        ));
    }
    let mut roots = logs.clone();
    if store {
        let Some(p) = ctx.provider else {
            return Err(CliError::Usage(
                "import --store needs the provider (claude, codex, gemini or copilot)".to_owned(),
            ));
        };
        roots.push(store::default_store(p)?);
    }
    let since = since.as_deref().map(store::parse_day).transpose()?;
    store::run_store(&ctx, (&roots, since), (redactor.as_deref(), commit), out)
}

/// Parses the `<provider|auto>` argument.
pub fn parse_provider(text: &str) -> Result<Option<Provider>, CliError> {
    if text == "auto" {
        return Ok(None);
    }
    Provider::from_name(text).map(Some).map_err(|e| {
        CliError::Usage(format!(
            "{e} (expected auto, claude, codex, gemini, copilot, openai or anthropic)"
        ))
    })
}

/// Runs `import`: one line per imported run on stdout (`run_id<TAB>provider<TAB>path`), a
/// summary per input and every failure on stderr.
pub fn run(
    ctx: &ImportContext,
    logs: &[PathBuf],
    (redactor, commit): (Option<&transcript_redact::Redactor>, Commit<'_>),
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let (done, failed) = Importer::from(ctx.clone()).import_files(logs, ctx.provider);
    commit()?;
    let mut total = ImportBill::default();
    for i in &done {
        total.merge(&i.bill);
        crate::exit::stdout_result(writeln!(
            out,
            "{}\t{}\t{}",
            i.run_id,
            i.provider,
            i.path.display()
        ))?;
        crate::diag!("transcript: {}", i.describe());
    }
    if done.len() > 1 {
        crate::diag!(
            "transcript: {} runs imported; {}",
            done.len(),
            total.describe()
        );
    }
    warn(&total, redactor);
    note_duplicates(total.duplicates, &mut std::io::stderr());
    if let Some(r) = redactor {
        crate::diag!("transcript: {} masks applied", r.masks_made());
    }
    for e in &failed {
        crate::diag!("transcript: {}", crate::style::one_line(&e.to_string()));
    }
    if !failed.is_empty() {
        return Err(CliError::Invalid(format!(
            "{} of {} inputs not imported",
            failed.len(),
            logs.len()
        )));
    }
    Ok(())
}

/// One warning per model the embedded table cannot price, worded as `receipts` words it; the
/// agent's model names are masked under `--redact` (settled first: none is added back unmasked).
pub fn warn(bill: &ImportBill, redactor: Option<&transcript_redact::Redactor>) {
    let mut unpriced = bill.settled(Pricing::embedded()).unpriced;
    if let Some(r) = redactor {
        unpriced = unpriced
            .iter()
            .map(|m| r.mask_text(m).into_owned())
            .collect();
    }
    for m in &unpriced {
        if m == transcript_domain::bill::NO_MODEL {
            crate::diag!(
                "transcript: warning: some turns name no model (the capture does not say; Codex `exec --json` never does, its session in ~/.codex/sessions does): their cost shows —"
            );
            continue;
        }
        crate::diag!(
            "transcript: warning: no price for model {} in the embedded LiteLLM {} table: its cost shows — (pass --pricing FILE to receipts)",
            crate::style::one_line(m),
            transcript_providers::LITELLM_VERSION
        );
    }
}

/// Says on `err` how many billed turns were set aside as copies of a request another run
/// bills (one request, one bill across runs: `transcript_export::requests`).
pub fn note_duplicates(duplicates: u64, err: &mut dyn std::io::Write) {
    if duplicates > 0 {
        let _ = writeln!(
            err,
            "transcript: note: {duplicates} duplicate turn(s) set aside: copies of requests another run bills (a resumed session, a log imported twice); each request is billed once"
        );
    }
}
