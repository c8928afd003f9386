//! A transcript's first and last events without reading what lies between: the first line
//! from the start, the last complete line found by reading backwards from the end (past a torn
//! tail of any length, in 64 KiB reads), so summarising a storage of large transcripts
//! (`transcript list`) reads a few KiB per run. [`ends`] reads both from one open: a file of
//! at most [`END_READ`] bytes in one read, a larger one in two (its head and its tail), into a
//! buffer the caller reuses, falling back to [`first_event`] and [`last_event`] only when a
//! line does not fit what it read.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use transcript_domain::{DecodedEvent, decode_line};

use crate::{ReadItem, TranscriptReader};

/// The first event of the transcript at `path` (`None`: unreadable, or no event decodes).
pub fn first_event(path: &Path) -> Option<DecodedEvent> {
    TranscriptReader::open(path)
        .ok()?
        .find_map(|item| match item {
            Ok(ReadItem::Event(e)) => Some(e.event),
            _ => None,
        })
}

/// The event of the last complete (newline-terminated: only those were acknowledged) line of
/// the transcript at `path`; `None` when there is none, it does not decode, or it is longer
/// than any reader accepts ([`transcript_domain::MAX_LINE_BYTES`]).
pub fn last_event(path: &Path) -> Option<DecodedEvent> {
    let mut file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let end = rfind_newline(&mut file, len, len).ok()??;
    let cap = transcript_domain::MAX_LINE_BYTES as u64;
    let start = match rfind_newline(&mut file, end, cap + 1).ok()? {
        Some(newline) => newline + 1,
        None if end <= cap => 0,
        None => return None,
    };
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut line = Vec::with_capacity(usize::try_from(end - start).ok()?);
    Read::by_ref(&mut file)
        .take(end - start)
        .read_to_end(&mut line)
        .ok()?;
    decode_line(&line).ok().map(|d| d.event)
}

/// Bytes [`ends`] reads from each end of a file: a file no larger is read whole, at once.
pub(crate) const END_READ: usize = 16 * 1024;

/// The first and last events of the transcript at `path`, exactly as [`first_event`] and
/// [`last_event`] give them, from one open and one read (a file of at most [`END_READ`]
/// bytes) or two and a `stat` (its head and its tail) into `buf` (the caller's, reused from
/// file to file); a first line that is not an event, or a line longer than what was read, is
/// left to those two functions. A path that is not a regular file, or cannot be opened or
/// read, has neither.
pub(crate) fn ends(path: &Path, buf: &mut Vec<u8>) -> (Option<DecodedEvent>, Option<DecodedEvent>) {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    else {
        return (None, None);
    };
    buf.resize(2 * END_READ, 0);
    let (front, back) = buf.split_at_mut(END_READ);
    let Some(n) = read_up_to(&file, front) else {
        return (None, None);
    };
    if n < END_READ {
        // The whole file (a directory, a FIFO or a socket fails the read).
        let whole = &front[..n];
        let first = first_line(whole)
            .and_then(decoded)
            .or_else(|| first_event(path));
        return (first, last_line(whole, true).and_then(decoded));
    }
    let Some(len) = file
        .metadata()
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
    else {
        return (None, None);
    };
    let first = first_line(front)
        .and_then(decoded)
        .or_else(|| first_event(path));
    let tail = len
        .checked_sub(END_READ as u64)
        .and_then(|at| file.read_exact_at(back, at).ok());
    // A read cut short (the file shrank) leaves it to the slow path.
    let last = match tail.and_then(|()| last_line(back, len == END_READ as u64)) {
        Some(line) => decoded(line),
        None => last_event(path),
    };
    (first, last)
}

/// Reads from the start of `file` into `buf` until it is full or the file ends: the bytes
/// read (`None`: a read failed).
fn read_up_to(file: &File, buf: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(n)
}

/// The first newline-terminated line of `head`, without its `\n` (`None`: it runs past
/// `head`, or is the file's unterminated only line: the reader's to say).
fn first_line(head: &[u8]) -> Option<&[u8]> {
    memchr::memchr(b'\n', head).map(|i| &head[..i])
}

/// The last newline-terminated line of `tail`, without its `\n`; `None` when `tail` holds
/// no newline or the line may start before `tail` (`from_start`: `tail` is the whole file,
/// so a line without a newline before it starts at 0).
fn last_line(tail: &[u8], from_start: bool) -> Option<&[u8]> {
    let end = memchr::memrchr(b'\n', tail)?;
    match memchr::memrchr(b'\n', &tail[..end]) {
        Some(i) => Some(&tail[i + 1..end]),
        None if from_start => Some(&tail[..end]),
        None => None,
    }
}

fn decoded(line: &[u8]) -> Option<DecodedEvent> {
    decode_line(line).ok().map(|d| d.event)
}

/// The offset of the last `\n` in the `limit` bytes before `before`, read backwards in
/// 64 KiB chunks.
fn rfind_newline(file: &mut File, before: u64, limit: u64) -> std::io::Result<Option<u64>> {
    let floor = before.saturating_sub(limit);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut end = before;
    while end > floor {
        let start = end.saturating_sub(chunk.len() as u64).max(floor);
        let buf = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        if let Some(i) = memchr::memrchr(b'\n', buf) {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, kind: &str) -> String {
        format!(
            "{{\"seq\":{seq},\"run_id\":\"0b6e7c8e-3f4a-4b1c-9d2e-1a2b3c4d5e6f\",\"type\":\"{kind}\",\
             \"path\":\"\",\"iteration\":0,\"timestamp\":\"2026-06-08T08:14:42.123Z\",\
             \"payload\":{{\"name\":\"w\",\"kind\":\"workflow\"}}}}\n"
        )
    }

    #[test]
    fn the_ends_are_read_past_a_torn_tail_longer_than_a_chunk() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("run.jsonl");
        let mut text = line(1, "run.started");
        for seq in 2..50 {
            text.push_str(&line(seq, "step.started"));
        }
        text.push_str(&line(50, "run.completed"));
        text.push_str(&"x".repeat(200 * 1024));
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first_event(&path).map(|e| e.seq), Some(1));
        assert_eq!(last_event(&path).map(|e| e.seq), Some(50));
        std::fs::write(&path, "no newline at all").unwrap_or_else(|e| panic!("{e}"));
        assert!(last_event(&path).is_none());
        assert!(first_event(&dir.path().join("missing.jsonl")).is_none());
    }

    #[test]
    fn ends_says_what_first_and_last_event_say_for_every_shape() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("run.jsonl");
        let long = |seq: u64, n: usize| {
            line(seq, "step.started").replace("\"w\"", &format!("\"{}\"", "w".repeat(n)))
        };
        let mut many = String::new();
        for seq in 1..400 {
            many.push_str(&line(seq, "step.started"));
        }
        let shapes: Vec<String> = vec![
            String::new(),
            "no newline".to_owned(),
            line(1, "run.started").trim_end().to_owned(),
            line(1, "run.started"),
            line(1, "run.started") + &line(2, "run.completed"),
            line(1, "run.started") + &line(2, "run.completed") + "torn",
            "\n".to_owned() + &line(2, "run.started") + &line(3, "run.completed"),
            "garbage\n".to_owned() + &line(2, "run.started"),
            many.clone(),
            many.clone() + "torn tail",
            many.clone() + &"x".repeat(3 * END_READ),
            long(1, 3 * END_READ) + &many,
            many.clone() + &long(400, END_READ),
            many.clone() + &long(400, END_READ - 300),
            long(1, END_READ - 200) + &line(2, "run.completed"),
            long(1, END_READ - 200) + "\n" + &"y".repeat(END_READ),
        ];
        let mut shapes = shapes;
        // Exactly one read's worth, and one byte either side.
        for size in [END_READ - 1, END_READ, END_READ + 1] {
            let mut text = many.clone();
            text.truncate(size - 1);
            let cut = text.rfind('\n').map_or(0, |i| i + 1);
            text.truncate(cut);
            text.push_str(&"z".repeat(size - 1 - text.len()));
            text.push('\n');
            assert_eq!(text.len(), size);
            shapes.push(text);
        }
        let mut buf = Vec::new();
        for (i, text) in shapes.iter().enumerate() {
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            let want = (first_event(&path), last_event(&path));
            assert_eq!(ends(&path, &mut buf), want, "shape {i}");
        }
        assert!(ends(&dir.path().join("missing.jsonl"), &mut buf) == (None, None));
        assert!(ends(dir.path(), &mut buf) == (None, None));
    }
}
