//! `transcript diff <A> <B>`: what changed between two runs, from transcript-compare's
//! `DiffDocument`. The terminal view (transcript-compare's `render_diff_text`) shows only the
//! branches that differ, painted and escaped by `style`; `--json` prints the versioned document
//! (`schema/diff-document.schema.json`); `--html FILE` writes the side-by-side page (0o600, as
//! `export -o`) and prints nothing else. Exit 0 equal, 1 different, 2 usage, 3 a run not found or not a transcript.

use std::path::{Path, PathBuf};

use transcript_compare::{DiffOptions, Painter, RunRecord, StepDefinitions, Tone};

use crate::CliError;
use crate::exit::stdout_result;
use crate::style::{Style, clean, one_line};

// `transcript diff`'s arguments (no doc comment: the variant's is the command's help).
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Run A: a transcript file, a run id (or unique prefix) or `latest`.
    pub a: String,
    /// Run B.
    pub b: String,
    /// Print the diff as a versioned JSON document.
    #[arg(long)]
    pub json: bool,
    /// Write a self-contained HTML page, A and B side by side.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Compare run ids, child run ids and call ids too.
    #[arg(long)]
    pub strict_ids: bool,
    /// A LiteLLM-format price table instead of the embedded one (cost per step).
    #[arg(long, value_name = "FILE")]
    pub pricing: Option<PathBuf>,
}

/// The CLI's colors and escaping for transcript-compare's text views.
impl Painter for Style {
    fn paint(&self, tone: Tone, text: &str) -> String {
        match tone {
            Tone::Red => self.red(text),
            Tone::Green => self.green(text),
            Tone::Bold => self.bold(text),
            Tone::Dim => self.dim(text),
            Tone::Cyan => self.cyan(text),
        }
    }
    fn clean(&self, text: &str) -> String {
        clean(text)
    }
    fn one_line(&self, text: &str) -> String {
        one_line(text)
    }
}

/// One run read and priced (child runs from the files beside it), with its step definitions.
pub fn record(
    arg: &str,
    store: &crate::store::Store,
    pricing: Option<&Path>,
) -> Result<(RunRecord, StepDefinitions), CliError> {
    let table = super::receipts::pricing(pricing)?;
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let run = super::tree::open(arg, store)?;
    let record = RunRecord::build(&run.events, &mut run.lookup(), Some(&price));
    run.children_read()?;
    Ok((record, definitions(&run.events)))
}

/// What each step of a run's workflow said (#58 item 3), from the workflow text its
/// `run.started` keeps (wire decision 20); empty (not compared) when it keeps none or the text
/// does not read (said on stderr).
pub fn definitions(events: &[transcript_domain::DecodedEvent]) -> StepDefinitions {
    transcript_exec::workflow::recorded_step_definitions(events).map_or_else(
        |e| {
            crate::diag!(
                "transcript: note: step definitions not compared: {}",
                clean(&e.to_string())
            );
            StepDefinitions::default()
        },
        StepDefinitions,
    )
}

/// Runs `diff`.
pub fn run(
    args: &DiffArgs,
    store: &crate::store::Store,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let (a, a_defs) = record(&args.a, store, args.pricing.as_deref())?;
    let (b, b_defs) = record(&args.b, store, args.pricing.as_deref())?;
    let options = DiffOptions {
        strict_ids: args.strict_ids,
    };
    let doc = transcript_compare::diff_with_definitions(&a, &b, &options, (&a_defs, &b_defs));
    if let Some(path) = &args.html {
        let page = transcript_compare::render_html(&doc, &args.a, &args.b);
        super::export::write_output(Some(path), &page, out)?;
    }
    // `--html` writes the page only (`--json` beside it still prints the document).
    let text = if args.json {
        super::to_json(&doc)? + "\n"
    } else if args.html.is_some() {
        String::new()
    } else {
        transcript_compare::render_diff_text(&doc, (&args.a, &args.b), style)
    };
    stdout_result(out.write_all(text.as_bytes()))?;
    if doc.equal {
        Ok(())
    } else {
        Err(CliError::Reported(1))
    }
}
