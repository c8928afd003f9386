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
