//! A transcript's first and last events without reading what lies between: the first line
//! from the start, the last complete line found by reading backwards from the end (past a torn
//! tail of any length, in 64 KiB reads), so summarising a storage of large transcripts
//! (`transcript list`) reads a few KiB per run.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
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
}
