//! The `transcript` command: run workflows and audit, replay and inspect
//! their canonical transcripts.
//!
//! Data goes to stdout, diagnostics to stderr; every recorded value printed for a person has
//! its control characters escaped (`style::clean`). Exit codes are documented in `exit` and in
//! `--help`: 0 success, 1 failed run or check, 2 usage, 3 not found or invalid input, 4 storage
//! failure, 128+N interrupted by signal N, 141 stdout closed.
#![forbid(unsafe_code)]

mod cmd;
mod demo;
mod exit;
use transcript_import::index as import_index;
mod mcp_gateway;
mod nats_connect;
mod nats_storage;
mod output_file;
mod redaction_args;
mod runs;
mod source;
mod store;
mod style;

use redaction_args::RedactionArgs;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

pub use crate::exit::CliError;
use crate::exit::EXIT_CODES_HELP;
use crate::source::DEFAULT_STORAGE;
use crate::style::{ColorChoice, Style};

/// Canonical agent exchange transcripts: run, validate, inspect, tail.
#[derive(Debug, Parser)]
#[command(name = "transcript", version, about, long_about = None, after_help = EXIT_CODES_HELP)]
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

/// OTLP transport flags shared by `run` and `export` (the endpoint flag is each command's).
/// Header values are secrets: they are never echoed (prefer OTEL_EXPORTER_OTLP_HEADERS, which
/// does not show in the process list).
#[derive(Debug, clap::Args)]
struct OtlpArgs {
    /// An OTLP request header (`Authorization=Basic …`, `x-honeycomb-team=…`), repeatable;
    /// replaces the header of that name from OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(long = "otlp-header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
    /// PEM file of CA certificates to trust besides the system's (a private CA); default
    /// OTEL_EXPORTER_OTLP_CERTIFICATE.
    #[arg(long = "otlp-certificate", value_name = "PEM")]
    certificate: Option<PathBuf>,
    /// OTLP transport: grpc (port 4317), http/protobuf or http/json (port 4318); default
    /// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
    #[arg(long = "otlp-protocol", value_name = "PROTOCOL", value_parser = parse_otlp_protocol)]
    protocol: Option<transcript_otel::config::Protocol>,
}

/// `--otlp-protocol`'s value.
fn parse_otlp_protocol(value: &str) -> Result<transcript_otel::config::Protocol, String> {
    transcript_otel::config::Protocol::parse(value, "--otlp-protocol").map_err(|e| e.to_string())
}

impl OtlpArgs {
    fn flags(self, endpoint: Option<String>) -> transcript_otel::OtlpFlags {
        transcript_otel::OtlpFlags {
            endpoint,
            headers: self.headers,
            certificate: self.certificate,
            timeout: None,
            protocol: self.protocol,
        }
    }
}

// `transcript run`'s arguments (no doc comment: the variant's is the command's help).
#[derive(Debug, clap::Args)]
struct RunCmd {
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
    /// Export spans live to this OTLP/HTTP(S) endpoint (never slows or fails the run);
    /// without it, OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT enables live export.
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
    #[command(flatten)]
    otlp: OtlpArgs,
    /// Put message content on live spans.
    #[arg(long)]
    capture_content: bool,
    /// At the end of the run, wait at most this many seconds for the live export to
    /// deliver what is queued (what is not sent by then is reported, never waited for).
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    otlp_flush_timeout: u64,
    /// On cancellation, the seconds a command (and its process group) gets between
    /// SIGTERM and SIGKILL (a second Ctrl-C kills at once).
    #[arg(long, value_name = "SECS", default_value_t = 2.0, value_parser = parse_secs)]
    kill_grace: f64,
    /// `off`: run every process without the kernel's confinement (Landlock), warned once and
    /// written in each step.started.
    #[arg(long, value_name = "on|off", default_value_t = transcript_exec::sandbox::SandboxMode::Confined)]
    sandbox: transcript_exec::sandbox::SandboxMode,
    /// `all`: every process uses the host's network, whatever its step's `network:` says
    /// (warned once, written in each step.started); `declared` (default): each step reaches
    /// only what it declares.
    #[arg(long, value_name = "declared|all", default_value_t = transcript_exec::sandbox::net::RunNetwork::Declared)]
    network: transcript_exec::sandbox::net::RunNetwork,
    #[command(flatten)]
    redaction: RedactionArgs,
}

// `transcript import`'s arguments (no doc comment: the variant's is the command's help).
#[derive(Debug, Clone, clap::Args)]
struct ImportCmd {
    /// The provider (claude, codex, gemini, copilot, openai, anthropic) or `auto`.
    provider: String,
    /// Raw log files, one run each; a directory is read as a session store
    /// (incremental, like --store).
    #[arg(required_unless_present = "store")]
    logs: Vec<PathBuf>,
    /// Import the provider's own session store: Claude Code $CLAUDE_CONFIG_DIR/projects
    /// (else ~/.claude/projects), Codex $CODEX_HOME/sessions (else ~/.codex/sessions),
    /// Gemini CLI $GEMINI_CLI_HOME/.gemini/tmp (else ~/.gemini/tmp), Copilot CLI
    /// $COPILOT_HOME/session-state (else ~/.copilot/session-state). Incremental: an unchanged
    /// file is not read again, a grown one appends only what is new to its run. Imported
    /// session runs stay open (`list` says so): a session may always grow.
    #[arg(long)]
    store: bool,
    /// With a store or directories: only session files modified on or after this day
    /// (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "YYYY-MM-DD")]
    since: Option<String>,
    /// Sequential ids and a manual clock (byte-stable output).
    #[arg(long, hide = true)]
    deterministic: bool,
    #[command(flatten)]
    redaction: RedactionArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a workflow, recording its transcript (live progress on stderr).
    #[command(
        after_help = "Examples:\n  transcript run fixtures/workflows/demo.yaml --workspace storage/demo\n  transcript run review.yaml --input file=main.go --redact --durability always\n\nThe run id and transcript path are printed on stderr when the run starts (follow it with\n`transcript tail -f <id>`) and on stdout when it ends."
    )]
    Run(RunCmd),
    /// Run a recorded run's workflow again with its transcript as the model, and compare.
    #[command(
        after_help = "Examples:\n  transcript replay latest\n  transcript replay 1259fec0 --workflow review-v2.yaml --match fifo\n\nEach agent step's CLI talks to a model server on 127.0.0.1 that answers with the step's\nrecorded turns; its tools, commands and files are real. Exit 0 when the replay equals the\nrecording, 1 when it differs (each difference printed), 4 on an error."
    )]
    Replay(cmd::replay::ReplayCmd),
    /// Normalize raw agent logs (any supported provider format) into canonical transcripts.
    #[command(
        after_help = "Examples:\n  transcript import auto session.jsonl\n  claude -p hi --output-format stream-json --verbose > out.jsonl && transcript import claude out.jsonl"
    )]
    Import(ImportCmd),
    /// Check transcripts: seq from 1 without gaps, one run per file, child links, malformed lines.
    #[command(
        after_help = "Examples:\n  transcript validate latest\n  transcript validate storage/transcripts --json   # every transcript of a directory"
    )]
    Validate {
        /// Transcript files, directories of transcripts, run ids (or unique prefixes) or `latest`.
        #[arg(required = true)]
        runs: Vec<String>,
        /// Print a machine-readable report.
        #[arg(long)]
        json: bool,
    },
    /// Export a run (and its child runs) as Markdown, versioned JSON or a self-contained HTML page.
    #[command(
        after_help = "Examples:\n  transcript export latest --format markdown -o run.md\n  transcript export 1259fec0 --format json --redact --no-reasoning\n  transcript export latest --format otlp --endpoint http://127.0.0.1:4318"
    )]
    Export {
        /// A transcript file or a run id.
        run: String,
        /// Output format.
        #[arg(long, value_enum)]
        format: cmd::export::ExportFormat,
        /// Output file; `-` or absent for stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Drop thinking blocks.
        #[arg(long)]
        no_reasoning: bool,
        /// Shorten tool inputs and outputs larger than this many bytes.
        #[arg(long, value_name = "BYTES")]
        truncate_outputs: Option<usize>,
        /// OTLP/HTTP(S) endpoint for `--format otlp` (e.g. http://127.0.0.1:4318); default
        /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT.
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        #[command(flatten)]
        otlp: OtlpArgs,
        /// Put message content, tool arguments and results on spans (otlp formats).
        #[arg(long)]
        capture_content: bool,
        /// A LiteLLM-format model price table replacing the embedded one (cost per step, run
        /// and model in every format).
        #[arg(long, value_name = "FILE")]
        pricing: Option<PathBuf>,
        #[command(flatten)]
        redaction: RedactionArgs,
    },
    /// Per agent step: provider, model, timing, status, tokens and cost, with run, model and
    /// total sums.
    #[command(
        after_help = "Examples:\n  transcript receipts latest\n  transcript receipts 1259fec0 --json | jq .total\n  transcript receipts latest --pricing model_prices_and_context_window.json\n  transcript import claude --store && transcript receipts --by day\n\n`cost` is priced from LiteLLM's model price table (embedded, pinned; --pricing FILE\nreplaces it); `reported` is what the agent CLI reported itself (total_cost_usd). They may\ndiffer: the CLI prices with its own table, bills 1-hour cache writes at their own rate and\ncounts helper-model calls that are not messages. A model without a price shows — and a\nwarning, never $0."
    )]
    Receipts {
        /// A transcript file or a run id (with --by: all runs of the storage when absent).
        #[arg(required_unless_present = "by")]
        run: Option<String>,
        /// Group the billed turns of every run (imported session stores included) by day,
        /// month, session, project or model.
        #[arg(long, value_enum)]
        by: Option<cmd::receipts::GroupBy>,
        /// Print the receipts as JSON.
        #[arg(long)]
        json: bool,
        /// A price table in LiteLLM's format (model_prices_and_context_window.json) instead of
        /// the embedded one.
        #[arg(long, value_name = "FILE")]
        pricing: Option<PathBuf>,
    },
    /// Print the step tree of a run and its child runs, rebuilt from the files.
    #[command(
        after_help = "Examples:\n  transcript tree latest\n  transcript tree 1259fec0 --json"
    )]
    Tree {
        /// A transcript file or a run id.
        run: String,
        /// Print the tree as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the conversation: prompts, answers, thinking, tool calls with results.
    #[command(
        after_help = "Examples:\n  transcript show latest\n  transcript show 1259fec0 | less -R"
    )]
    Show {
        /// A transcript file or a run id.
        run: String,
    },
    /// Render events as they are appended.
    #[command(
        after_help = "Examples:\n  transcript tail -f latest            # exits with the run: 0 ok, 1 failed, 5 cancelled\n  transcript tail -f 1259fec0-...      # a run that has not started yet\n  transcript tail -f latest --forever  # keep following after the run completed",
        arg(clap::Arg::new("until-complete").long("until-complete").hide(true).action(clap::ArgAction::SetTrue))
    )]
    Tail {
        /// A transcript file or a run id (may not exist yet with -f).
        run: String,
        /// Keep following the file.
        #[arg(short, long)]
        follow: bool,
        /// Keep following after the run completed (default: exit with the run's status).
        #[arg(long = "forever", action = clap::ArgAction::SetFalse)]
        until_complete: bool,
    },
    /// Counts per event and block type, tool calls, step durations, token usage.
    #[command(
        after_help = "Examples:\n  transcript stats latest\n  transcript stats storage/transcripts --json"
    )]
    Stats {
        /// A transcript file, a run id, or a directory of transcripts.
        target: String,
        /// Print the statistics as JSON.
        #[arg(long)]
        json: bool,
        /// A price table in LiteLLM's format instead of the embedded one (`cost`; `reported`
        /// is what the agent CLI reported itself).
        #[arg(long, value_name = "FILE")]
        pricing: Option<PathBuf>,
    },
    /// Recent runs: id, workflow, status, start, duration, events (newest first).
    #[command(
        after_help = "Examples:\n  transcript list\n  transcript list --all --json | jq '.[] | select(.status == \"failed\")'"
    )]
    List(cmd::list::ListOptions),
    /// What changed between two runs: their step trees aligned by path and iteration (child
    /// runs included), per step status, exit code, output, agent turns, tool calls, tokens
    /// and cost. Exit 0 equal, 1 different.
    #[command(
        after_help = "Examples:\n  transcript diff 1259fec0 latest\n  transcript diff a.jsonl b.jsonl --json | jq '.summary'\n  transcript diff before after --html diff.html\n\nIgnored: timestamps, durations, seqs; run ids and call ids too unless --strict-ids.\nThe JSON is a versioned document (schema/diff-document.schema.json)."
    )]
    Diff(cmd::diff::DiffArgs),
    /// Hold a run to YAML expectations (status, cost, tokens, tools and their order and arguments,
    /// outputs, turns, a model's verdict). Exit 0 all hold, 1 any fails, 2 bad file, 4 judge erred.
    #[command(
        after_help = "Examples:\n  transcript check latest --expect ci/expect.yaml\n  transcript check run.jsonl --expect expect.yaml --junit junit.xml\n\nExpectations (every key optional; an unknown key is an error):\n  run: {status: succeeded, max_cost_usd: 0.5, max_tokens: 200000, max_duration_ms: 600000}\n  steps:\n    agent:                       # a step path; path#N one iteration; call/inner a child run's step\n      status: succeeded\n      tools_used: [Bash]\n      tools_not_used: [WebFetch]\n      tool_sequence: [Read, Edit, Bash]\n      tool_args: {Bash: {command: {matches: \"cargo test\"}}}   # or equals: / subset:\n      tool_failed: false\n      output: {contains: done}   # or matches: / equals:\n      max_turns: 30\n      max_cost_usd: 0.25\n      judge: {rubric: \"It ran the tests first.\"}   # a model grades it (also on run:)\n  judge: {model: gpt-4o-mini, base_url: URL, api_key_env: OPENAI_API_KEY, max_context_tokens: 128000, max_chunks: 8}\n\nA judge is an OpenAI-compatible Chat Completions endpoint (base_url, else OPENAI_BASE_URL); its key is read\nfrom the variable api_key_env names. A judge that cannot grade (HTTP error, no verdict, too large) is ERR, exit 4."
    )]
    Check(cmd::check::CheckArgs),
    /// Copy a NATS JetStream store into the file layout (a durable consumer; resumable and
    /// idempotent: killed and restarted, it writes the same files).
    #[command(
        after_help = "Examples:\n  transcript mirror nats://127.0.0.1:4222 --to storage/transcripts\n  transcript mirror nats://a:4222,b:4222/TRANSCRIPTS --to /backup/runs --follow\n\nCredentials come from NATS_CREDS, NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CA, NATS_CERT/NATS_KEY."
    )]
    Mirror(cmd::mirror::MirrorCmd),
    /// A live, read-only viewer of the whole store in a browser: runs, a run, diff, search,
    /// receipts, JSON and Server-Sent Events (loopback; another address needs a token).
    #[command(
        after_help = "Examples:\n  transcript serve\n  transcript serve --storage nats://127.0.0.1:4222 --addr 127.0.0.1:8080\n  transcript serve --addr 0.0.0.0:7700 --token \"$(cat token)\""
    )]
    Serve(cmd::serve::ServeArgs),
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

/// A duration in seconds: finite, not negative, at most a day.
fn parse_secs(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (0.0..=86_400.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "expected seconds between 0 and 86400, got {text:?}"
        )),
    }
}

/// The arguments, with `mirror`'s help listing only the options it reads: the global
/// `--storage` and `--color` mean nothing to it (its source is the URL, its output plain
/// counts). Hidden arguments of the same ids, declared on it first, keep clap from
/// propagating the global ones there (still accepted, and ignored).
fn parse_cli() -> Cli {
    use clap::{Arg, CommandFactory, FromArgMatches};
    // Typed as the global ones: clap hands a subcommand's value of a global id up to it.
    let command = Cli::command().mut_subcommand("mirror", |m| {
        m.arg(
            Arg::new("storage")
                .long("storage")
                .hide(true)
                .value_parser(clap::value_parser!(PathBuf)),
        )
        .arg(
            Arg::new("color")
                .long("color")
                .hide(true)
                .value_parser(clap::builder::EnumValueParser::<ColorChoice>::new()),
        )
    });
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    // First, single-threaded: this binary is the network namespace helper its bounded steps
    // start through (`transcript __netns PROGRAM ARGS…`, #57).
    transcript_exec::sandbox::net::serve_as_helper();
    let cli = parse_cli();
    // Every descendant is the run's (#39): an orphan of a step comes back to the runner
    // (child subreaper) rather than to init, and nothing the runner started outlives it.
    // Without the attribute (an old kernel) steps still end their own scopes.
    let _ = transcript_exec::reaper::become_subreaper();
    let code = match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.is_silent() {
                diag!("transcript: {}", style::clean(&e.to_string()));
            }
            ExitCode::from(e.exit_code())
        }
    };
    transcript_exec::reaper::end_all_descendants();
    code
}

fn run(cli: Cli) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let style = Style::for_stdout(cli.color);
    // NATS storage (#44): `run` and `replay` record there, `receipts --by` ran there, every
    // view reads through the read port (`store`).
    let mut command = cli.command;
    let (storage, nats) = match nats_storage::route(&cli.storage, &mut command, &mut out)? {
        nats_storage::Route::Done => return Ok(()),
        nats_storage::Route::Directory => (cli.storage.clone(), None),
        nats_storage::Route::Record(url) => (PathBuf::from(DEFAULT_STORAGE), Some(url)),
        nats_storage::Route::Replay(url) => (cli.storage.clone(), Some(url)),
    };
    let store = || store::open(&storage);
    match command {
        Command::Run(args) => run_workflow(args, (storage, nats), cli.color, &mut out),
        Command::Replay(args) => cmd::replay::command(args, (storage, nats), cli.color, &mut out),
        Command::Import(args) => cmd::import::command(args, storage, &mut out, &mut || Ok(())),
        Command::Validate { runs, json } => {
            cmd::validate::run(&runs, &store()?, json, &style, &mut out)
        }
        Command::Export {
            run,
            format,
            output,
            no_reasoning,
            truncate_outputs,
            endpoint,
            otlp,
            capture_content,
            pricing,
            redaction,
        } => {
            let args = cmd::export::ExportArgs {
                format,
                output,
                include_reasoning: !no_reasoning,
                truncate_outputs,
                otlp: otlp.flags(endpoint),
                capture_content,
                pricing,
            };
            cmd::export::run(&run, &store()?, &args, redaction.redactor()?, &mut out)
        }
        Command::Receipts {
            run,
            by,
            json,
            pricing,
        } => receipts(run, by, json, pricing, &storage, &mut out),
        Command::Tree { run, json } => cmd::tree::run(&run, &store()?, json, &style, &mut out),
        Command::Show { run } => cmd::show::run(&run, &store()?, &style, &mut out),
        Command::Tail {
            run,
            follow,
            until_complete,
        } => {
            let options = cmd::tail::TailOptions {
                follow,
                until_complete,
            };
            let store = store::for_tail(&storage, &run, follow)?;
            cmd::tail::run_arg(&run, &store, options, &style, &mut out)
        }
        Command::Stats {
            target,
            json,
            pricing,
        } => cmd::stats::run(&target, &store()?, json, pricing.as_deref(), &mut out),
        Command::Diff(args) => cmd::diff::run(&args, &store()?, &style, &mut out),
        Command::Check(args) => cmd::check::run(&args, &store()?, &style, &mut out),
        Command::Mirror(args) => cmd::mirror::run(&args, &mut out),
        Command::List(options) => cmd::list::run(&store()?, options, &style, &mut out),
        Command::Serve(args) => cmd::serve::run(args, store()?, &mut out),
    }
}

/// `transcript run`: checks the OTLP and redaction flags, then runs the workflow on a
/// multi-threaded runtime.
fn run_workflow(
    cmd: RunCmd,
    (storage, nats): (PathBuf, Option<transcript_nats::StorageUrl>),
    color: ColorChoice,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let RunCmd {
        workflow,
        inputs,
        workspace,
        plugins,
        durability,
        deterministic,
        otlp_endpoint,
        otlp,
        capture_content,
        otlp_flush_timeout,
        kill_grace,
        sandbox,
        network,
        redaction,
    } = cmd;
    let otlp = cmd::otel::resolve(otlp.flags(otlp_endpoint))?;
    if capture_content && otlp.is_none() {
        return Err(CliError::Usage(
            "--capture-content needs an OTLP endpoint (--otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)"
                .to_owned(),
        ));
    }
    let redactor = redaction.redactor()?.map(Arc::new);
    let mask = redactor
        .clone()
        .map(|r| r as Arc<dyn transcript_domain::EventMask>);
    let mut args = cmd::run::RunArgs {
        redactor,
        workflow,
        inputs,
        storage,
        nats: None,
        workspace: workspace.unwrap_or_else(cmd::run::default_workspace),
        plugins,
        mask,
        durability: durability.policy(),
        deterministic,
        otlp: otlp.map(|config| (config, capture_content)),
        otlp_flush_timeout: std::time::Duration::from_secs(otlp_flush_timeout),
        style: Style::for_stderr(color),
        kill_grace: std::time::Duration::from_secs_f64(kill_grace),
        wire: None,
        sandbox: (sandbox, network),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        // Before anything runs: NATS down is an error naming the URL (exit 4).
        if let Some(url) = &nats {
            args.nats = Some(nats_connect::connect_for_run(url, args.durability).await?);
        }
        cmd::run::run(args, out).await
    })
}

/// `transcript receipts`: one run's, or grouped with `--by`.
fn receipts(
    run: Option<String>,
    by: Option<cmd::receipts::GroupBy>,
    json: bool,
    pricing: Option<PathBuf>,
    storage: &Path,
    out: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    match (by, run) {
        (Some(by), run) => cmd::receipts::run_grouped(
            run.as_deref(),
            (storage, &store::open(storage)?),
            by,
            json,
            pricing.as_deref(),
            out,
            &mut std::io::stderr(),
        ),
        (None, Some(run)) => cmd::receipts::run(
            &run,
            &store::open(storage)?,
            json,
            pricing.as_deref(),
            out,
            &mut std::io::stderr(),
        ),
        (None, None) => Err(CliError::Usage(
            "receipts: name a run, or group with --by".to_owned(),
        )),
    }
}
