//! `transcript check <RUN> --expect FILE [--junit FILE]`: a run held to YAML expectations
//! (transcript-compare's `Expectations` and `check`). One line per expectation (`ok` or
//! `FAIL`, the step, the expectation and its line, what the run did), a summary, and with
//! `--junit` a JUnit XML file (0o600, as `export -o`), one test case per expectation. Exit 0
//! when all hold, 1 when any fails, 2 for a bad expectations file (unreadable, not YAML, an
//! unknown key: the message names its line and key), 3 for a run not found.

use std::io::Write as _;
use std::path::PathBuf;

use transcript_compare::Expectations;

use crate::CliError;
use crate::exit::stdout_result;
use crate::style::Style;

// `transcript check`'s arguments (no doc comment: the variant's is the command's help).
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The run: a transcript file, a run id (or unique prefix) or `latest`.
    pub run: String,
    /// The expectations file (YAML).
    #[arg(long, value_name = "FILE")]
    pub expect: PathBuf,
    /// Write JUnit XML here, one test case per expectation.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// A LiteLLM-format price table instead of the embedded one (max_cost_usd).
    #[arg(long, value_name = "FILE")]
    pub pricing: Option<PathBuf>,
}

/// Runs `check`: the expectations first (a bad file is exit 2 whatever the run), then the run.
pub fn run(
    args: &CheckArgs,
    store: &crate::store::Store,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let file = args.expect.display().to_string();
    let text = std::fs::read_to_string(&args.expect)
        .map_err(|e| CliError::Usage(format!("{file}: cannot read the expectations: {e}")))?;
    let expectations =
        Expectations::parse(&text, &file).map_err(|e| CliError::Usage(e.to_string()))?;
    let record = super::diff::record(&args.run, store, args.pricing.as_deref())?;
    let outcomes = transcript_compare::check(&record, &expectations);
    if let Some(path) = &args.junit {
        let xml = transcript_compare::junit_xml(&record.run_id.to_string(), &file, &outcomes);
        let mut junit = crate::output_file::create_private(path)?;
        junit
            .write_all(xml.as_bytes())
            .map_err(|e| crate::output_file::write_error(path, &e.to_string()))?;
    }
    let text = transcript_compare::render_outcomes_text(&outcomes, &file, style);
    stdout_result(out.write_all(text.as_bytes()))?;
    if outcomes.iter().all(|o| o.passed) {
        Ok(())
    } else {
        Err(CliError::Reported(1))
    }
}
