//! `transcript validate`: structural checks of transcripts and the runs they
//! link to, through the infra verifier.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use transcript_domain::RunId;
use transcript_infra::{FileReport, Finding, RunReport, verify_file, verify_run};

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
    let run_id = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".jsonl"))
        .and_then(|stem| RunId::parse(stem).ok());
    match run_id {
        Some(id) => Report::Run(verify_run(crate::source::dir_of(path), id)),
        None => Report::File(verify_file(path)),
    }
}

fn finding(path: &str, severity: &str, f: &Finding, style: &Style, out: &mut String) {
    let location = match f.line {
        Some(line) => format!("{path}:{line}"),
        None => path.to_owned(),
    };
    let label = if severity == "error" {
        style.red(severity)
    } else {
        style.yellow(severity)
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
        finding(&path, "error", f, style, out);
    }
    for f in &file.warnings {
        finding(&path, "warning", f, style, out);
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
                finding(&format!("run {}", r.run_id), "error", f, style, &mut out);
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
    storage: &Path,
    json: bool,
    style: &Style,
    out: &mut dyn std::io::Write,
) -> Result<(), crate::CliError> {
    let mut reports = Vec::new();
    for arg in args {
        let dir = Path::new(arg);
        if dir.is_dir() {
            reports.extend(verify_dir(dir));
        } else {
            let path = crate::source::resolve(arg, storage)?;
            reports.push(verify(&path));
        }
    }
    let text = if json {
        serde_json::to_string_pretty(&reports)
            .map_err(|e| crate::CliError::Failed(e.to_string()))?
            + "\n"
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

fn verify_dir(dir: &Path) -> Vec<Report> {
    let files = crate::source::run_files(dir);
    let mut reached = std::collections::HashSet::new();
    let mut reports = Vec::new();
    let roots: Vec<_> = files
        .iter()
        .filter(|(id, path)| {
            crate::cmd::list::summarize(*id, path)
                .parent_run_id
                .is_none()
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
