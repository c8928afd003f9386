//! Converts a stored transcript (and its child runs, found next to it as
//! `<child-run-id>.jsonl`) to OTLP/JSON on stdout.
//!
//! ```text
//! cargo run -p transcript-otel --example export_otlp_json -- storage/<run-id>.jsonl [--capture-content]
//! ```
//!
//! The output is one `ExportTraceServiceRequest` per line, as the
//! OpenTelemetry Collector's `otlpjsonfile` receiver reads it. Mapping
//! problems (a missing child run, a completion without a start) go to
//! stderr; the spans are written regardless.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use transcript_domain::{DecodedEvent, RunId, decode_line};
use transcript_otel::{DEFAULT_SERVICE_NAME, MapOptions, map_run, write_otlp_json};

/// Reads every event of a transcript file. A final line without its newline
/// was never acknowledged (decision 13): it is skipped with a warning.
fn read_events(path: &Path) -> Result<Vec<DecodedEvent>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let complete = bytes.last() == Some(&b'\n');
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let mut events = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        match decode_line(line) {
            Ok(decoded) => events.push(decoded.event),
            Err(e) if !complete && index == lines.len() - 1 => {
                eprintln!(
                    "warning: {}:{}: unterminated final line skipped ({e})",
                    path.display(),
                    index + 1
                );
            }
            Err(e) => return Err(format!("{}:{}: {e}", path.display(), index + 1)),
        }
    }
    Ok(events)
}

fn main() -> ExitCode {
    let mut path: Option<PathBuf> = None;
    let mut options = MapOptions::default();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--capture-content" => options.capture_content = true,
            _ if path.is_none() => path = Some(PathBuf::from(arg)),
            _ => {
                eprintln!("usage: export_otlp_json <transcript.jsonl> [--capture-content]");
                return ExitCode::from(2);
            }
        }
    }
    let Some(path) = path else {
        eprintln!("usage: export_otlp_json <transcript.jsonl> [--capture-content]");
        return ExitCode::from(2);
    };
    let events = match read_events(&path) {
        Ok(events) => events,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut lookup = |child: RunId| match read_events(&dir.join(child.file_name())) {
        Ok(events) => Some(events),
        Err(e) => {
            eprintln!("warning: child run {child}: {e}");
            None
        }
    };
    let trace = map_run(&events, &mut lookup, options);
    for problem in &trace.problems {
        eprintln!("warning: {problem}");
    }
    let spans = trace.spans.len();
    if let Err(e) = write_otlp_json(trace.spans, DEFAULT_SERVICE_NAME, std::io::stdout().lock()) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!("{spans} spans, trace {}", trace.trace_id);
    ExitCode::SUCCESS
}
