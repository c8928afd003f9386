//! Resuming an existing transcript (decision 13): find the highest valid
//! seq, move a torn tail to `<run_id>.jsonl.torn`, truncate to the last
//! newline.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use transcript_domain::{RecordError, Seq, Timestamp};

use crate::fs::{force_file_mode, storage_error};
use crate::reader::{
    MalformedLine, ReadError, ReadItem, ReadWarning, ReadWarningKind, TranscriptReader, prefix_seq,
};

/// Something found while resuming an existing transcript. The recorder
/// opened fine; these are for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResumeWarning {
    /// Bytes after the last newline (never acknowledged) were moved to
    /// `moved_to` and the transcript was truncated to `truncated_to`.
    TornTail {
        /// Fragment length.
        bytes: u64,
        /// The `.torn` file the fragment was appended to.
        moved_to: PathBuf,
        /// The transcript's new length.
        truncated_to: u64,
    },
    /// Lines that are not events were left in place; seq continues after the
    /// highest valid one.
    MalformedLines {
        /// How many.
        count: u64,
        /// Line number of the first.
        first_line: u64,
    },
    /// A line that is not an event starts with our `{"seq":N,` prefix and
    /// `N` is the highest seq in the file: seq continues after it, so it is
    /// never handed out twice.
    SeqFromUnreadableLine {
        /// Its line number.
        line: u64,
        /// The seq its prefix names.
        seq: Seq,
    },
}

impl std::fmt::Display for ResumeWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResumeWarning::TornTail {
                bytes,
                moved_to,
                truncated_to,
            } => write!(
                f,
                "torn tail of {bytes} bytes moved to {} and transcript truncated to {truncated_to} bytes",
                moved_to.display()
            ),
            ResumeWarning::MalformedLines { count, first_line } => write!(
                f,
                "{count} malformed line(s) left in place (first at line {first_line})"
            ),
            ResumeWarning::SeqFromUnreadableLine { line, seq } => write!(
                f,
                "line {line} is not a readable event but holds seq {seq}; continuing after it"
            ),
        }
    }
}

/// What opening found in an existing file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeInfo {
    /// Valid events already in the file.
    pub existing_events: u64,
    /// Highest seq found (0 for a new or empty file): of a valid event, or
    /// read from the `{"seq":N,` prefix of a line that is not one (an
    /// oversized or damaged line of ours still used its seq). The next
    /// record gets `highest_seq + 1`.
    pub highest_seq: Seq,
    /// Warnings (torn tail moved, malformed lines kept).
    pub warnings: Vec<ResumeWarning>,
}

pub(crate) struct Scan {
    pub(crate) info: ResumeInfo,
    /// The seq of the next record.
    pub(crate) next_seq: Seq,
    /// Length of the transcript after repair (the last acknowledged offset).
    pub(crate) length: u64,
    /// Timestamp of the last valid line, so timestamps never go backwards.
    pub(crate) last_timestamp: Option<Timestamp>,
}

/// The last event seen, applied to the totals only once the next item shows
/// it is not an unterminated (never acknowledged) fragment.
struct Held {
    line: u64,
    seq: Seq,
    timestamp: Timestamp,
}

/// Scans `read` (a read handle on the locked transcript at `path`) and
/// repairs a torn tail through `write` (the locked append handle).
///
/// Seq is never reused: a line that is not an event but starts with our
/// `{"seq":N,` prefix (an oversized line, a damaged one) still counts with
/// `N`; a highest seq of `u64::MAX` refuses the resume, naming the line.
pub(crate) fn scan_and_repair(
    path: &Path,
    torn_path: &Path,
    read: File,
    write: &File,
) -> Result<Scan, RecordError> {
    let prefixes = read
        .try_clone()
        .map_err(|e| storage_error(path, "cannot read existing transcript", Some(e)))?;
    let mut reader = TranscriptReader::new(BufReader::with_capacity(64 * 1024, read))
        .with_path(path.to_path_buf());
    let mut tally = Tally::default();
    for item in reader.by_ref() {
        match item {
            Ok(ReadItem::Event(ev)) => tally.event(Held {
                line: ev.line,
                seq: ev.event.seq,
                timestamp: ev.event.timestamp,
            }),
            Ok(ReadItem::Warning(w)) => tally.warning(&w),
            Err(ReadError::Malformed(m)) => tally.malformed(&m, &prefixes),
            Err(ReadError::Io { source, .. }) => {
                return Err(storage_error(
                    path,
                    "cannot read existing transcript",
                    Some(source),
                ));
            }
        }
    }
    tally.finish(path, torn_path, write, reader.offset())
}

/// What the scan has seen so far.
#[derive(Default)]
struct Tally {
    info: ResumeInfo,
    last_timestamp: Option<Timestamp>,
    /// The unterminated final line: (offset, length).
    torn: Option<(u64, u64)>,
    malformed: u64,
    first_malformed: u64,
    /// The highest seq and its line, from events.
    highest: Option<(Seq, u64)>,
    /// The highest seq and its line, from the prefixes of lines that are not events.
    prefix_only: Option<(Seq, u64)>,
    held: Option<Held>,
}

impl Tally {
    /// An event: the one held before it was acknowledged, and it is held in turn.
    fn event(&mut self, next: Held) {
        if let Some(h) = self.held.take() {
            self.apply(h);
        }
        self.held = Some(next);
    }

    /// Counts an event known to be whole.
    fn apply(&mut self, h: Held) {
        self.info.existing_events += 1;
        if self.highest.is_none_or(|(s, _)| h.seq > s) {
            self.highest = Some((h.seq, h.line));
        }
        self.last_timestamp = Some(h.timestamp);
    }

    /// A reader warning: an unterminated final line is the torn tail.
    fn warning(&mut self, w: &ReadWarning) {
        if let ReadWarningKind::UnterminatedFinalLine { length } = w.kind {
            self.torn = Some((w.offset, length));
            // A fragment that decoded was never acknowledged: it
            // moves out with the rest of the tail.
            if self.held.as_ref().is_some_and(|h| h.line == w.line) {
                self.held = None;
            }
        }
    }

    /// A line that is not an event: counted, and its `{"seq":N,` prefix still claims `N`.
    fn malformed(&mut self, m: &MalformedLine, prefixes: &File) {
        if self.malformed == 0 {
            self.first_malformed = m.line;
        }
        self.malformed += 1;
        if let Some(seq) = read_prefix_seq(prefixes, m.offset)
            && self.prefix_only.is_none_or(|(s, _)| seq > s)
        {
            self.prefix_only = Some((seq, m.line));
        }
    }

    /// The scan's outcome once the file is read to `length`: the next seq, and the torn tail
    /// moved out of the transcript.
    fn finish(
        mut self,
        path: &Path,
        torn_path: &Path,
        write: &File,
        mut length: u64,
    ) -> Result<Scan, RecordError> {
        if let Some(h) = self.held.take() {
            self.apply(h);
        }
        let mut info = self.info;
        let mut highest = self.highest;
        if let Some((seq, line)) = self.prefix_only
            && highest.is_none_or(|(s, _)| seq > s)
        {
            highest = Some((seq, line));
            info.warnings
                .push(ResumeWarning::SeqFromUnreadableLine { line, seq });
        }
        info.highest_seq = highest.map_or(0, |(s, _)| s);
        let next_seq = match highest {
            None => 1,
            Some((seq, line)) => seq.checked_add(1).ok_or_else(|| {
                storage_error(
                    path,
                    format!("line {line} holds seq {seq}, the largest possible: cannot continue this transcript"),
                    None,
                )
            })?,
        };
        if let Some((offset, bytes)) = self.torn {
            move_tail(path, torn_path, write, offset, bytes)?;
            length = offset;
            info.warnings.push(ResumeWarning::TornTail {
                bytes,
                moved_to: torn_path.to_path_buf(),
                truncated_to: offset,
            });
        }
        if self.malformed > 0 {
            info.warnings.push(ResumeWarning::MalformedLines {
                count: self.malformed,
                first_line: self.first_malformed,
            });
        }
        Ok(Scan {
            info,
            next_seq,
            length,
            last_timestamp: self.last_timestamp,
        })
    }
}

/// The seq in the `{"seq":N,` prefix of the line at `offset`, if it has one.
fn read_prefix_seq(file: &File, offset: u64) -> Option<Seq> {
    use std::os::unix::fs::FileExt;
    // `{"seq":` + 20 digits + `,`
    let mut buf = [0u8; 28];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    prefix_seq(&buf[..filled])
}

fn move_tail(
    path: &Path,
    torn_path: &Path,
    write: &File,
    offset: u64,
    bytes: u64,
) -> Result<(), RecordError> {
    let torn_err = |message: &str, e: io::Error| storage_error(torn_path, message, Some(e));
    let mut src = crate::fs::open_read(path)?;
    src.seek(SeekFrom::Start(offset))
        .map_err(|e| storage_error(path, "cannot seek to torn tail", Some(e)))?;
    // Opened like a transcript: append-only, 0o600, no symlink, a regular file.
    let mut dst = crate::fs::open_append(torn_path)?;
    force_file_mode(torn_path, &dst)?;
    let copied = io::copy(&mut (&mut src).take(bytes), &mut dst)
        .map_err(|e| torn_err("cannot copy torn tail", e))?;
    if copied != bytes {
        return Err(storage_error(
            path,
            format!("torn tail changed while copying ({copied} of {bytes} bytes)"),
            None,
        ));
    }
    // A separator, so fragments from successive crashes stay apart.
    dst.write_all(b"\n")
        .and_then(|()| dst.sync_all())
        .map_err(|e| torn_err("cannot write torn-tail file", e))?;
    // Only once the fragment is safe in `.torn` does the transcript lose it.
    write
        .set_len(offset)
        .and_then(|()| write.sync_all())
        .map_err(|e| storage_error(path, "cannot truncate torn tail", Some(e)))?;
    Ok(())
}
