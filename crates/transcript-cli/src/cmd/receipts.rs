//! `transcript receipts`: per agent step, what the provider reported (model, tokens, the
//! CLI's own cost) and the cost priced from the price table (LiteLLM's, embedded, or
//! `--pricing FILE`), with per-run, per-model and total sums, from the transcript alone.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

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

/// One warning per model the table cannot price (never shown as $0).
pub fn warn_unpriced(models: &[String], file: Option<&Path>, err: &mut dyn Write) {
    let table = match file {
        Some(f) => f.display().to_string(),
        None => format!(
            "the embedded LiteLLM {} table",
            transcript_providers::LITELLM_VERSION
        ),
    };
    for m in models {
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
    storage: &Path,
    json: bool,
    pricing_file: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let table = pricing(pricing_file)?;
    let doc = source::open_run(run, storage, None)?
        .document(&transcript_export::ExportOptions::default());
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let receipts = transcript_export::priced_receipts(&doc, &price);
    warn_unpriced(&receipts.unpriced_models, pricing_file, err);
    let text = if json {
        super::to_json(&receipts)? + "\n"
    } else {
        style::clean(&receipts.render())
    };
    stdout_result(out.write_all(text.as_bytes()))
}
