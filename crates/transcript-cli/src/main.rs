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
use std::sync::Arc;

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
    /// Run a workflow, recording its transcript (live progress on stderr).
    Run {
        /// The workflow YAML file.
        workflow: PathBuf,
        /// Workflow input (`KEY=VALUE`; JSON values are parsed), repeatable.
        #[arg(long = "input", value_name = "KEY=VALUE", value_parser = cmd::run::parse_input)]
        inputs: Vec<(String, String)>,
        /// Working directory for commands and file tools (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// An external tool plugin to start (`"python3 plugin.py"`), repeatable.
        #[arg(long = "plugin", value_name = "COMMAND")]
        plugins: Vec<String>,
        /// When events reach stable storage.
        #[arg(long, value_enum, default_value_t = DurabilityArg::None)]
        durability: DurabilityArg,
        /// Sequential ids, a manual clock and sequential branches (byte-stable output).
        #[arg(long, hide = true)]
        deterministic: bool,
        /// Export spans live to this OTLP/HTTP endpoint (never slows or fails the run).
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
        /// Put message content on live spans.
        #[arg(long, requires = "otlp_endpoint")]
        capture_content: bool,
        #[command(flatten)]
        redaction: RedactionArgs,
    },
    /// Normalize raw agent logs (any supported provider format) into canonical transcripts.
    Import {
        /// The provider (claude, codex, gemini, copilot, openai, anthropic) or `auto`.
        provider: String,
        /// Raw log files, one run each.
        #[arg(required = true)]
        logs: Vec<PathBuf>,
        /// Sequential ids and a manual clock (byte-stable output).
        #[arg(long, hide = true)]
        deterministic: bool,
        #[command(flatten)]
        redaction: RedactionArgs,
    },
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
        /// OTLP/HTTP endpoint for `--format otlp` (e.g. http://127.0.0.1:4318).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// Put message content, tool arguments and results on spans (otlp formats).
        #[arg(long)]
        capture_content: bool,
        #[command(flatten)]
        redaction: RedactionArgs,
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

/// Opt-in masking (see `transcript-redact`).
#[derive(Debug, Clone, clap::Args)]
struct RedactionArgs {
    /// Mask secrets (API keys, bearer tokens, AWS keys, private keys, JWTs, password=… values).
    #[arg(long)]
    redact: bool,
    /// Also mask matches of this regular expression (a named group `secret` limits the mask), repeatable.
    #[arg(long = "redact-pattern", value_name = "REGEX")]
    redact_patterns: Vec<String>,
    /// `structure-only` keeps envelopes, names, timings and usage but drops all content.
    #[arg(long, value_enum)]
    privacy: Option<PrivacyArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PrivacyArg {
    /// Keep content (masking secrets when --redact is given).
    Full,
    /// Drop all content.
    StructureOnly,
}

impl RedactionArgs {
    fn redactor(&self) -> Result<Option<transcript_redact::Redactor>, CliError> {
        if self.privacy == Some(PrivacyArg::StructureOnly) {
            return Ok(Some(transcript_redact::Redactor::structure_only()));
        }
        if !self.redact && self.redact_patterns.is_empty() {
            return Ok(None);
        }
        let mut r = if self.redact {
            transcript_redact::Redactor::builtin()
        } else {
            transcript_redact::Redactor::empty()
        };
        for p in &self.redact_patterns {
            r = r
                .with_pattern(p)
                .map_err(|e| CliError::Usage(e.to_string()))?;
        }
        Ok(Some(r))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DurabilityArg {
    /// Kernel on acknowledgement (survives a process kill).
    None,
    /// fdatasync every second while there is unsynced data.
    Interval,
    /// fdatasync before acknowledging (survives power loss).
    Always,
}

impl DurabilityArg {
    fn policy(self) -> transcript_infra::Durability {
        match self {
            DurabilityArg::None => transcript_infra::Durability::None,
            DurabilityArg::Interval => {
                transcript_infra::Durability::Interval(std::time::Duration::from_secs(1))
            }
            DurabilityArg::Always => transcript_infra::Durability::Always,
        }
    }
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
    /// OpenTelemetry GenAI spans sent over OTLP/HTTP (needs --endpoint).
    Otlp,
    /// OpenTelemetry GenAI spans as OTLP/JSON.
    OtlpJson,
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
        Command::Run {
            workflow,
            inputs,
            workspace,
            plugins,
            durability,
            deterministic,
            otlp_endpoint,
            capture_content,
            redaction,
        } => {
            let mask = redaction
                .redactor()?
                .map(|r| Arc::new(r) as Arc<dyn transcript_domain::EventMask>);
            let args = cmd::run::RunArgs {
                workflow,
                inputs,
                storage: cli.storage.clone(),
                workspace: workspace.unwrap_or_else(cmd::run::default_workspace),
                plugins,
                mask,
                durability: durability.policy(),
                deterministic,
                otlp: otlp_endpoint.map(|url| (url, capture_content)),
                style: Style::for_stderr(cli.color),
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
            let ok = runtime.block_on(cmd::run::run(args))?;
            if !ok {
                return Err(CliError::Failed("the run failed".to_owned()));
            }
        }
        Command::Import {
            provider,
            logs,
            deterministic,
            redaction,
        } => {
            let redactor = redaction.redactor()?.map(Arc::new);
            let ctx = cmd::import::ImportContext {
                storage: cli.storage.clone(),
                provider: cmd::import::parse_provider(&provider)?,
                mask: redactor
                    .clone()
                    .map(|r| r as Arc<dyn transcript_domain::EventMask>),
                deterministic,
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
            let (done, failed) = runtime.block_on(cmd::import::import_all(&ctx, &logs));
            for i in &done {
                let _ = writeln!(out, "{}\t{}\t{}", i.run_id, i.provider, i.path.display());
                eprintln!(
                    "transcript: imported {} ({}): {} events, {} diagnostics",
                    i.input.display(),
                    i.provider,
                    i.events,
                    i.diagnostics
                );
            }
            if let Some(r) = &redactor {
                eprintln!("transcript: {} masks applied", r.masks_made());
            }
            for e in &failed {
                eprintln!("transcript: {e}");
            }
            if !failed.is_empty() {
                return Err(CliError::Failed(format!(
                    "{} of {} inputs not imported",
                    failed.len(),
                    logs.len()
                )));
            }
        }
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
            endpoint,
            capture_content,
            redaction,
        } => {
            let redactor = redaction.redactor()?;
            let run = source::open_run(&run, &cli.storage, redactor.as_ref())?;
            let options = transcript_export::ExportOptions {
                include_reasoning: !no_reasoning,
                truncate_outputs,
                redacted: redactor.is_some(),
            };
            if matches!(format, ExportFormat::Otlp | ExportFormat::OtlpJson) {
                let result = cmd::otel::export(
                    &run.events,
                    &mut run.lookup(),
                    format == ExportFormat::Otlp,
                    endpoint,
                    capture_content,
                    output.as_deref(),
                    &mut out,
                );
                report_masks(redactor.as_ref());
                return result;
            }
            let doc = run.document(&options);
            report_masks(redactor.as_ref());
            let text = match format {
                ExportFormat::Markdown => transcript_export::to_markdown(&doc),
                ExportFormat::Html => transcript_export::to_html(&doc),
                ExportFormat::Json | ExportFormat::Otlp | ExportFormat::OtlpJson => {
                    to_json(&doc)? + "\n"
                }
            };
            write_output(output.as_deref(), &text, &mut out)?;
        }
        Command::Receipts { run, json } => {
            let doc = source::open_run(&run, &cli.storage, None)?
                .document(&transcript_export::ExportOptions::default());
            let receipts = transcript_export::receipts(&doc);
            if json {
                let _ = writeln!(out, "{}", to_json(&receipts)?);
            } else {
                let _ = write!(out, "{}", receipts.render());
            }
        }
        Command::Tree { run, json } => {
            let run = source::open_run(&run, &cli.storage, None)?;
            let tree = transcript_domain::tree::build_run_tree(&run.events, &mut run.lookup());
            if json {
                let _ = writeln!(out, "{}", to_json(&tree)?);
            } else {
                let _ = write!(out, "{}", cmd::tree::render(&tree, &style));
            }
        }
        Command::Show { run } => {
            let doc = source::open_run(&run, &cli.storage, None)?
                .document(&transcript_export::ExportOptions::default());
            let _ = write!(out, "{}", cmd::show::render(&doc, &style));
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
                    // Transcripts only: `<run-id>.jsonl` (not audit.jsonl, not .torn files).
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .and_then(|n| n.strip_suffix(".jsonl"))
                            .is_some_and(|stem| transcript_domain::RunId::parse(stem).is_ok())
                    })
                    .collect();
                files.sort();
                for file in files {
                    let loaded = source::load(&file)?;
                    source::report_read_problems(&loaded);
                    stats.add_run(&loaded.decoded());
                }
            } else {
                let path = source::resolve(&target, &cli.storage)?;
                let loaded = source::load(&path)?;
                source::report_read_problems(&loaded);
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

/// Pretty JSON for `--json` outputs.
fn to_json<T: serde::Serialize>(value: &T) -> Result<String, CliError> {
    serde_json::to_string_pretty(value).map_err(|e| CliError::Failed(e.to_string()))
}

/// How many masks a redactor made (stderr).
fn report_masks(redactor: Option<&transcript_redact::Redactor>) {
    if let Some(r) = redactor {
        eprintln!("transcript: {} masks applied", r.masks_made());
    }
}
