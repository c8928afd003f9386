//! `transcript validate`: structural checks of transcripts and the runs they
//! link to, through the infra verifier.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use transcript_infra::{FileReport, Finding, RunReport, verify_file, verify_run, verify_run_in};

use crate::style::Style;

/// The report for one argument.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Report {
    /// A run file named `<run-id>.jsonl`: the run and its child runs.
    Run(RunReport),
    /// A file that is not named after a run: checked alone.
    File(FileReport),
}

impl Report {
    /// Whether no error was found.
    pub fn is_valid(&self) -> bool {
        match self {
            Report::Run(r) => r.is_valid(),
            Report::File(f) => f.is_valid(),
        }
    }
}

/// Verifies one transcript file; when its name is a run id, child runs are
/// followed in the same directory.
pub fn verify(path: &Path) -> Report {
    match transcript_domain::RunId::from_file_name(path) {
        Some(id) => Report::Run(verify_run(crate::source::dir_of(path), id)),
        None => Report::File(verify_file(path)),
    }
}

/// How bad a finding is: an error makes the transcript invalid, a warning does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Severity {
    Error,
    Warning,
}

fn finding(path: &str, severity: Severity, f: &Finding, style: &Style, out: &mut String) {
    let location = match f.line {
        Some(line) => format!("{path}:{line}"),
        None => path.to_owned(),
    };
    let label = match severity {
        Severity::Error => style.red("error"),
        Severity::Warning => style.yellow("warning"),
    };
    let _ = writeln!(
        out,
        "{location}: {label}: {}",
        crate::style::clean(&f.message)
    );
}

fn render_file(file: &FileReport, style: &Style, out: &mut String) {
    let path = file
        .path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "-".to_owned());
    for f in &file.errors {
        finding(&path, Severity::Error, f, style, out);
    }
    for f in &file.warnings {
        finding(&path, Severity::Warning, f, style, out);
    }
    let verdict = if file.is_valid() {
        style.green("ok")
    } else {
        style.red("INVALID")
    };
    let _ = writeln!(
        out,
        "{path}: {verdict} ({} events, seq {}..{}, {} errors, {} warnings)",
        file.events,
        file.first_seq.map_or("-".into(), |s| s.to_string()),
        file.last_seq.map_or("-".into(), |s| s.to_string()),
        file.errors.len(),
        file.warnings.len()
    );
}

/// Human-readable report.
pub fn render(report: &Report, style: &Style) -> String {
    let mut out = String::new();
    match report {
        Report::File(f) => render_file(f, style, &mut out),
        Report::Run(r) => {
            for f in &r.files {
                render_file(f, style, &mut out);
            }
            for f in &r.links {
                finding(
                    &format!("run {}", r.run_id),
                    Severity::Error,
                    f,
                    style,
                    &mut out,
                );
            }
        }
    }
    out
}

/// Runs `validate` over files, directories (every transcript in them), run ids, prefixes and
/// `latest`. A directory validates each root run with its children, and any file not reached
/// from a root run on its own, so every transcript is checked once.
pub fn run(
    args: &[String],
    store: &crate::store::Store,
    json: bool,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), crate::CliError> {
    let mut reports = Vec::new();
    for arg in args {
        let dir = Path::new(arg);
        if dir.is_dir() {
            reports.extend(verify_dir(dir));
        } else if transcript_nats::StorageUrl::is_nats(arg) {
            // A whole store named by its URL, as a directory by its path.
            reports.extend(verify_store(&crate::store::open(dir)?)?);
        } else if crate::source::is_path(arg) {
            if !dir.exists() {
                return Err(crate::CliError::NotFound {
                    what: "transcript".to_owned(),
                    path: dir.to_path_buf(),
                });
            }
            reports.push(verify(dir));
        } else {
            let id = store.resolve(arg).map_err(crate::store::error)?;
            if !store.contains(id).map_err(crate::store::error)? {
                return Err(crate::CliError::NotFound {
                    what: format!("run {id}"),
                    path: store.location().into(),
                });
            }
            reports.push(Report::Run(verify_run_in(store.as_ref(), id)));
        }
    }
    let text = if json {
        super::to_json(&reports)? + "\n"
    } else {
        reports.iter().map(|r| render(r, style)).collect()
    };
    crate::exit::stdout_result(out.write_all(text.as_bytes()))?;
    let invalid = reports.iter().filter(|r| !r.is_valid()).count();
    if reports.is_empty() {
        return Err(crate::CliError::NotFound {
            what: "any transcript".to_owned(),
            path: args.first().map(Into::into).unwrap_or_default(),
        });
    }
    if invalid > 0 {
        return Err(crate::CliError::Failed(format!(
            "{invalid} of {} transcripts invalid",
            reports.len()
        )));
    }
    Ok(())
}

/// Every run of a store: each root run with its children, then any run not reached from one.
fn verify_store(store: &crate::store::Store) -> Result<Vec<Report>, crate::CliError> {
    let mut runs = store.runs().map_err(crate::store::error)?;
    runs.sort_by_key(|r| r.run_id);
    let mut reached = std::collections::HashSet::new();
    let mut reports = Vec::new();
    let roots = runs.iter().filter(|r| r.parent_run_id.is_none());
    let others = runs.iter().filter(|r| r.parent_run_id.is_some());
    for run in roots.chain(others) {
        if reached.contains(&run.run_id) {
            continue;
        }
        let report = verify_run_in(store.as_ref(), run.run_id);
        reached.extend(report.files.iter().filter_map(|f| f.run_id));
        reports.push(Report::Run(report));
    }
    Ok(reports)
}

fn verify_dir(dir: &Path) -> Vec<Report> {
    let files = transcript_infra::run_files(dir);
    let mut reached = std::collections::HashSet::new();
    let mut reports = Vec::new();
    let roots: Vec<_> = files
        .iter()
        .filter(|(_, path)| {
            transcript_infra::first_event(path).is_none_or(|e| e.parent_run_id.is_none())
        })
        .collect();
    for (id, _) in &roots {
        let report = verify_run(dir, *id);
        for f in &report.files {
            if let Some(p) = &f.path {
                reached.insert(p.clone());
            }
        }
        reports.push(Report::Run(report));
    }
    for (_, path) in &files {
        if !reached.contains(path) {
            reports.push(Report::File(verify_file(path)));
        }
    }
    reports
}
