//! Normalizes a captured provider stream and prints the canonical events as
//! JSON lines (`{"type": "tool.call", "payload": {...}}`); diagnostics go to
//! stderr.
//!
//! ```text
//! cargo run -p transcript-providers --example normalize -- <file> [provider]
//! ```
//!
//! Without a provider name the provider is detected from the first records.
//! The file is fed in 4 KiB chunks, as an agent's stdout would arrive.

use std::io::Write;
use std::process::ExitCode;

use transcript_providers::{AutoNormalizer, Normalizer, Output, Provider};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: normalize <file> [claude|codex|gemini|copilot|openai|anthropic]");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut normalizer: Box<dyn Normalizer> = match args.next() {
        Some(name) => match Provider::from_name(&name) {
            Ok(p) => p.normalizer(),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        },
        None => Box::new(AutoNormalizer::new()),
    };
    let mut out = Vec::new();
    for chunk in bytes.chunks(4096) {
        normalizer.feed(chunk, &mut out);
    }
    normalizer.finish(&mut out);
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    for item in &out {
        match item {
            Output::Diagnostic(d) => eprintln!("{path}: {d}"),
            other => {
                let Some(payload) = other.to_payload() else {
                    continue;
                };
                let line = serde_json::json!({
                    "type": payload.event_type().as_str(),
                    "payload": payload,
                });
                if writeln!(stdout, "{line}").is_err() {
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    eprintln!("{path}: provider {}", normalizer.provider());
    ExitCode::SUCCESS
}
