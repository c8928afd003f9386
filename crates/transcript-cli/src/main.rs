//! The `transcript` command: run workflows and audit, replay and inspect
//! their canonical transcripts.
//!
//! Data goes to stdout, diagnostics to stderr. Exit codes: 0 success, 1 a
//! failed check or run (or an unreadable input), 2 a usage error.
#![forbid(unsafe_code)]

mod cmd;
mod source;
mod style;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::source::DEFAULT_STORAGE;
use crate::style::{ColorChoice, Style};

/// Canonical agent exchange transcripts: run, validate, inspect, tail.
#[derive(Debug, Parser)]
#[command(name = "transcript", version, about, long_about = None)]
struct Cli {
    /// Where transcripts live; run ids resolve against it.
    #[arg(long, global = true, default_value = DEFAULT_STORAGE, env = "TRANSCRIPT_STORAGE")]
    storage: PathBuf,
    /// When to color output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check transcripts: seq from 1 without gaps, one run per file, child links, malformed lines.
    Validate {
        /// Transcript files or run ids.
        #[arg(required = true)]
        runs: Vec<String>,
        /// Print a machine-readable report.
        #[arg(long)]
        json: bool,
    },
    /// Export a run (and its child runs) as Markdown, versioned JSON or a self-contained HTML page.
    Export {
        /// A transcript file or a run id.
        run: String,
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Output file; `-` or absent for stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Drop thinking blocks.
        #[arg(long)]
        no_reasoning: bool,
        /// Shorten tool inputs and outputs larger than this many bytes.
        #[arg(long, value_name = "BYTES")]
        truncate_outputs: Option<usize>,
    },
    /// Per agent step: provider, model, timing, status, tokens and cost, with run totals.
    Receipts {
        /// A transcript file or a run id.
        run: String,
        /// Print the receipts as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the step tree of a run and its child runs, rebuilt from the files.
    Tree {
        /// A transcript file or a run id.
        run: String,
        /// Print the tree as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the conversation: prompts, answers, thinking, tool calls with results.
    Show {
        /// A transcript file or a run id.
        run: String,
    },
    /// Render events as they are appended.
    Tail {
        /// A transcript file or a run id (may not exist yet with -f).
        run: String,
        /// Keep following the file.
        #[arg(short, long)]
        follow: bool,
        /// Stop after the run.completed event.
        #[arg(long)]
        until_complete: bool,
    },
    /// Counts per event and block type, tool calls, step durations, token usage.
    Stats {
        /// A transcript file, a run id, or a directory of transcripts.
        target: String,
        /// Print the statistics as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Formats of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// A readable Markdown document.
    Markdown,
    /// One versioned JSON document (schema/export-document.schema.json).
    Json,
    /// One self-contained HTML page.
    Html,
}

/// A failure the CLI reports on one line.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A path or run that does not exist.
    #[error("{}: {what} not found", path.display())]
    NotFound {
        /// What was looked for.
        what: String,
        /// Where.
        path: PathBuf,
    },
    /// A file that could not be read.
    #[error("{}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A check or run that failed (already reported in detail).
    #[error("{0}")]
    Failed(String),
    /// Bad arguments beyond what clap checks.
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            _ => 1,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("transcript: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let style = Style::for_stdout(cli.color);
    match cli.command {
        Command::Validate { runs, json } => {
            let mut reports = Vec::new();
            for run in &runs {
                let path = source::resolve(run, &cli.storage)?;
                reports.push(cmd::validate::verify(&path));
            }
            if json {
                let text = serde_json::to_string_pretty(&reports)
                    .map_err(|e| CliError::Failed(e.to_string()))?;
                let _ = writeln!(out, "{text}");
            } else {
                for r in &reports {
                    let _ = write!(out, "{}", cmd::validate::render(r, &style));
                }
            }
            let invalid = reports.iter().filter(|r| !r.is_valid()).count();
            if invalid > 0 {
                return Err(CliError::Failed(format!(
                    "{invalid} of {} transcripts invalid",
                    reports.len()
                )));
            }
        }
        Command::Export {
            run,
            format,
            output,
            no_reasoning,
            truncate_outputs,
        } => {
            let path = source::resolve(&run, &cli.storage)?;
            let loaded = source::load(&path)?;
            report_read_problems(&loaded);
            let options = transcript_export::ExportOptions {
                include_reasoning: !no_reasoning,
                truncate_outputs,
                redacted: false,
            };
            let mut lookup = source::child_lookup(source::dir_of(&path));
            let doc = transcript_export::build_document(&loaded.decoded(), &mut lookup, &options);
            let text = match format {
                ExportFormat::Markdown => transcript_export::to_markdown(&doc),
                ExportFormat::Html => transcript_export::to_html(&doc),
                ExportFormat::Json => {
                    serde_json::to_string_pretty(&doc)
                        .map_err(|e| CliError::Failed(e.to_string()))?
                        + "\n"
                }
            };
            write_output(output.as_deref(), &text, &mut out)?;
        }
        Command::Receipts { run, json } => {
            let path = source::resolve(&run, &cli.storage)?;
            let loaded = source::load(&path)?;
            report_read_problems(&loaded);
            let mut lookup = source::child_lookup(source::dir_of(&path));
            let doc = transcript_export::build_document(
                &loaded.decoded(),
                &mut lookup,
                &transcript_export::ExportOptions::default(),
            );
            let receipts = transcript_export::receipts(&doc);
            if json {
                let text = serde_json::to_string_pretty(&receipts)
                    .map_err(|e| CliError::Failed(e.to_string()))?;
                let _ = writeln!(out, "{text}");
            } else {
                let _ = write!(out, "{}", receipts.render());
            }
        }
        Command::Tree { run, json } => {
            let path = source::resolve(&run, &cli.storage)?;
            let loaded = source::load(&path)?;
            report_read_problems(&loaded);
            let tree = cmd::tree::build(&loaded);
            if json {
                let text = serde_json::to_string_pretty(&tree)
                    .map_err(|e| CliError::Failed(e.to_string()))?;
                let _ = writeln!(out, "{text}");
            } else {
                let _ = write!(out, "{}", cmd::tree::render(&tree, &style));
            }
        }
        Command::Show { run } => {
            let path = source::resolve(&run, &cli.storage)?;
            let loaded = source::load(&path)?;
            report_read_problems(&loaded);
            let _ = write!(out, "{}", cmd::show::render(&loaded.decoded(), &style));
        }
        Command::Tail {
            run,
            follow,
            until_complete,
        } => {
            let path = match source::resolve(&run, &cli.storage) {
                Ok(p) => p,
                Err(e) if follow => match transcript_domain::RunId::parse(&run) {
                    Ok(id) => cli.storage.join(id.file_name()),
                    Err(_) if !run.is_empty() => PathBuf::from(&run),
                    Err(_) => return Err(e),
                },
                Err(e) => return Err(e),
            };
            let options = cmd::tail::TailOptions {
                follow,
                until_complete,
            };
            cmd::tail::run(&path, options, &style, &mut out)?;
        }
        Command::Stats { target, json } => {
            let mut stats = cmd::stats::Stats::default();
            let dir = PathBuf::from(&target);
            if dir.is_dir() {
                let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .map_err(|e| CliError::Read {
                        path: dir.clone(),
                        message: e.to_string(),
                    })?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                    .collect();
                files.sort();
                for file in files {
                    let loaded = source::load(&file)?;
                    report_read_problems(&loaded);
                    stats.add_run(&loaded.decoded());
                }
            } else {
                let path = source::resolve(&target, &cli.storage)?;
                let loaded = source::load(&path)?;
                report_read_problems(&loaded);
                stats.add_run(&loaded.decoded());
            }
            if json {
                let text = serde_json::to_string_pretty(&stats)
                    .map_err(|e| CliError::Failed(e.to_string()))?;
                let _ = writeln!(out, "{text}");
            } else {
                let _ = write!(out, "{}", stats.render());
            }
        }
    }
    Ok(())
}

/// Writes to `path` (created or truncated), or to stdout for `-` / none.
fn write_output(
    path: Option<&std::path::Path>,
    text: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match path {
        Some(p) if p.as_os_str() != "-" => std::fs::write(p, text).map_err(|e| CliError::Read {
            path: p.to_path_buf(),
            message: format!("cannot write: {e}"),
        }),
        _ => {
            let _ = out.write_all(text.as_bytes());
            Ok(())
        }
    }
}

/// Malformed lines and reader warnings go to stderr, one line each, naming
/// the file and line; the command goes on with what could be read.
fn report_read_problems(loaded: &source::Loaded) {
    for m in &loaded.malformed {
        let line = m.to_string();
        if line.starts_with(&loaded.path.display().to_string()) {
            eprintln!("warning: {line}");
        } else {
            eprintln!("warning: {}: {line}", loaded.path.display());
        }
    }
    for w in &loaded.warnings {
        eprintln!("warning: {}: {w}", loaded.path.display());
    }
}
