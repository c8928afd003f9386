//! `transcript tail [-f]`: renders events as they are appended; keeps
//! following through a torn tail (bytes without a newline are held until the
//! line completes, or dropped when a recorder reopening the run truncates
//! them away) and through a file that does not exist yet.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use transcript_domain::{DecodedEvent, DecodedPayload, EventKind, EventType, decode_line};

use crate::CliError;
use crate::cmd::show::short;
use crate::style::Style;

/// How often a follower looks for new bytes.
const POLL: Duration = Duration::from_millis(100);

/// Options of `tail`.
#[derive(Debug, Clone, Copy)]
pub struct TailOptions {
    /// Keep following after the current end.
    pub follow: bool,
    /// Stop after `run.completed` (useful in scripts).
    pub until_complete: bool,
}

/// One line of tail output for an event.
pub fn summary(event: &DecodedEvent, style: &Style) -> String {
    let time = event.timestamp.to_string();
    let clock = time.get(11..23).unwrap_or(&time);
    let detail = match (&event.kind, &event.payload) {
        (
            EventKind::Known(
                EventType::StepCompleted
                | EventType::CallWorkflowCompleted
                | EventType::RunCompleted,
            ),
            DecodedPayload::Step(s),
        ) => match &s.error {
            // Run-level lines have no path: name the workflow.
            Some(err) if event.path.is_empty() => style.red(&format!("{} failed: {err}", s.name)),
            Some(err) => style.red(&format!("failed: {err}")),
            None if event.path.is_empty() => style.green(&format!("{} ok", s.name)),
            None => style.green("ok"),
        },
        // The name only when the path does not already end with it.
        (_, DecodedPayload::Step(s)) if event.path.rsplit('.').next() == Some(s.name.as_str()) => {
            format!("[{}]", s.kind)
        }
        (_, DecodedPayload::Step(s)) => format!("{} [{}]", s.name, s.kind),
        (_, DecodedPayload::Message(m)) => {
            let text = m
                .known_blocks()
                .find_map(|b| b.as_text().map(str::to_owned))
                .unwrap_or_default();
            let mut text: String = crate::style::clean(&text.replace('\n', " "))
                .chars()
                .take(80)
                .collect();
            if m.blocks.len() > 1 {
                text.push_str(&format!(" (+{} blocks)", m.blocks.len() - 1));
            }
            text
        }
        (EventKind::Known(EventType::ToolCall), DecodedPayload::Tool(t)) => {
            format!(
                "{} {} {}",
                t.name,
                style.dim(&t.call_id),
                style.dim(&short(&t.input))
            )
        }
        (_, DecodedPayload::Tool(t)) => match &t.error {
            Some(err) => style.red(&format!("{} {} error: {err}", t.name, t.call_id)),
            None => format!(
                "{} {} → {}",
                t.name,
                style.dim(&t.call_id),
                style.dim(&short(&t.output))
            ),
        },
        _ => String::new(),
    };
    let child = event
        .child_run_id
        .map(|c| format!(" child={c}"))
        .unwrap_or_default();
    format!(
        "{:>5} {} {:<28} {}{} {}",
        event.seq,
        style.dim(clock),
        event.kind.as_str(),
        event.path,
        child,
        detail
    )
}

/// Runs `tail`. Returns when the file is exhausted (no `-f`), when
/// `run.completed` was shown (`--until-complete`), or on an I/O error.
pub fn run(
    path: &Path,
    options: TailOptions,
    style: &Style,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let io_err = |e: std::io::Error| CliError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut file = loop {
        match File::open(path) {
            Ok(f) => break f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && options.follow => {
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(io_err(e)),
        }
    };
    let mut offset: u64 = 0;
    let mut line_no: u64 = 0;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            if !options.follow {
                if !pending.is_empty() {
                    eprintln!(
                        "{}: line {}: warning: unterminated final line ({} bytes)",
                        path.display(),
                        line_no + 1,
                        pending.len()
                    );
                }
                return Ok(());
            }
            std::thread::sleep(POLL);
            // A recorder reopening the run truncates a torn tail away: start
            // the partial line over from the new end.
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(offset);
            if len < offset {
                pending.clear();
                offset = file.seek(SeekFrom::Start(len)).map_err(io_err)?;
            }
            continue;
        }
        offset += n as u64;
        pending.extend_from_slice(&chunk[..n]);
        while let Some(pos) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            line_no += 1;
            let body = &line[..line.len() - 1];
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match decode_line(body) {
                Ok(decoded) => {
                    let _ = writeln!(out, "{}", summary(&decoded.event, style));
                    let _ = out.flush();
                    if options.until_complete
                        && decoded.event.kind == EventKind::Known(EventType::RunCompleted)
                    {
                        return Ok(());
                    }
                }
                Err(e) => eprintln!("{}: line {line_no}: malformed: {e}", path.display()),
            }
        }
    }
}
