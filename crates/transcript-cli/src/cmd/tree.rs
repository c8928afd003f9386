//! `transcript tree`: the step tree across a run and its child runs, rebuilt
//! only from the files.

use std::fmt::Write as _;

use transcript_domain::tree::{RunTree, Status, StepNode};

use crate::CliError;
use crate::exit::stdout_result;
use crate::source;
use crate::style::{Style, clean};

/// Prints the step tree of `run` (resolved in `store`), as text or `--json`.
pub fn run(
    run: &str,
    store: &crate::store::Store,
    json: bool,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let run = open(run, store)?;
    let tree = transcript_domain::tree::build_run_tree(&run.events, &mut run.lookup());
    let open = tree.status == Status::Incomplete
        && run.state == transcript_domain::run_store::RunState::Open;
    // A run without its completion is running (its runner holds it) or abandoned.
    let live = (tree.status == Status::Incomplete && !open).then(|| run.state.as_str());
    let text = if json {
        let mut value =
            serde_json::to_value(&tree).map_err(|e| CliError::Invalid(e.to_string()))?;
        if open {
            // `list --json` says `open` for such a run; the tree keeps the one status
            // vocabulary and says why the run has no completion.
            value["open_session"] = serde_json::Value::Bool(true);
        }
        if let Some(live) = live {
            value["status"] = serde_json::Value::from(live);
        }
        super::to_json(&value)? + "\n"
    } else {
        let unfinished = if open {
            "open"
        } else {
            live.unwrap_or("incomplete")
        };
        render(&tree, style, unfinished)
    };
    stdout_result(out.write_all(text.as_bytes()))?;
    run.children_read()
}

/// One run to draw (or to compare: `diff`, `check`): a directory, an empty file or a file
/// without one event is not a transcript (exit 3).
pub fn open<'a>(run: &str, store: &crate::store::Store) -> Result<source::RunSource<'a>, CliError> {
    if std::path::Path::new(run).is_dir() {
        return Err(not_a_transcript(
            run.as_ref(),
            "a directory (name one run: a transcript file or a run id)",
        ));
    }
    let run = source::open_run(run, store, None)?;
    if run.events.is_empty() {
        // Nothing decodes: drawing a placeholder run would pass garbage for an empty run.
        let empty = std::fs::metadata(&run.path).is_ok_and(|m| m.len() == 0);
        let why = if empty {
            "the file is empty"
        } else {
            "no line of it is a transcript event"
        };
        return Err(not_a_transcript(&run.path, why));
    }
    Ok(run)
}

/// `path` is not a transcript, and why (exit 3, as `validate` says of such a file).
fn not_a_transcript(path: &std::path::Path, why: &str) -> CliError {
    CliError::Read {
        path: path.to_path_buf(),
        message: format!("not a transcript: {why}"),
    }
}

/// Human-readable milliseconds.
pub fn duration(ms: Option<i64>) -> String {
    match ms {
        None => "—".to_owned(),
        Some(ms) if ms < 1000 => format!("{ms}ms"),
        Some(ms) if ms < 60_000 => format!("{:.2}s", ms as f64 / 1000.0),
        Some(ms) => format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// `unfinished` is what has no completion yet is called: `open` (the run mirrors an imported
/// session that may still grow, see `transcript_infra::DirRunStore::with_open_sessions`), `running` (its
/// runner holds the run), `abandoned` (no runner does), or `incomplete`.
fn status(style: &Style, s: Status, unfinished: &str) -> String {
    match s {
        Status::Succeeded => style.green("ok"),
        Status::Failed => style.red("failed"),
        Status::Incomplete if unfinished == "abandoned" => style.red(unfinished),
        Status::Incomplete => style.yellow(unfinished),
        Status::Cancelled => style.yellow("cancelled"),
    }
}

/// Renders the tree as text; `unfinished` as in [`status`] (for the root run only).
pub fn render(tree: &RunTree, style: &Style, unfinished: &str) -> String {
    let mut out = String::new();
    render_run(tree, 0, style, unfinished, &mut out);
    out
}

fn render_run(tree: &RunTree, depth: usize, style: &Style, open: &str, out: &mut String) {
    let indent = "  ".repeat(depth);
    let _ = writeln!(
        out,
        "{indent}{} {} {} {}",
        style.bold(&format!("run {}", tree.run_id)),
        clean(tree.workflow.as_deref().unwrap_or("?")),
        status(style, tree.status, open),
        style.dim(&duration(tree.duration_ms())),
    );
    if let Some(err) = &tree.error {
        let _ = writeln!(out, "{indent}  {}", style.red(&format!("error: {err}")));
    }
    for node in &tree.steps {
        render_step(node, depth + 1, style, open, out);
    }
    for problem in &tree.problems {
        let _ = writeln!(
            out,
            "{indent}  {}",
            style.yellow(&format!("problem: {problem}"))
        );
    }
}

fn render_step(node: &StepNode, depth: usize, style: &Style, open: &str, out: &mut String) {
    let indent = "  ".repeat(depth);
    let _ = write!(
        out,
        "{indent}{} [{}] {}",
        clean(&node.path),
        clean(&node.kind),
        clean(&node.name)
    );
    if node.iteration > 0 || node.path.contains('.') {
        let _ = write!(out, " #{}", node.iteration);
    }
    let _ = writeln!(
        out,
        " {} {}",
        status(style, node.status, open),
        style.dim(&duration(node.duration_ms()))
    );
    if let Some(err) = &node.error {
        let _ = writeln!(out, "{indent}  {}", style.red(&format!("error: {err}")));
    }
    if let Some(child) = &node.child {
        render_run(child, depth + 1, style, "incomplete", out);
    } else if let Some(id) = node.child_run_id {
        let _ = writeln!(
            out,
            "{indent}  {}",
            style.yellow(&format!("child run {id}: file not found"))
        );
    }
    for c in &node.children {
        render_step(c, depth + 1, style, open, out);
    }
}
