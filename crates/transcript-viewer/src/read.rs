//! Reading runs through the port: a run's lines split with a cap
//! ([`transcript_domain::MAX_LINE_BYTES`]: a longer line is skipped, never buffered), decoded
//! tolerantly by the domain's `decode_line` (a line that is not an event is counted, never
//! fatal), and the child-run lookup the export and compare views take.

use std::io::BufRead;
use std::ops::ControlFlow;

use transcript_domain::run_store::{RunState, RunStore};
use transcript_domain::{DecodedEvent, MAX_LINE_BYTES, RunId, decode_line};

use crate::ViewerError;

/// A run as read.
pub struct RunEvents {
    /// Its events, in file order.
    pub events: Vec<DecodedEvent>,
    /// How far it got when read.
    pub state: RunState,
    /// Lines that were not events, or too long.
    pub skipped: u64,
}

/// Hands `each` every line of `reader` (without its `\n`) up to `cap` bytes; longer lines
/// are skipped (counted in the result). `each` may stop the walk.
pub fn each_line(
    reader: impl std::io::Read,
    cap: usize,
    each: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
) -> std::io::Result<u64> {
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, reader);
    let mut line = Vec::new();
    let (mut skipping, mut skipped) = (false, 0u64);
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], i + 1),
            None => (buf, buf.len()),
        };
        let ends = done > chunk.len();
        if !skipping {
            if line.len() + chunk.len() > cap {
                skipping = true;
                skipped += 1;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        reader.consume(done);
        if ends {
            if !skipping && each(&line).is_break() {
                return Ok(skipped);
            }
            line.clear();
            skipping = false;
        }
    }
    if !skipping && !line.is_empty() {
        let _ = each(&line);
    }
    Ok(skipped)
}

/// The run `id` of `store`, decoded; `Ok(None)` when the store has no such run.
pub fn read_run(store: &dyn RunStore, id: RunId) -> Result<Option<RunEvents>, ViewerError> {
    let Some(lines) = store.read(id)? else {
        return Ok(None);
    };
    let location = lines.location.clone();
    let mut events = Vec::new();
    let mut bad = 0u64;
    let long = each_line(lines.body, MAX_LINE_BYTES, &mut |line| {
        if line.iter().all(u8::is_ascii_whitespace) {
            return ControlFlow::Continue(());
        }
        match decode_line(line) {
            Ok(decoded) => events.push(decoded.event),
            Err(_) => bad += 1,
        }
        ControlFlow::Continue(())
    })
    .map_err(|e| ViewerError::Read {
        location,
        message: e.to_string(),
    })?;
    Ok(Some(RunEvents {
        events,
        state: lines.state,
        skipped: bad + long,
    }))
}

/// The run `id`, or [`ViewerError::NotFound`].
pub fn must_read(store: &dyn RunStore, id: RunId) -> Result<RunEvents, ViewerError> {
    read_run(store, id)?.ok_or_else(|| ViewerError::NotFound(format!("run {id}")))
}

/// The child-run lookup of the export's and compare's views: a child run's events from the
/// same store (`None` when it cannot be read: the views show it as missing).
pub fn lookup(store: &dyn RunStore) -> impl FnMut(RunId) -> Option<Vec<DecodedEvent>> + '_ {
    move |id| read_run(store, id).ok().flatten().map(|run| run.events)
}

/// Resolves a run argument of a URL (a full id, a unique prefix, `latest`).
pub fn resolve(store: &dyn RunStore, arg: &str) -> Result<RunId, ViewerError> {
    Ok(store.resolve(arg)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_over_the_cap_are_skipped_and_the_last_line_needs_no_newline() {
        let text = b"one\ntoo long a line\n\ntwo";
        let mut seen = Vec::new();
        let skipped = each_line(&text[..], 8, &mut |l| {
            seen.push(String::from_utf8_lossy(l).into_owned());
            ControlFlow::Continue(())
        });
        assert_eq!(skipped.ok(), Some(1));
        assert_eq!(seen, ["one", "", "two"]);
    }
}
