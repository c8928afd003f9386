//! `transcript export`: one run (and its child runs) as Markdown, versioned JSON, one HTML
//! page, or OpenTelemetry spans (`otel`). The output goes to stdout, or to a file opened by
//! [`create_private`]: mode 0o600 whatever the umask or an existing file's mode, so exporting
//! never widens who may read recorded content, and a symlink, FIFO, directory or hard-linked
//! file planted at the path is refused, never followed or written through.

use std::io::Write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_providers::Pricing;
use transcript_redact::Redactor;

use crate::CliError;
use crate::exit::stdout_result;
use crate::output_file::{create_private, write_error};
use crate::source;

/// Formats of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
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

/// What `export` was asked for, besides the run.
#[derive(Debug)]
pub struct ExportArgs {
    /// The output format.
    pub format: ExportFormat,
    /// The output file (`-` or none: stdout).
    pub output: Option<PathBuf>,
    /// Keep thinking blocks.
    pub include_reasoning: bool,
    /// Replace tool outputs over this many bytes by a stub.
    pub truncate_outputs: Option<usize>,
    /// The OTLP transport flags (`--format otlp`; the environment fills in the rest).
    pub otlp: transcript_otel::OtlpFlags,
    /// Put prompts and outputs into span attributes.
    pub capture_content: bool,
    /// A LiteLLM-format price table replacing the embedded one (`--pricing FILE`).
    pub pricing: Option<PathBuf>,
}

/// Exports `run` (resolved in `storage`, masked by `redactor` when given) as `args` say.
pub fn run(
    run: &str,
    store: &crate::store::Store,
    args: &ExportArgs,
    redactor: Option<Redactor>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let run = source::open_run(run, store, redactor.as_ref())?;
    let pricing = super::receipts::pricing(args.pricing.as_deref())?;
    let result = match args.format {
        ExportFormat::Otlp | ExportFormat::OtlpJson => {
            let mut watched = PipeWatch {
                inner: out,
                broken: false,
            };
            let how = super::otel::OtlpExport {
                network: args.format == ExportFormat::Otlp,
                flags: &args.otlp,
                capture_content: args.capture_content,
                output: args.output.as_deref(),
                pricing: Arc::new(pricing.into_owned()),
            };
            let result = super::otel::export(&run.events, &mut run.lookup(), &how, &mut watched);
            // The OTLP writer wraps the I/O error in its own type: a closed stdout is still
            // the quiet 141.
            if watched.broken {
                Err(CliError::BrokenPipe)
            } else {
                result
            }
        }
        ExportFormat::Markdown | ExportFormat::Html | ExportFormat::Json => {
            let mut doc = run.document(&transcript_export::ExportOptions {
                include_reasoning: args.include_reasoning,
                truncate_outputs: args.truncate_outputs,
                redacted: redactor.is_some(),
            });
            price(&mut doc, &pricing, args.pricing.as_deref());
            let text = match args.format {
                ExportFormat::Markdown => transcript_export::to_markdown(&doc),
                ExportFormat::Html => transcript_export::to_html(&doc),
                _ => super::to_json(&doc)? + "\n",
            };
            write_output(args.output.as_deref(), &text, out)
        }
    };
    if let Some(r) = &redactor {
        crate::diag!("transcript: {} masks applied", r.masks_made());
    }
    result?;
    run.children_read()
}

/// Writes `text` to `path` (see [`create_private`]), or to stdout for `-` / none.
pub fn write_output(path: Option<&Path>, text: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let Some(path) = path.filter(|p| p.as_os_str() != "-") else {
        return stdout_result(out.write_all(text.as_bytes()));
    };
    let mut file = create_private(path)?;
    let failed = |e: std::io::Error| write_error(path, &e.to_string());
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)
}

/// A stdout that remembers whether its reader went away (EPIPE), whatever error type the
/// writer using it reports that in.
struct PipeWatch<'a> {
    inner: &'a mut dyn Write,
    broken: bool,
}

impl PipeWatch<'_> {
    fn seen<T>(&mut self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &result
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            self.broken = true;
        }
        result
    }
}

impl Write for PipeWatch<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.inner.write(buf);
        self.seen(result)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.inner.flush();
        self.seen(result)
    }
}

/// Prices `doc` with `table` (named after `file`, or the embedded table) and warns once per
/// model the table has no price for: its cost shows `—`, never $0.
fn price(doc: &mut transcript_export::ExportDocument, table: &Pricing, file: Option<&Path>) {
    let cost = |m: &str, u: &transcript_domain::Usage| table.cost(m, u).map(|c| c.usd);
    transcript_export::price_document(doc, &cost, &super::receipts::table_name(file));
    if let Some(summary) = &doc.cost {
        super::receipts::warn_unpriced(&summary.unpriced_models, file, &mut std::io::stderr());
    }
}
