//! Resuming an existing transcript (decision 13): find the highest valid
//! seq, move a torn tail to `<run_id>.jsonl.torn`, truncate to the last
//! newline.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use transcript_domain::{RecordError, Seq, Timestamp};

use crate::fs::{FILE_MODE, force_file_mode, storage_error};
use crate::reader::{ReadError, ReadItem, ReadWarningKind, TranscriptReader};

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
        }
    }
}

/// What opening found in an existing file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeInfo {
    /// Valid events already in the file.
    pub existing_events: u64,
    /// Highest valid seq found (0 for a new or empty file).
    pub highest_seq: Seq,
    /// Warnings (torn tail moved, malformed lines kept).
    pub warnings: Vec<ResumeWarning>,
}

pub(crate) struct Scan {
    pub(crate) info: ResumeInfo,
    /// Length of the transcript after repair (the last acknowledged offset).
    pub(crate) length: u64,
    /// Timestamp of the last valid line, so timestamps never go backwards.
    pub(crate) last_timestamp: Option<Timestamp>,
}

/// Scans `read` (a read handle on the locked transcript at `path`) and
/// repairs a torn tail through `write` (the locked append handle).
pub(crate) fn scan_and_repair(
    path: &Path,
    torn_path: &Path,
    read: File,
    write: &File,
) -> Result<Scan, RecordError> {
    let mut info = ResumeInfo::default();
    let mut last_timestamp = None;
    let mut torn: Option<(u64, u64)> = None; // (offset, length)
    let mut malformed = 0u64;
    let mut first_malformed = 0u64;
    let mut reader = TranscriptReader::new(BufReader::with_capacity(64 * 1024, read))
        .with_path(path.to_path_buf());
    for item in reader.by_ref() {
        match item {
            Ok(ReadItem::Event(ev)) => {
                info.existing_events += 1;
                info.highest_seq = info.highest_seq.max(ev.event.seq);
                last_timestamp = Some(ev.event.timestamp);
            }
            Ok(ReadItem::Warning(w)) => {
                if let ReadWarningKind::UnterminatedFinalLine { length } = w.kind {
                    torn = Some((w.offset, length));
                }
            }
            Err(ReadError::Malformed(m)) => {
                if malformed == 0 {
                    first_malformed = m.line;
                }
                malformed += 1;
            }
            Err(ReadError::Io { source, .. }) => {
                return Err(storage_error(
                    path,
                    "cannot read existing transcript",
                    Some(source),
                ));
            }
        }
    }
    let mut length = reader.offset();
    if let Some((offset, bytes)) = torn {
        // An unterminated fragment that decoded was counted as an event, but
        // it was never acknowledged: it moves out with the rest of the tail.
        recount_without_tail(path, offset, &mut info, &mut last_timestamp)?;
        move_tail(path, torn_path, write, offset, bytes)?;
        length = offset;
        info.warnings.push(ResumeWarning::TornTail {
            bytes,
            moved_to: torn_path.to_path_buf(),
            truncated_to: offset,
        });
    }
    if malformed > 0 {
        info.warnings.push(ResumeWarning::MalformedLines {
            count: malformed,
            first_line: first_malformed,
        });
    }
    Ok(Scan {
        info,
        length,
        last_timestamp,
    })
}

/// Rescans `[0, end)` when the torn fragment happened to decode, so the
/// highest seq and last timestamp come from acknowledged lines only.
fn recount_without_tail(
    path: &Path,
    end: u64,
    info: &mut ResumeInfo,
    last_timestamp: &mut Option<Timestamp>,
) -> Result<(), RecordError> {
    let file = crate::fs::open_read(path)?;
    let reader = TranscriptReader::new(BufReader::new(file.take(end)));
    info.existing_events = 0;
    info.highest_seq = 0;
    *last_timestamp = None;
    for item in reader {
        if let Ok(ReadItem::Event(ev)) = item {
            info.existing_events += 1;
            info.highest_seq = info.highest_seq.max(ev.event.seq);
            *last_timestamp = Some(ev.event.timestamp);
        }
    }
    Ok(())
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
    let mut dst = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(torn_path)
        .map_err(|e| torn_err("cannot open torn-tail file", e))?;
    let meta = dst
        .metadata()
        .map_err(|e| torn_err("cannot inspect torn-tail file", e))?;
    if !meta.is_file() {
        return Err(storage_error(torn_path, "not a regular file", None));
    }
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
