//! What fits one NATS message: the per-value cap a runner gives exec so that every step
//! event's line fits the servers' `max_payload`.
//!
//! A server refuses a message (its headers included) larger than its `max_payload` (1 MiB by
//! default, at most 64 MB). Exec bounds each recorded value to a cap `L` measured in bytes
//! *before* JSON encoding for strings (`transcript_domain::truncate`: a cut string, marker
//! included, is at most `L` UTF-8 bytes), and in encoded bytes for objects and arrays (their
//! members cut to `L`, the whole kept up to `2 × L` encoded bytes, else a small stub). A
//! string's JSON escaping grows it up to [`ESCAPE_GROWTH`]× (a control byte becomes
//! `\u0001`; multi-byte UTF-8 is written as is, `"`, `\` and newlines double), so one value
//! takes at most `6 × L + 2` bytes of a line, whichever its shape (an object's `2 × L` is
//! below that). The largest events carry [`VALUES_PER_EVENT`] such values: a failed step
//! (its error and its result), a tool result (its output and its error), a message of two
//! blocks. Their line is at most `12 × L` plus the envelope (seq, timestamp, run ids, step
//! path, names, keys) and the publish headers (`Nats-Msg-Id`,
//! `Nats-Expected-Last-Subject-Sequence`, about 110 bytes), which [`ENVELOPE_RESERVE`]
//! bounds for step and tool names of ordinary length. So [`value_cap`] is
//! `(max_payload − ENVELOPE_RESERVE) / 12`.
//!
//! A message of more than two large blocks is bounded as a whole: the runner gives exec
//! `max_payload` as the largest line too (`ServiceBuilder::max_line_bytes` in
//! `transcript-exec`), which cuts such a message's values further until its line fits.
//! Where that cannot hold (a runner that does not, a step name of kilobytes, a
//! redaction marker longer than the secret it replaces), the line over `max_payload` is
//! never sent: `record` fails at once with an error naming both sizes.

/// Worst-case growth of a string value by JSON escaping (a control byte as `\u00XX`).
pub const ESCAPE_GROWTH: usize = 6;

/// The most capped values one event carries (a step's error and result; a tool result's
/// output and error).
pub const VALUES_PER_EVENT: usize = 2;

/// Room kept on a message for the line's envelope and the publish headers.
pub const ENVELOPE_RESERVE: usize = 4 * 1024;

/// The smallest `max_payload` a run accepts (16 KiB): below it the cap would leave about a
/// kilobyte of a step's output, too little to be useful, so the run is refused before any
/// step runs.
pub const MIN_MAX_PAYLOAD: usize = 16 * 1024;

/// The per-value cap, at most `wanted`, that keeps the largest step or tool event of a run
/// within `max_payload` bytes (see the module docs), or `None` when `max_payload` is below
/// [`MIN_MAX_PAYLOAD`].
pub fn value_cap(max_payload: usize, wanted: usize) -> Option<usize> {
    if max_payload < MIN_MAX_PAYLOAD {
        return None;
    }
    let fits = (max_payload - ENVELOPE_RESERVE) / (ESCAPE_GROWTH * VALUES_PER_EVENT);
    Some(wanted.min(fits))
}

/// The smallest `max_payload` that keeps a cap of `wanted` bytes (for the advice printed when
/// the cap is lowered).
pub fn max_payload_for(wanted: usize) -> usize {
    wanted
        .saturating_mul(ESCAPE_GROWTH * VALUES_PER_EVENT)
        .saturating_add(ENVELOPE_RESERVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_two_fully_escaped_values_and_the_envelope() {
        let wanted = 1 << 20;
        let cap = value_cap(1 << 20, wanted).unwrap();
        assert_eq!(cap, ((1 << 20) - ENVELOPE_RESERVE) / 12);
        assert!(12 * cap + ENVELOPE_RESERVE <= 1 << 20);
        assert_eq!(value_cap(64 << 20, wanted), Some(wanted));
        assert_eq!(value_cap(max_payload_for(wanted), wanted), Some(wanted));
        assert_eq!(
            value_cap(max_payload_for(wanted) - 1, wanted),
            Some(wanted - 1)
        );
        assert_eq!(value_cap(MIN_MAX_PAYLOAD - 1, wanted), None);
        assert_eq!(value_cap(MIN_MAX_PAYLOAD, wanted), Some(1024));
    }
}
