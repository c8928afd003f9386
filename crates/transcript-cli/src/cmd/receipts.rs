//! `transcript receipts`: per agent step, what the provider reported (model, tokens, cost
//! fields) and the run's totals, from the transcript alone.

use std::io::Write;
use std::path::Path;

use crate::CliError;
use crate::exit::stdout_result;
use crate::source;
use crate::style;

/// Prints the receipts of `run` (resolved in `storage`), as text or `--json`.
pub fn run(run: &str, storage: &Path, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let doc = source::open_run(run, storage, None)?
        .document(&transcript_export::ExportOptions::default());
    let receipts = transcript_export::receipts(&doc);
    let text = if json {
        super::to_json(&receipts)? + "\n"
    } else {
        style::clean(&receipts.render())
    };
    stdout_result(out.write_all(text.as_bytes()))
}
