//! `transcript import --store` and imports of directories: printing over
//! `transcript_import::Importer`'s incremental store import (the continuation rule and the
//! index are documented in `transcript_import::store`).

use std::path::{Path, PathBuf};

use transcript_import::store::StoreOutcome;
pub use transcript_import::store::{Index, default_store, parse_day};
use transcript_import::{ImportBill, ImportContext, Importer, Store};
use transcript_providers::Provider;

use crate::CliError;

/// Runs `import --store` or an import of directories: every session file under `dirs`
/// (modified since `since`, seconds since the epoch) incrementally (see the module docs). One line
/// per run on stdout (`run_id<TAB>provider<TAB>path<TAB>new|appended|unchanged`). Files that
/// could not be imported are named on stderr and fail the command (exit 3) once the others
/// are imported and indexed. The summary's warnings are masked with `redactor`, as the
/// transcripts are.
pub fn run_store(
    ctx: &ImportContext,
    (dirs, since): (&[PathBuf], Option<i64>),
    (redactor, commit): (Option<&transcript_redact::Redactor>, super::Commit<'_>),
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let Some(provider) = ctx.provider else {
        return Err(CliError::Usage(
            "importing a session store needs its provider (claude, codex, gemini or copilot), not auto"
                .to_owned(),
        ));
    };
    let mut index = Index::load(&ctx.storage)?;
    let importer = Importer::from(ctx.clone());
    let store = Store {
        provider,
        dirs: dirs.to_vec(),
    };
    let outcomes = importer.import_store_with(&store, since, &index)?;
    if index.record(&outcomes) {
        // Nothing new: the index on disk already says all of it (a repeated import writes
        // and syncs nothing).
        index.save(&ctx.storage)?;
    }
    commit()?;
    let mut counts = Counts::default();
    for done in outcomes {
        match done.result {
            Ok((outcome, _)) => counts.announce(outcome, &done.file, ctx, provider, out)?,
            Err(e) => {
                counts.failed += 1;
                crate::diag!("transcript: {}", crate::style::one_line(&e.to_string()));
            }
        }
    }
    counts.seen = counts.new + counts.appended + counts.unchanged + counts.failed + counts.empty;
    let (failed, seen) = (counts.failed, counts.seen);
    counts.report(index.session_runs().len(), redactor);
    if failed > 0 {
        // Like `import FILE…`: what was imported is kept and indexed, but a file that could
        // not be (a full disk) is never reported as success.
        return Err(CliError::Invalid(format!(
            "{failed} of {seen} session files not imported"
        )));
    }
    Ok(())
}

/// Session files by what their import did.
#[derive(Default)]
struct Counts {
    seen: usize,
    /// Files without agent output (yet).
    empty: usize,
    new: usize,
    appended: usize,
    unchanged: usize,
    failed: usize,
    /// What the new and appended turns cost, summed.
    bill: ImportBill,
}

impl Counts {
    /// The summary on stderr: files by outcome, what this import added, how many runs of the
    /// storage mirror a session (`open`), one warning per model without a price.
    fn report(self, open: usize, redactor: Option<&transcript_redact::Redactor>) {
        let Counts {
            seen,
            new,
            appended,
            unchanged,
            failed,
            bill,
            ..
        } = self;
        crate::diag!(
            "transcript: {seen} session file(s): {new} new, {appended} appended, {unchanged} unchanged, {failed} not imported; imported now: {}",
            bill.describe()
        );
        if new + appended > 0 {
            crate::diag!(
                "transcript: {open} imported session run(s) in this storage stay open (no run.completed): the agent CLI may append to a session (a resume), and the next import appends to its run"
            );
        }
        super::warn(&bill, redactor);
        // One request, one bill, as `receipts` bills (#59 item 5).
        crate::cmd::import::note_duplicates(bill.duplicates, &mut std::io::stderr());
    }

    /// Counts one file's outcome and says it: a line on stdout for a run
    /// (`run_id<TAB>provider<TAB>path<TAB>new|appended|unchanged`), a note on stderr.
    fn announce(
        &mut self,
        outcome: StoreOutcome,
        file: &Path,
        ctx: &ImportContext,
        provider: Provider,
        out: &mut dyn std::io::Write,
    ) -> Result<(), CliError> {
        let (run, what) = match outcome {
            StoreOutcome::NoOutput => {
                self.empty += 1;
                crate::diag!(
                    "transcript: {}: no {provider} agent output (read again once it changes)",
                    file.display()
                );
                return Ok(());
            }
            StoreOutcome::Unchanged(r) => {
                self.unchanged += 1;
                (r, "unchanged".to_owned())
            }
            StoreOutcome::New(r, n, bill) => {
                self.new += 1;
                self.bill.merge(&bill);
                (r, format!("new ({n} events; {})", bill.describe()))
            }
            StoreOutcome::Appended(r, n, bill) => {
                self.appended += 1;
                self.bill.merge(&bill);
                (r, format!("appended ({n} events; {})", bill.describe()))
            }
        };
        crate::exit::stdout_result(writeln!(
            out,
            "{run}\t{provider}\t{}\t{}",
            ctx.storage.join(run.file_name()).display(),
            what.split(' ').next().unwrap_or_default()
        ))?;
        crate::diag!("transcript: {}: {what}", file.display());
        Ok(())
    }
}
