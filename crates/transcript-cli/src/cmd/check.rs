//! `transcript check <RUN> --expect FILE [--junit FILE]`: transcript-compare's `check_judged`
//! (judges graded by transcript-exec's `ChatClient` as the file's `judge:` says). One line per
//! expectation (`ok`/`FAIL`/`ERR`, step, expectation and line, what the run did), a summary;
//! `--junit`: JUnit XML (0o600, as `export -o`), written for a bad expectations file too (one
//! error case naming the key and line). Exit 0 all hold, 1 any fails, 2 a bad file (naming the
//! line and key), 3 a run not found, 4 a judge could not grade.

use std::path::PathBuf;
use std::time::Duration;

use transcript_compare::{Expectations, GradePrompt, Outcome, Summary, check_judged};
use transcript_exec::ChatClient;

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

/// An expectations file's text (unreadable: a usage error naming it).
fn read_text(file: &std::path::Path) -> Result<String, CliError> {
    std::fs::read_to_string(file).map_err(|e| {
        CliError::Usage(format!(
            "{}: cannot read the expectations: {e}",
            file.display()
        ))
    })
}

/// An expectations file, read and parsed (a bad one is a usage error naming key and line).
pub(super) fn read_expectations(file: &std::path::Path) -> Result<Expectations, CliError> {
    Expectations::parse(&read_text(file)?, &file.display().to_string())
        .map_err(|e| CliError::Usage(e.to_string()))
}

/// Runs `check`: the expectations first (a bad file is exit 2 whatever the run), then the run.
pub fn run(
    args: &CheckArgs,
    store: &crate::store::Store,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let file = args.expect.display().to_string();
    let text = read_text(&args.expect)?;
    let expectations = match Expectations::parse(&text, &file) {
        Ok(e) => e,
        Err(e) => {
            // CI always has a file to read: one error case naming the key and line (#58).
            if let Some(path) = &args.junit {
                let case = Outcome {
                    scope: "expectations".to_owned(),
                    expectation: "the expectations file reads".to_owned(),
                    line: e.line,
                    passed: false,
                    errored: true,
                    detail: e.to_string(),
                };
                let xml = transcript_compare::junit_xml(&args.run, &file, &[case]);
                super::export::write_output(Some(path), &xml, out)?;
            }
            return Err(CliError::Usage(e.to_string()));
        }
    };
    let (record, _) = super::diff::record(&args.run, store, args.pricing.as_deref())?;
    let j = &expectations.judge;
    let chat = ChatClient::new(&j.model)
        .with_base_url(j.base_url.clone())
        .with_api_key_env(&j.api_key_env)
        .with_max_retries(j.max_retries)
        .with_timeout(Duration::from_secs(j.timeout_s))
        .json_object(true);
    let grader = |p: GradePrompt| chat.ask(p.system, p.user);
    let runtime = tokio::runtime::Runtime::new().map_err(|e| CliError::Failed(e.to_string()))?;
    let outcomes = runtime.block_on(check_judged(&record, &expectations, &grader));
    if let Some(path) = &args.junit {
        let xml = transcript_compare::junit_xml(&record.run_id.to_string(), &file, &outcomes);
        super::export::write_output(Some(path), &xml, out)?;
    }
    let text = transcript_compare::render_outcomes_text(&outcomes, &file, style);
    stdout_result(out.write_all(text.as_bytes()))?;
    match Summary::of(&outcomes) {
        Summary::Held => Ok(()),
        Summary::Failed => Err(CliError::Reported(1)),
        Summary::Errored => Err(CliError::Reported(4)),
    }
}
