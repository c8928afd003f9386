//! `transcript diff <A> <B>`: what changed between two runs, from transcript-compare's
//! `DiffDocument`. The terminal view shows only the branches that differ (colored where the
//! terminal takes it, every recorded value escaped by `style`); `--json` prints the versioned
//! document (`schema/diff-document.schema.json`); `--html FILE` writes the side-by-side page
//! (0o600, as `export -o`). Exit 0 equal, 1 different, 2 usage, 3 a run not found or not a
//! transcript.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use transcript_compare::{Change, DiffDocument, DiffOptions, LineOp, RunDiff, Side, StepDiff};

use crate::CliError;
use crate::exit::stdout_result;
use crate::source::{self, RunSource};
use crate::style::{Style, clean, one_line};

/// What `diff` was asked.
#[derive(Debug)]
pub struct DiffArgs {
    /// Run A: a file, a run id, a prefix or `latest`.
    pub a: String,
    /// Run B.
    pub b: String,
    /// Print the JSON document.
    pub json: bool,
    /// Write the HTML page here.
    pub html: Option<PathBuf>,
    /// Compare ids too.
    pub strict_ids: bool,
    /// A LiteLLM price table instead of the embedded one.
    pub pricing: Option<PathBuf>,
}

/// A displayed value is cut after this many characters (`--json` has it whole).
const SHOWN_CHARS: usize = 300;

/// Runs `diff`.
pub fn run(
    args: &DiffArgs,
    storage: &Path,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let table = super::receipts::pricing(args.pricing.as_deref())?;
    let price = |model: &str, u: &transcript_domain::Usage| table.cost(model, u).map(|c| c.usd);
    let a = open(&args.a, storage)?;
    let b = open(&args.b, storage)?;
    let ra = transcript_compare::RunRecord::build(&a.events, &mut a.lookup(), Some(&price));
    let rb = transcript_compare::RunRecord::build(&b.events, &mut b.lookup(), Some(&price));
    a.children_read()?;
    b.children_read()?;
    let options = DiffOptions {
        strict_ids: args.strict_ids,
    };
    let doc = transcript_compare::diff(&ra, &rb, &options);
    if let Some(path) = &args.html {
        let page = transcript_compare::render_html(&doc, &args.a, &args.b);
        super::export::write_output(Some(path), &page, out)?;
    }
    let text = if args.json {
        super::to_json(&doc)? + "\n"
    } else if args.html.is_some() {
        String::new()
    } else {
        render(&doc, (&args.a, &args.b), style)
    };
    stdout_result(out.write_all(text.as_bytes()))?;
    if doc.equal {
        Ok(())
    } else {
        Err(CliError::Reported(1))
    }
}

/// One side: resolved and read as `tree` does (a directory or a file of no events is not a
/// run: exit 3).
pub fn open<'a>(arg: &str, storage: &Path) -> Result<RunSource<'a>, CliError> {
    if Path::new(arg).is_dir() {
        return Err(CliError::Read {
            path: arg.into(),
            message: "not a transcript: a directory (name one run: a transcript file or a run id)"
                .to_owned(),
        });
    }
    let run = source::open_run(arg, storage, None)?;
    if run.events.is_empty() {
        return Err(CliError::Read {
            path: run.path.clone(),
            message: "not a transcript: no line of it is a transcript event".to_owned(),
        });
    }
    Ok(run)
}

/// The terminal view: a header, then only what differs, then a one-line verdict.
pub fn render(doc: &DiffDocument, (a, b): (&str, &str), style: &Style) -> String {
    let mut out = String::new();
    let run = &doc.run;
    let _ = writeln!(
        out,
        "{} {} (run {}, {}, {})",
        style.red("--- A:"),
        one_line(a),
        run.a_run_id,
        one_line(run.a_workflow.as_deref().unwrap_or("?")),
        run.a_status
    );
    let _ = writeln!(
        out,
        "{} {} (run {}, {}, {})",
        style.green("+++ B:"),
        one_line(b),
        run.b_run_id,
        one_line(run.b_workflow.as_deref().unwrap_or("?")),
        run.b_status
    );
    render_run(run, 0, style, &mut out);
    let s = &doc.summary;
    let verdict = if doc.equal {
        style.green(&format!("equal ({} steps compared)", s.compared))
    } else {
        style.red(&format!(
            "differ: {} of {} compared steps changed, {} only in A, {} only in B",
            s.changed, s.compared, s.only_in_a, s.only_in_b
        ))
    };
    let _ = writeln!(out, "{verdict}");
    out
}

fn render_run(run: &RunDiff, depth: usize, style: &Style, out: &mut String) {
    let indent = "  ".repeat(depth);
    if !run.changes.is_empty() {
        let _ = writeln!(out, "{indent}{}", style.bold("run"));
        for c in &run.changes {
            render_change(c, depth + 1, style, out);
        }
    }
    for s in run.steps.iter().filter(|s| !s.equal) {
        render_step(s, depth, style, out);
    }
}

fn title(step: &StepDiff) -> String {
    let mut t = format!(
        "{} [{}] {} #{}",
        one_line(&step.path),
        one_line(&step.kind),
        one_line(&step.name),
        step.iteration
    );
    if step.occurrence > 0 {
        let _ = write!(t, " (run {})", step.occurrence + 1);
    }
    t
}

fn render_step(step: &StepDiff, depth: usize, style: &Style, out: &mut String) {
    let indent = "  ".repeat(depth);
    match step.side {
        Side::OnlyA => {
            let _ = writeln!(
                out,
                "{indent}{} {} {}",
                style.red("-"),
                style.bold(&title(step)),
                style.red(&format!(
                    "only in A ({})",
                    step.a_status.as_deref().unwrap_or("?")
                ))
            );
            return;
        }
        Side::OnlyB => {
            let _ = writeln!(
                out,
                "{indent}{} {} {}",
                style.green("+"),
                style.bold(&title(step)),
                style.green(&format!(
                    "only in B ({})",
                    step.b_status.as_deref().unwrap_or("?")
                ))
            );
            return;
        }
        Side::Both => {}
    }
    let _ = writeln!(out, "{indent}{}", style.bold(&title(step)));
    for c in &step.changes {
        render_change(c, depth + 1, style, out);
    }
    if let Some(child) = &step.child
        && !child.equal
    {
        let _ = writeln!(
            out,
            "{indent}  {}",
            style.dim(&format!(
                "child run {} vs {}",
                child.a_run_id, child.b_run_id
            ))
        );
        render_run(child, depth + 2, style, out);
    }
    for s in step.steps.iter().filter(|s| !s.equal) {
        render_step(s, depth + 1, style, out);
    }
}

/// A value for one line: strings as written (escaped), other JSON compact, cut after
/// [`SHOWN_CHARS`].
fn shown(v: &serde_json::Value) -> String {
    let text = match v {
        serde_json::Value::Null => return "(absent)".to_owned(),
        serde_json::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    cut(&text)
}

fn cut(text: &str) -> String {
    let count = text.chars().count();
    if count <= SHOWN_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(SHOWN_CHARS).collect();
    format!(
        "{kept}… ({} more characters; --json has them all)",
        count - SHOWN_CHARS
    )
}

fn render_change(c: &Change, depth: usize, style: &Style, out: &mut String) {
    let indent = "  ".repeat(depth);
    if c.hunks.is_empty() {
        let _ = writeln!(
            out,
            "{indent}{}: {} {} {}",
            one_line(&c.field),
            style.red(&one_line(&shown(&c.a))),
            style.dim("→"),
            style.green(&one_line(&shown(&c.b)))
        );
        return;
    }
    let _ = writeln!(out, "{indent}{}:", one_line(&c.field));
    for h in &c.hunks {
        let _ = writeln!(
            out,
            "{indent}  {}",
            style.cyan(&format!(
                "@@ -{},{} +{},{} @@",
                h.a_start, h.a_lines, h.b_start, h.b_lines
            ))
        );
        for l in &h.lines {
            // One line of recorded text: its own line breaks cannot appear, its controls are
            // escaped.
            let text = cut(&clean(&l.text).replace('\n', "\\n"));
            let line = match l.op {
                LineOp::Equal => format!(" {text}"),
                LineOp::Delete => style.red(&format!("-{text}")),
                LineOp::Insert => style.green(&format!("+{text}")),
            };
            let _ = writeln!(out, "{indent}  {line}");
        }
    }
}
