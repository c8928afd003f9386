//! `transcript tail [-f]`: renders events as they are appended; keeps
//! following through a torn tail (bytes without a newline are held until the
//! line completes, or dropped when a recorder reopening the run truncates
//! them away) and through a file that does not exist yet.
//!
//! `tail -f` ends with the run (#42): after the root run's `run.completed`, once every child
//! run it named (`child_run_id`) whose file is beside it has completed too, it exits with the
//! run's status, like `gh run watch --exit-status`: 0 succeeded, 1 failed,
//! [`EXIT_CANCELLED`] cancelled. `--forever` keeps following past the end.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::run_store::{FollowEnd, FollowItem, StoredLines};
use transcript_domain::tree::Status;
use transcript_domain::{DecodedEvent, DecodedPayload, EventKind, EventType, RunId, decode_line};

use crate::CliError;
use crate::cmd::show::short;
use crate::exit::stdout_result;
use crate::style::{Style, one_line};

/// An error's first line, and how many more it has (a line per event: `show` prints it whole).
fn first_line(err: &str) -> String {
    let mut lines = err.lines();
    let first = lines.next().unwrap_or_default();
    match lines.count() {
        0 => first.to_owned(),
        n => format!(
            "{first} (+{n} more line{} in `show`)",
            if n == 1 { "" } else { "s" }
        ),
    }
}

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
        ) => match s.error.as_deref().map(first_line) {
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

/// What `tail` reads: a transcript file named by its path (its child runs beside it), or a
/// run of the store (through the read port).
struct Target {
    /// The store its child runs are read from.
    store: crate::store::Store,
    /// The file, for a path argument.
    path: Option<PathBuf>,
    /// The run, for a run argument.
    run: Option<RunId>,
    /// Where it is, for messages.
    location: String,
}

impl Target {
    /// Resolves `tail`'s argument (a file, run id, prefix or `latest`; with `-f` a run id or
    /// path that does not exist yet is waited for).
    fn of(arg: &str, store: &crate::store::Store, follow: bool) -> Result<Self, CliError> {
        if crate::source::is_path(arg) {
            let path = PathBuf::from(arg);
            if path.is_dir() {
                // One run has one end and one status to exit with; `list` shows a directory's.
                return Err(CliError::Read {
                    path,
                    message: "a directory: tail follows one run (a transcript file, a run id \
                              or prefix, or `latest`)"
                        .to_owned(),
                });
            }
            if !follow && !path.exists() {
                return Err(CliError::NotFound {
                    what: "transcript".to_owned(),
                    path,
                });
            }
            let dir = crate::store::directory(&crate::source::dir_of(&path));
            return Ok(Target {
                store: Arc::new(dir),
                location: path.display().to_string(),
                path: Some(path),
                run: None,
            });
        }
        // A run's location as a command printed it follows the run in the store it names.
        let (store, arg) = match crate::store::located(arg, store, follow)? {
            Some((store, run)) => (store, run),
            None => (store.clone(), arg.to_owned()),
        };
        let run = store.resolve(&arg).map_err(crate::store::error)?;
        let location = match store.location() {
            l if l.starts_with("nats://") => format!("{l}#{run}"),
            dir => Path::new(&dir).join(run.file_name()).display().to_string(),
        };
        Ok(Target {
            store,
            path: None,
            run: Some(run),
            location,
        })
    }

    /// What is stored so far, as a stream, and how far the run got (`None`: no such run).
    fn read(&self) -> Result<Option<StoredLines>, CliError> {
        match (&self.path, self.run) {
            (Some(path), _) => {
                let file = std::fs::File::open(path).map_err(|e| CliError::Read {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                Ok(Some(StoredLines {
                    location: self.location.clone(),
                    body: Box::new(file),
                    state: crate::runs::liveness(path).into(),
                }))
            }
            (None, Some(run)) => self.store.read(run).map_err(crate::store::error),
            (None, None) => Ok(None),
        }
    }

    fn follow(
        &self,
        watch_lease: bool,
        each: &mut dyn FnMut(FollowItem<'_>) -> ControlFlow<()>,
    ) -> Result<FollowEnd, CliError> {
        match (&self.path, self.run) {
            (Some(path), _) => transcript_infra::follow_file(path, watch_lease, each),
            (None, Some(run)) => self.store.follow(run, watch_lease, each),
            (None, None) => Ok(FollowEnd::Ended),
        }
        .map_err(crate::store::error)
    }
}

/// Runs `tail` on `arg` (resolved in `store`). Without `-f` it prints what is stored (up to
/// `run.completed` unless `--forever`); with `-f` it follows the run, and unless `--forever`
/// ends after its `run.completed` and the completion of every child run it named, with the
/// run's status: a failed run is `Reported(1)`, a cancelled one `Reported(EXIT_CANCELLED)`,
/// an abandoned one (no runner, no `run.completed`) a storage error (exit 4).
pub fn run_arg(
    arg: &str,
    store: &crate::store::Store,
    options: TailOptions,
    style: &Style,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let target = Target::of(arg, store, options.follow)?;
    if !options.follow {
        return print_stored(&target, options, style, out);
    }
    let waiting = match (&target.path, target.run) {
        (Some(path), _) => !path.exists(),
        (None, Some(run)) => !target.store.contains(run).map_err(crate::store::error)?,
        (None, None) => false,
    };
    if waiting {
        let what = match (&target.path, target.run) {
            (None, Some(run)) if target.location.starts_with("nats://") => {
                format!("run {run} to appear in {}", target.store.location())
            }
            _ => format!("{} to appear", target.location),
        };
        crate::diag!("transcript: waiting for {what} (Ctrl-C to stop)…");
    }
    let mut shown = Shown::default();
    let end = target.follow(options.until_complete, &mut |item| {
        shown.take(item, &target.location, options, style, out)
    })?;
    if let Some(e) = shown.error {
        return Err(e);
    }
    let Some(status) = shown.status else {
        return match end {
            FollowEnd::Abandoned => Err(abandoned(&target.location)),
            // `--forever`, or a store that ended the follow.
            _ => Ok(()),
        };
    };
    wait_for_children(&target.store, shown.children)?;
    match status {
        Status::Succeeded | Status::Incomplete => Ok(()),
        Status::Failed => Err(CliError::Reported(1)),
        Status::Cancelled => Err(CliError::Reported(EXIT_CANCELLED)),
    }
}

/// `tail` without `-f`: what is stored, a torn final line warned about.
fn print_stored(
    target: &Target,
    options: TailOptions,
    style: &Style,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let Some(StoredLines { body, state, .. }) = target.read()? else {
        return Err(CliError::NotFound {
            what: "run".to_owned(),
            path: target.location.clone().into(),
        });
    };
    let mut shown = Shown::default();
    let torn = transcript_infra::read_lines(body, &mut |item| {
        shown.take(item, &target.location, options, style, out)
    })
    .map_err(|e| CliError::Read {
        path: target.location.clone().into(),
        message: e.to_string(),
    })?;
    if let Some(e) = shown.error {
        return Err(e);
    }
    if shown.status.is_some() {
        return Ok(());
    }
    if torn > 0 {
        crate::diag!(
            "{}: line {}: warning: unterminated final line ({torn} bytes)",
            target.location,
            shown.line_no + 1,
        );
    }
    if options.until_complete && shown.events > 0 {
        // No run.completed: say whether a runner is still at it.
        crate::diag!(
            "transcript: {}: no run.completed yet: {}",
            target.location,
            state.as_str()
        );
    }
    Ok(())
}

/// `tail -f` on a run no runner holds any more, without `run.completed` (exit 4).
pub fn abandoned(location: &str) -> CliError {
    CliError::Storage(format!(
        "{location}: the run was abandoned: it has no run.completed and no runner holds it any \
         more (its runner died or was killed); what it recorded is shown above"
    ))
}

/// Waits until each child run in `children` that `store` holds has its `run.completed`,
/// following it silently (its own child runs too); a child run abandoned on the way ends the
/// wait (exit 4). A child the store does not hold is not waited for: nothing there will ever
/// complete it (`tree` names missing children).
fn wait_for_children(
    store: &crate::store::Store,
    mut children: Vec<RunId>,
) -> Result<(), CliError> {
    let mut seen = Vec::new();
    while let Some(id) = children.pop() {
        if seen.contains(&id) || !store.contains(id).map_err(crate::store::error)? {
            continue;
        }
        seen.push(id);
        let done = store
            .read(id)
            .map_err(crate::store::error)?
            .is_some_and(|l| l.state.is_complete());
        if !done {
            crate::diag!("transcript: waiting for child run {id} to complete…");
        }
        let mut silent = Shown::default();
        let options = TailOptions {
            follow: true,
            until_complete: true,
        };
        let location = format!("child run {id}");
        let end = store
            .follow(id, true, &mut |item| {
                silent.take(
                    item,
                    &location,
                    options,
                    &Style::plain(),
                    &mut std::io::sink(),
                )
            })
            .map_err(crate::store::error)?;
        if let Some(e) = silent.error {
            return Err(e);
        }
        if silent.status.is_none() && end == FollowEnd::Abandoned {
            return Err(abandoned(&format!("child run {id}")));
        }
        children.extend(silent.children);
    }
    Ok(())
}

/// What a tail has shown of one run.
#[derive(Default)]
struct Shown {
    line_no: u64,
    /// Events shown so far.
    events: u64,
    /// The child runs named so far, each once.
    children: Vec<RunId>,
    /// The run's status, once its `run.completed` was shown (with `until_complete`).
    status: Option<Status>,
    /// Why the tail stopped early (stdout closed, a write failed).
    error: Option<CliError>,
}

impl Shown {
    /// Shows one item; breaks at `run.completed` (with `until_complete`) or on an error.
    fn take(
        &mut self,
        item: FollowItem<'_>,
        location: &str,
        options: TailOptions,
        style: &Style,
        out: &mut dyn Write,
    ) -> ControlFlow<()> {
        let body = match item {
            FollowItem::Idle if stdout_closed() => {
                self.error = Some(CliError::BrokenPipe);
                return ControlFlow::Break(());
            }
            FollowItem::Idle => return ControlFlow::Continue(()),
            FollowItem::Skipped { line, len } => {
                self.line_no = line;
                crate::diag!(
                    "{location}: line {line}: skipped: {len} bytes is over the {}-byte line cap",
                    transcript_domain::MAX_LINE_BYTES
                );
                return ControlFlow::Continue(());
            }
            FollowItem::Line(body) => body,
        };
        self.line_no += 1;
        let event = match show_line(location, self.line_no, body, style, out) {
            Ok(Some(event)) => event,
            Ok(None) => return ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        };
        self.events += 1;
        if let Some(child) = event.child_run_id
            && !self.children.contains(&child)
        {
            self.children.push(child);
        }
        if options.until_complete && event.kind == EventKind::Known(EventType::RunCompleted) {
            let error = match &event.payload {
                DecodedPayload::Step(s) => s.error.as_deref(),
                _ => None,
            };
            self.status = Some(Status::of_completion(error));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// Renders one complete line; returns its event (none for a blank or malformed line).
fn show_line(
    location: &str,
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
                "{location}: line {line_no}: malformed: {}",
                crate::style::one_line(&e.to_string())
            );
            Ok(None)
        }
    }
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
