//! `transcript check <RUN> --expect FILE [--junit FILE]`: a run held to YAML expectations
//! (transcript-compare's `Expectations`). One line per expectation (`ok` or `FAIL`, the step,
//! the expectation and its line, what the run did), a summary, and with `--junit` a JUnit XML
//! file (0o600, as `export -o`) with one test case per expectation. Exit 0 when all hold, 1
//! when any fails, 2 for a bad expectations file (unreadable, not YAML, an unknown key: the
//! message names its line and key), 3 for a run not found.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use transcript_compare::{Expectations, Outcome, RunRecord};

use crate::CliError;
use crate::exit::stdout_result;
use crate::style::{Style, one_line};

/// What `check` was asked.
#[derive(Debug)]
pub struct CheckArgs {
    /// The run: a file, a run id, a prefix or `latest`.
    pub run: String,
    /// The expectations file.
    pub expect: PathBuf,
    /// Write JUnit XML here.
    pub junit: Option<PathBuf>,
    /// A LiteLLM price table instead of the embedded one.
    pub pricing: Option<PathBuf>,
}

/// Reads and parses the expectations file: any fault is a usage error (exit 2) naming it.
fn expectations(path: &Path) -> Result<Expectations, CliError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("{name}: cannot read the expectations: {e}")))?;
    Expectations::parse(&text, &name).map_err(|e| CliError::Usage(e.to_string()))
}

/// Runs `check`.
pub fn run(
    args: &CheckArgs,
    storage: &Path,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let expectations = expectations(&args.expect)?;
    let table = super::receipts::pricing(args.pricing.as_deref())?;
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let source = super::diff::open(&args.run, storage)?;
    let record = RunRecord::build(&source.events, &mut source.lookup(), Some(&price));
    source.children_read()?;
    let outcomes = transcript_compare::check(&record, &expectations);
    let file = args.expect.display().to_string();
    if let Some(path) = &args.junit {
        let xml = transcript_compare::junit_xml(&record.run_id.to_string(), &file, &outcomes);
        write_file(path, &xml)?;
    }
    let text = render(&outcomes, &file, style);
    stdout_result(out.write_all(text.as_bytes()))?;
    if outcomes.iter().all(|o| o.passed) {
        Ok(())
    } else {
        Err(CliError::Reported(1))
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut file = crate::output_file::create_private(path)?;
    file.write_all(text.as_bytes())
        .map_err(|e| crate::output_file::write_error(path, &e.to_string()))
}

/// One line per expectation, then the count.
pub fn render(outcomes: &[Outcome], file: &str, style: &Style) -> String {
    let mut out = String::new();
    for o in outcomes {
        let mark = if o.passed {
            style.green("ok  ")
        } else {
            style.red("FAIL")
        };
        let _ = writeln!(
            out,
            "{mark} {}: {} ({}:{}): {}",
            style.bold(&one_line(&o.scope)),
            one_line(&o.expectation),
            one_line(file),
            o.line,
            if o.passed {
                style.dim(&one_line(&o.detail))
            } else {
                one_line(&o.detail)
            }
        );
    }
    let failed = outcomes.iter().filter(|o| !o.passed).count();
    let summary = format!(
        "{} of {} expectations hold, {failed} failed",
        outcomes.len() - failed,
        outcomes.len()
    );
    let _ = writeln!(
        out,
        "{}",
        if failed == 0 {
            style.green(&summary)
        } else {
            style.red(&summary)
        }
    );
    out
}
