//! `verify`: structural checks of transcript files, as a serializable
//! report (used by `transcript validate`).

mod in_store;
pub use in_store::verify_run_in;
mod seq;
mod tools;

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use seq::SeqCheck;
use serde::Serialize;
use tools::ToolPairing;
use transcript_domain::tree::MAX_DEPTH;
use transcript_domain::{DecodedEvent, DecodedPayload, EventType, RunId, Seq, Timestamp};

use crate::reader::{ReadError, ReadEvent, ReadItem, ReadWarningKind, TranscriptReader};

/// What a finding is about (stable `snake_case` codes for tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FindingCode {
    /// A line that is not an event.
    MalformedLine,
    /// The file could not be read to the end.
    ReadFailed,
    /// The first event's seq is not 1.
    FirstSeqNotOne,
    /// Seqs skip values.
    SeqGap,
    /// A seq that is not greater than the previous one.
    SeqNotIncreasing,
    /// One line whose seq does not fit while the lines around it are
    /// consecutive (a stray or duplicated line): reported once, and the
    /// lines after it are checked against the line before it.
    SeqOutOfPlace,
    /// A `run_id` different from the file's first one.
    MixedRunId,
    /// The file is not named after its run id.
    FileNameMismatch,
    /// A `parent_run_id` different from the file's first one.
    MixedParentRunId,
    /// `child_run_id` on an event that is not `step.call_workflow.*`.
    UnexpectedChildRunId,
    /// `step.call_workflow.*` without `child_run_id`.
    MissingChildRunId,
    /// A run naming itself as its child or parent.
    SelfLink,
    /// A child run's file does not exist.
    ChildMissing,
    /// A child run whose events do not name the caller as parent.
    ChildParentMismatch,
    /// A child link that leads back to a run already being verified.
    LinkCycle,
    /// Bytes after the last newline (a writer stopped mid-line).
    UnterminatedFinalLine,
    /// A whitespace-only line.
    EmptyLine,
    /// An event or block type outside this version's vocabulary, or a
    /// payload that did not fit its type.
    DecodeWarning,
    /// A timestamp earlier than the previous line's.
    TimestampBackwards,
    /// A file without any event (empty, or nothing but bad lines): an
    /// error, a transcript describes a run.
    NoEvents,
    /// A second `run.started`: the file holds more than one run.
    SecondRunStarted,
    /// Events after `run.completed`: the run was appended to after it
    /// ended (a second run in the same file).
    EventAfterRunCompleted,
    /// A `tool.result` without an earlier `tool.call` of the same
    /// `call_id` (a warning).
    ToolResultWithoutCall,
    /// A `tool.call` that never gets a `tool.result` (a warning: an
    /// interrupted run leaves these).
    ToolCallWithoutResult,
    /// Child runs nested deeper than the tree builder follows
    /// (`transcript_domain::tree::MAX_DEPTH`); deeper links are not visited.
    LinkTooDeep,
}

/// One finding, with its position when it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind of finding.
    pub code: FindingCode,
    /// 1-based line, when it concerns one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Byte offset of that line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Human-readable explanation.
    pub message: String,
}

impl Finding {
    fn at(code: FindingCode, line: u64, offset: u64, message: impl Into<String>) -> Self {
        Self {
            code,
            line: Some(line),
            offset: Some(offset),
            message: message.into(),
        }
    }

    fn file(code: FindingCode, message: impl Into<String>) -> Self {
        Self {
            code,
            line: None,
            offset: None,
            message: message.into(),
        }
    }
}

/// Checks of one transcript file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The file, when verified from a path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The run id of the first event.
    pub run_id: Option<RunId>,
    /// The parent run id of the first event.
    pub parent_run_id: Option<RunId>,
    /// Lines read (including bad ones).
    pub lines: u64,
    /// Events decoded.
    pub events: u64,
    /// Lowest and highest seq seen.
    pub first_seq: Option<Seq>,
    /// Highest seq seen.
    pub last_seq: Option<Seq>,
    /// Child runs named by `child_run_id`, in order of first mention.
    pub child_run_ids: Vec<RunId>,
    /// Violations of the file contract.
    pub errors: Vec<Finding>,
    /// Tolerated oddities (forward compatibility, crash leftovers).
    pub warnings: Vec<Finding>,
}

impl FileReport {
    /// No errors.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Verifies one transcript from a reader.
///
/// Errors: malformed lines, seq not strictly increasing from 1 without gaps
/// or duplicates, more than one `run_id` or `parent_run_id`, child links on
/// the wrong event types, no events at all (an empty file, or only bad
/// lines), more than one run (a second `run.started`, events after
/// `run.completed`). Warnings: unterminated final line, empty lines,
/// decode warnings, timestamps going backwards, a `tool.result` without an
/// earlier `tool.call` of its `call_id`, a `tool.call` without a result.
pub fn verify_reader<R: BufRead>(reader: TranscriptReader<R>) -> FileReport {
    let mut v = Verifier::new();
    for item in reader {
        match item {
            Ok(ReadItem::Event(ev)) => v.event(ev),
            Ok(ReadItem::Warning(w)) => {
                v.report.lines = v.report.lines.max(w.line);
                let code = match w.kind {
                    ReadWarningKind::UnterminatedFinalLine { .. } => {
                        FindingCode::UnterminatedFinalLine
                    }
                    ReadWarningKind::EmptyLine => FindingCode::EmptyLine,
                };
                v.report
                    .warnings
                    .push(Finding::at(code, w.line, w.offset, w.kind.to_string()));
            }
            Err(ReadError::Malformed(m)) => {
                v.report.lines = v.report.lines.max(m.line);
                v.report.errors.push(Finding::at(
                    FindingCode::MalformedLine,
                    m.line,
                    m.offset,
                    m.cause.to_string(),
                ));
            }
            Err(e @ ReadError::Io { .. }) => {
                v.report
                    .errors
                    .push(Finding::file(FindingCode::ReadFailed, e.to_string()));
            }
        }
    }
    v.finish()
}

/// The checks' state while a transcript is read.
struct Verifier {
    report: FileReport,
    seqs: SeqCheck,
    tools: ToolPairing,
    last_ts: Option<Timestamp>,
    children: HashSet<RunId>,
    run_started: Option<u64>,
    run_completed: Option<u64>,
    /// Events after `run.completed`: how many, and where the first is.
    after_end: Option<(u64, u64, u64)>,
}

impl Verifier {
    fn new() -> Verifier {
        Verifier {
            report: FileReport {
                path: None,
                run_id: None,
                parent_run_id: None,
                lines: 0,
                events: 0,
                first_seq: None,
                last_seq: None,
                child_run_ids: Vec::new(),
                errors: Vec::new(),
                warnings: Vec::new(),
            },
            seqs: SeqCheck::default(),
            tools: ToolPairing::default(),
            last_ts: None,
            children: HashSet::new(),
            run_started: None,
            run_completed: None,
            after_end: None,
        }
    }

    /// Checks one event against the file's run, the events before it, and its own links.
    fn event(&mut self, ev: ReadEvent) {
        let (line, offset, e) = (ev.line, ev.offset, ev.event);
        let report = &mut self.report;
        report.lines = report.lines.max(line);
        report.events += 1;
        if report.events == 1 {
            report.run_id = Some(e.run_id);
            report.parent_run_id = e.parent_run_id;
        }
        self.seqs.push(e.seq, line, offset, &mut report.errors);
        report.first_seq = Some(report.first_seq.map_or(e.seq, |s| s.min(e.seq)));
        report.last_seq = Some(report.last_seq.map_or(e.seq, |s| s.max(e.seq)));
        self.run_identity(&e, line, offset);
        self.child_link(&e, line, offset);
        self.lifecycle(&e, line, offset);
        if let DecodedPayload::Tool(tool) = &e.payload {
            match e.kind.known() {
                Some(EventType::ToolCall) => self.tools.call(&tool.call_id, line, offset),
                Some(EventType::ToolResult) => {
                    self.tools
                        .result(&tool.call_id, line, offset, &mut self.report.warnings);
                }
                _ => {}
            }
        }
        if self.last_ts.is_some_and(|t| e.timestamp < t) {
            self.report.warnings.push(Finding::at(
                FindingCode::TimestampBackwards,
                line,
                offset,
                format!(
                    "timestamp {} is earlier than the previous line's",
                    e.timestamp
                ),
            ));
        }
        self.last_ts = Some(e.timestamp);
        for w in ev.warnings {
            self.report.warnings.push(Finding::at(
                FindingCode::DecodeWarning,
                line,
                offset,
                w.to_string(),
            ));
        }
    }

    /// The event's run and parent are the file's, and the run is not its own parent.
    fn run_identity(&mut self, e: &DecodedEvent, line: u64, offset: u64) {
        let report = &mut self.report;
        if report.run_id != Some(e.run_id) {
            report.errors.push(Finding::at(
                FindingCode::MixedRunId,
                line,
                offset,
                format!(
                    "run_id {} in a file of run {}",
                    e.run_id,
                    fmt_id(report.run_id)
                ),
            ));
        }
        if report.parent_run_id != e.parent_run_id {
            report.errors.push(Finding::at(
                FindingCode::MixedParentRunId,
                line,
                offset,
                format!(
                    "parent_run_id {} differs from the file's {}",
                    fmt_id(e.parent_run_id),
                    fmt_id(report.parent_run_id)
                ),
            ));
        }
        if e.parent_run_id == Some(e.run_id) {
            report.errors.push(Finding::at(
                FindingCode::SelfLink,
                line,
                offset,
                "run names itself as its parent",
            ));
        }
    }

    /// `child_run_id` only on the call-workflow events, which must carry it, naming another run.
    fn child_link(&mut self, e: &DecodedEvent, line: u64, offset: u64) {
        let report = &mut self.report;
        let call = matches!(
            e.kind.known(),
            Some(EventType::CallWorkflowStarted | EventType::CallWorkflowCompleted)
        );
        match (call, e.child_run_id) {
            (true, None) => report.errors.push(Finding::at(
                FindingCode::MissingChildRunId,
                line,
                offset,
                format!("{} without child_run_id", e.kind.as_str()),
            )),
            (false, Some(child)) if e.kind.known().is_some() => report.errors.push(Finding::at(
                FindingCode::UnexpectedChildRunId,
                line,
                offset,
                format!("child_run_id {child} on {}", e.kind.as_str()),
            )),
            (_, Some(child)) if child == e.run_id => report.errors.push(Finding::at(
                FindingCode::SelfLink,
                line,
                offset,
                "run names itself as its child",
            )),
            (_, Some(child)) => {
                if self.children.insert(child) {
                    report.child_run_ids.push(child);
                }
            }
            (false, None) => {}
        }
    }

    /// One run per file: one `run.started`, nothing after `run.completed`.
    fn lifecycle(&mut self, e: &DecodedEvent, line: u64, offset: u64) {
        if self.run_completed.is_some() {
            self.after_end.get_or_insert((0, line, offset)).0 += 1;
        }
        match e.kind.known() {
            Some(EventType::RunStarted) => match self.run_started {
                Some(first) => self.report.errors.push(Finding::at(
                    FindingCode::SecondRunStarted,
                    line,
                    offset,
                    format!(
                        "a second run.started (the first is at line {first}): the file holds more than one run"
                    ),
                )),
                None => self.run_started = Some(line),
            },
            Some(EventType::RunCompleted) if self.run_completed.is_none() => {
                self.run_completed = Some(line);
            }
            _ => {}
        }
    }

    /// The findings that need the whole file, in file order; file-wide ones last.
    fn finish(self) -> FileReport {
        let Verifier {
            mut report,
            mut seqs,
            tools,
            run_completed,
            after_end,
            ..
        } = self;
        seqs.finish(&mut report.errors);
        tools.finish(&mut report.warnings);
        if let (Some(end), Some((count, line, offset))) = (run_completed, after_end) {
            report.errors.push(Finding::at(
                FindingCode::EventAfterRunCompleted,
                line,
                offset,
                format!(
                    "{count} event(s) after run.completed at line {end}: the run was appended to after it ended"
                ),
            ));
        }
        // Findings in file order (the seq check reports a line once it has
        // seen the next one); file-wide ones last.
        report.errors.sort_by_key(|f| f.line.unwrap_or(u64::MAX));
        if report.events == 0 {
            let message = if report.lines == 0 {
                "no events: the file is empty".to_owned()
            } else {
                format!("no events in {} line(s)", report.lines)
            };
            report
                .errors
                .push(Finding::file(FindingCode::NoEvents, message));
        }
        report
    }
}

fn fmt_id(id: Option<RunId>) -> String {
    id.map_or_else(|| "(none)".to_owned(), |i| i.to_string())
}

/// Verifies one transcript file; a file named `<uuid>.jsonl` must hold that run.
pub fn verify_file(path: impl AsRef<Path>) -> FileReport {
    let path = path.as_ref();
    let mut report = match TranscriptReader::open(path) {
        Ok(reader) => verify_reader(reader),
        Err(e) => {
            let mut r = verify_reader(TranscriptReader::new(std::io::empty()));
            // Only the real cause: not "no events" on top of it.
            r.warnings.clear();
            r.errors.clear();
            r.errors
                .push(Finding::file(FindingCode::ReadFailed, e.to_string()));
            r
        }
    };
    report.path = Some(path.to_path_buf());
    let named = RunId::from_file_name(path);
    if let (Some(named), Some(actual)) = (named, report.run_id)
        && named != actual
    {
        report.errors.push(Finding::file(
            FindingCode::FileNameMismatch,
            format!("file is named after run {named} but holds run {actual}"),
        ));
    }
    report
}

/// Checks of a run and, following `child_run_id`, its child runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// The root run.
    pub run_id: RunId,
    /// One report per file, root first, then children depth-first.
    pub files: Vec<FileReport>,
    /// Cross-file problems (missing children, parent mismatches, cycles).
    pub links: Vec<Finding>,
}

impl RunReport {
    /// No errors in any file and no link problems.
    pub fn is_valid(&self) -> bool {
        self.links.is_empty() && self.files.iter().all(FileReport::is_valid)
    }

    /// Errors across all files plus link problems.
    pub fn error_count(&self) -> usize {
        self.links.len() + self.files.iter().map(|f| f.errors.len()).sum::<usize>()
    }
}

/// Verifies `<storage_dir>/<run_id>.jsonl` and every child run it links to,
/// checking that each child file exists and names its caller as parent.
pub fn verify_run(storage_dir: impl AsRef<Path>, run_id: RunId) -> RunReport {
    let dir = storage_dir.as_ref();
    let open = |run: RunId| -> Opened {
        let path = dir.join(run.file_name());
        if path.exists() {
            Ok(verify_file(&path))
        } else {
            let missing = format!("child run {run} has no file {}", path.display());
            Err(Box::new((missing, verify_file(&path))))
        }
    };
    verify_linked(run_id, &open)
}

/// What opening one run of a linked verification gives: its report, or (it is missing) what a
/// missing child is called and the report a missing root gets.
pub(crate) type Opened = Result<FileReport, Box<(String, FileReport)>>;

/// The run and its child runs, each opened by `open`.
pub(crate) fn verify_linked(run_id: RunId, open: &dyn Fn(RunId) -> Opened) -> RunReport {
    let mut report = RunReport {
        run_id,
        files: Vec::new(),
        links: Vec::new(),
    };
    let mut seen = HashSet::new();
    visit(open, run_id, None, 0, &mut seen, &mut report);
    report
}

fn visit(
    open: &dyn Fn(RunId) -> Opened,
    run: RunId,
    caller: Option<RunId>,
    depth: usize,
    seen: &mut HashSet<RunId>,
    report: &mut RunReport,
) {
    // Bounded like the tree builder: a chain of child files cannot
    // exhaust the stack.
    if depth > MAX_DEPTH {
        report.links.push(Finding::file(
            FindingCode::LinkTooDeep,
            format!("child run {run} is nested deeper than {MAX_DEPTH} levels; not followed"),
        ));
        return;
    }
    if !seen.insert(run) {
        report.links.push(Finding::file(
            FindingCode::LinkCycle,
            format!("run {run} is linked more than once (cycle or shared child)"),
        ));
        return;
    }
    let file = match open(run) {
        Ok(file) => file,
        Err(missing) if caller.is_some() => {
            let (missing, _) = *missing;
            report
                .links
                .push(Finding::file(FindingCode::ChildMissing, missing));
            return;
        }
        // The root itself: what verifying it says (no such file, unreadable).
        Err(missing) => missing.1,
    };
    if let Some(caller) = caller
        && file.events > 0
        && file.parent_run_id != Some(caller)
    {
        report.links.push(Finding::file(
            FindingCode::ChildParentMismatch,
            format!(
                "child run {run} names {} as parent, expected {caller}",
                fmt_id(file.parent_run_id)
            ),
        ));
    }
    let children = file.child_run_ids.clone();
    report.files.push(file);
    for child in children {
        visit(open, child, Some(run), depth + 1, seen, report);
    }
}
