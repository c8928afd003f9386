//! `transcript tail [-f]`: renders events as they are appended; keeps
//! following through a torn tail (bytes without a newline are held until the
//! line completes, or dropped when a recorder reopening the run truncates
//! them away) and through a file that does not exist yet.
//!
//! `tail -f` ends with the run (#42): after the root run's `run.completed`, once every child
//! run it named (`child_run_id`) whose file is beside it has completed too, it exits with the
//! run's status, like `gh run watch --exit-status`: 0 succeeded, 1 failed,
//! [`EXIT_CANCELLED`] cancelled. `--forever` keeps following past the end.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use transcript_domain::tree::Status;
use transcript_domain::{DecodedEvent, DecodedPayload, EventKind, EventType, RunId, decode_line};

use crate::CliError;
use crate::cmd::show::short;
use crate::exit::stdout_result;
use crate::style::{Style, one_line};

/// How often a follower looks for new bytes.
const POLL: Duration = Duration::from_millis(100);

/// Options of `tail`.
#[derive(Debug, Clone, Copy)]
pub struct TailOptions {
    /// Keep following after the current end.
    pub follow: bool,
    /// Stop after `run.completed` (the default; `--forever` clears it). With `follow`, the
    /// exit status is then the run's.
    pub until_complete: bool,
}

/// The exit code of `tail -f` when the run it followed was cancelled.
pub const EXIT_CANCELLED: u8 = 5;

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
            Some(err) if event.path.is_empty() => {
                style.red(&one_line(&format!("{} failed: {err}", s.name)))
            }
            Some(err) => style.red(&one_line(&format!("failed: {err}"))),
            None if event.path.is_empty() => style.green(&one_line(&format!("{} ok", s.name))),
            None => style.green("ok"),
        },
        // The name only when the path does not already end with it.
        (_, DecodedPayload::Step(s)) if event.path.rsplit('.').next() == Some(s.name.as_str()) => {
            format!("[{}]", one_line(&s.kind))
        }
        (_, DecodedPayload::Step(s)) => format!("{} [{}]", one_line(&s.name), one_line(&s.kind)),
        (_, DecodedPayload::Message(m)) => {
            let text = m
                .known_blocks()
                .find_map(|b| b.as_text().map(str::to_owned))
                .unwrap_or_default();
            let mut text: String = one_line(&text.replace('\n', " "))
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
                one_line(&t.name),
                style.dim(&one_line(&t.call_id)),
                style.dim(&one_line(&short(&t.input)))
            )
        }
        (_, DecodedPayload::Tool(t)) => match &t.error {
            Some(err) => style.red(&one_line(&format!("{} {} error: {err}", t.name, t.call_id))),
            None => format!(
                "{} {} → {}",
                one_line(&t.name),
                style.dim(&one_line(&t.call_id)),
                style.dim(&one_line(&short(&t.output)))
            ),
        },
        _ => String::new(),
    };
    let child = event
        .child_run_id
        .map(|c| format!(" child={c}"))
        .unwrap_or_default();
    let iteration = if event.iteration > 0 {
        format!(" #{}", event.iteration)
    } else {
        String::new()
    };
    format!(
        "{:>5} {} {:<28} {}{}{} {}",
        event.seq,
        style.dim(clock),
        one_line(event.kind.as_str()),
        one_line(&event.path),
        iteration,
        child,
        detail
    )
}

/// Resolves `tail`'s argument (a file, run id, prefix or `latest`; with `-f` a run id or path
/// that does not exist yet is waited for, saying so) and runs it.
pub fn run_arg(
    arg: &str,
    storage: &Path,
    options: TailOptions,
    style: &Style,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = match crate::source::resolve(arg, storage) {
        Ok(p) => p,
        Err(e) if options.follow => match transcript_domain::RunId::parse(arg) {
            Ok(id) => storage.join(id.file_name()),
            Err(_) if arg.ends_with(".jsonl") => std::path::PathBuf::from(arg),
            Err(_) => return Err(e),
        },
        Err(e) => return Err(e),
    };
    if path.is_dir() {
        // One run has one end and one status to exit with; `list` shows a directory's runs.
        return Err(CliError::Read {
            path,
            message: "a directory: tail follows one run (a transcript file, a run id or \
                      prefix, or `latest`)"
                .to_owned(),
        });
    }
    if options.follow && !path.exists() {
        crate::diag!(
            "transcript: waiting for {} to appear (Ctrl-C to stop)…",
            path.display()
        );
    }
    run(&path, options, style, out)
}

/// Runs `tail`. Returns when the file is exhausted (no `-f`), when
/// `run.completed` was shown (unless `--forever`), or on an I/O error. Following a run to its
/// end, the result is the run's status: a failed run is `Reported(1)`, a cancelled one
/// `Reported(EXIT_CANCELLED)`.
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
    let mut file = open_when_it_appears(path, options.follow)?;
    let mut offset: u64 = 0;
    let mut lines = Lines::default();
    let mut chunk = vec![0u8; 64 * 1024];
    // Set once no runner held the run: the file is read to its end once more, and a run
    // still without run.completed then was abandoned.
    let mut unheld = false;
    loop {
        let n = file.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            if !options.follow {
                let torn = lines.skipping.unwrap_or(lines.pending.len() as u64);
                if torn > 0 {
                    crate::diag!(
                        "{}: line {}: warning: unterminated final line ({torn} bytes)",
                        path.display(),
                        lines.line_no + 1,
                    );
                }
                if options.until_complete && lines.events > 0 {
                    // No run.completed: say whether a runner is still at it.
                    crate::diag!(
                        "transcript: {}: no run.completed yet: {}",
                        path.display(),
                        crate::runs::liveness(path).as_str()
                    );
                }
                return Ok(());
            }
            if stdout_closed() {
                return Err(CliError::BrokenPipe);
            }
            if options.until_complete && lines.events > 0 {
                if unheld {
                    return Err(abandoned(path));
                }
                // The runner writes run.completed before it releases the run: what it wrote
                // is read to the end once more before the run is called abandoned.
                if crate::runs::liveness(path) == crate::runs::RunStatus::Abandoned {
                    unheld = true;
                    continue;
                }
            }
            std::thread::sleep(POLL);
            // A recorder reopening the run truncates a torn tail away: start
            // the partial line over from the new end.
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(offset);
            if len < offset {
                lines.pending.clear();
                lines.skipping = None;
                offset = file.seek(SeekFrom::Start(len)).map_err(io_err)?;
            }
            continue;
        }
        offset += n as u64;
        if let Some(status) = lines.feed(&chunk[..n], path, options, style, out)? {
            if !options.follow {
                return Ok(());
            }
            wait_for_children(path, &lines.children)?;
            return match status {
                Status::Succeeded | Status::Incomplete => Ok(()),
                Status::Failed => Err(CliError::Reported(1)),
                Status::Cancelled => Err(CliError::Reported(EXIT_CANCELLED)),
            };
        }
    }
}

/// `tail -f` on a run no runner holds any more, without `run.completed` (exit 4).
pub fn abandoned(path: &Path) -> CliError {
    CliError::Storage(format!(
        "{}: the run was abandoned: it has no run.completed and no runner holds it any more \
         (its runner died or was killed); what it recorded is shown above",
        path.display()
    ))
}

/// Waits until each child run in `children` whose file lies beside `path` has its
/// `run.completed` (a child file that is not there is not waited for); a child run abandoned
/// on the way ends the wait (exit 4).
fn wait_for_children(path: &Path, children: &[RunId]) -> Result<(), CliError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    for id in children {
        let child = dir.join(id.file_name());
        if !child.exists() {
            // A copied root without its children, or children stored elsewhere: nothing here
            // will ever complete them (quietly: `tree` names missing children).
            continue;
        }
        if !completed(&child) {
            crate::diag!("transcript: waiting for child run {id} to complete…");
        }
        while !completed(&child) {
            if stdout_closed() {
                return Err(CliError::BrokenPipe);
            }
            // Looked at in this order: the runner completes a run before it releases it.
            if crate::runs::liveness(&child) == crate::runs::RunStatus::Abandoned
                && !completed(&child)
            {
                return Err(abandoned(&child));
            }
            std::thread::sleep(POLL);
        }
    }
    Ok(())
}

/// Whether the transcript at `path` holds its `run.completed`.
fn completed(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    bytes.split(|b| *b == b'\n').rev().any(|line| {
        decode_line(line).is_ok_and(|d| d.event.kind == EventKind::Known(EventType::RunCompleted))
    })
}

/// Opens the transcript; with `--follow`, waits for a run that has not started yet.
fn open_when_it_appears(path: &Path, follow: bool) -> Result<File, CliError> {
    loop {
        match File::open(path) {
            Ok(f) => return Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && follow => {
                // `tail -f R | head -1` for a run that never starts: nothing will fail a
                // write, so look at the pipe.
                if stdout_closed() {
                    return Err(CliError::BrokenPipe);
                }
                std::thread::sleep(POLL);
            }
            Err(e) => {
                return Err(CliError::Read {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                });
            }
        }
    }
}

/// The lines of the bytes read so far, at most [`transcript_domain::MAX_LINE_BYTES`] each
/// (a longer one is skipped, not buffered).
#[derive(Default)]
struct Lines {
    line_no: u64,
    /// The start of the current line when it spans reads; never more than the line cap.
    pending: Vec<u8>,
    /// Length so far of an over-long line being skipped (not buffered).
    skipping: Option<u64>,
    /// The child runs named so far, each once.
    children: Vec<RunId>,
    /// Events shown so far.
    events: u64,
}

impl Lines {
    /// Shows every line `data` completes; returns the run's status when `tail` should stop.
    fn feed(
        &mut self,
        data: &[u8],
        path: &Path,
        options: TailOptions,
        style: &Style,
        out: &mut dyn Write,
    ) -> Result<Option<Status>, CliError> {
        let cap = transcript_domain::MAX_LINE_BYTES;
        let mut start = 0;
        // Each byte is looked at once (memchr), so a 40 MB line costs what 40 MB of short lines do.
        for newline in memchr::memchr_iter(b'\n', data) {
            let piece = &data[start..newline];
            start = newline + 1;
            self.line_no += 1;
            if let Some(len) = self.skipping.take() {
                skipped(path, self.line_no, len + piece.len() as u64, cap);
                continue;
            }
            let body: &[u8] = if self.pending.is_empty() {
                piece
            } else {
                self.pending.extend_from_slice(piece);
                &self.pending
            };
            if body.len() > cap {
                skipped(path, self.line_no, body.len() as u64, cap);
            } else if let Some(event) = show_line(path, self.line_no, body, style, out)? {
                self.events += 1;
                if let Some(child) = event.child_run_id
                    && !self.children.contains(&child)
                {
                    self.children.push(child);
                }
                if options.until_complete && event.kind == EventKind::Known(EventType::RunCompleted)
                {
                    let error = match &event.payload {
                        DecodedPayload::Step(s) => s.error.as_deref(),
                        _ => None,
                    };
                    return Ok(Some(Status::of_completion(error)));
                }
            }
            self.pending.clear();
        }
        let rest = &data[start..];
        match self.skipping.as_mut() {
            Some(len) => *len += rest.len() as u64,
            None => {
                self.pending.extend_from_slice(rest);
                if self.pending.len() > cap {
                    self.skipping = Some(self.pending.len() as u64);
                    self.pending = Vec::new();
                }
            }
        }
        Ok(None)
    }
}

/// Renders one complete line; returns its event (none for a blank or malformed line).
fn show_line(
    path: &Path,
    line_no: u64,
    body: &[u8],
    style: &Style,
    out: &mut dyn Write,
) -> Result<Option<DecodedEvent>, CliError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match decode_line(body) {
        Ok(decoded) => {
            // A reader that went away (`| head -1`) ends the tail, quietly.
            stdout_result(writeln!(out, "{}", summary(&decoded.event, style)))?;
            stdout_result(out.flush())?;
            Ok(Some(decoded.event))
        }
        Err(e) => {
            crate::diag!(
                "{}: line {line_no}: malformed: {}",
                path.display(),
                crate::style::one_line(&e.to_string())
            );
            Ok(None)
        }
    }
}

fn skipped(path: &Path, line_no: u64, len: u64, cap: usize) {
    crate::diag!(
        "{}: line {line_no}: skipped: {len} bytes is over the {cap}-byte line cap",
        path.display()
    );
}

/// Whether stdout is a pipe whose reader has gone: checked while `tail -f` waits, so
/// `tail -f R | head -1` ends even when no new event arrives to fail a write.
fn stdout_closed() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let fd = stdout.as_fd();
    let mut fds = [PollFd::new(&fd, PollFlags::empty())];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP)
}
