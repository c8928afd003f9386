//! One event, encoded exactly as the file recorder encodes it: the same mask step, the same
//! validation, the same canonicalisation and the domain's [`PreEncoded`] line encoder, so a
//! message payload in the stream is byte for byte the line `transcript-infra` writes to a file
//! (`tests/contract.rs` proves it with a `ManualClock`).
//!
//! The file recorder's copy of these steps is crate-private in `transcript-infra`; this crate
//! depends on the domain only (arch-check), so the five steps are repeated here and the
//! contract test keeps the two equal.

use transcript_domain::{
    EventDraft, EventMask, MAX_LINE_BYTES, PreEncoded, RecordError, RunId, Seq, Timestamp,
};

/// A draft masked, validated and encoded, waiting for its seq and timestamp.
pub(crate) struct Prepared {
    pub(crate) encoded: PreEncoded,
    pub(crate) draft: EventDraft,
}

/// The longest line `encoded` bytes of parts can make (the file recorder's bound).
fn line_bound(encoded: usize) -> usize {
    encoded + 7 + 20 + 14 + 24 + 12 + 1
}

/// Masks, validates, canonicalizes and encodes `draft` for the run.
pub(crate) fn prepare(
    (run_id, parent_run_id): (RunId, Option<RunId>),
    mask: Option<&dyn EventMask>,
    mut draft: EventDraft,
) -> Result<Prepared, RecordError> {
    if let Some(mask) = mask {
        let before = draft.event_type();
        mask.mask(&mut draft.payload);
        if draft.event_type() != before {
            return Err(RecordError::Encode(format!(
                "event mask changed the event type from {before} to {}",
                draft.event_type()
            )));
        }
    }
    draft.validate()?;
    draft.payload.canonicalize();
    let encoded = PreEncoded::new(run_id, parent_run_id, &draft)
        .map_err(|e| RecordError::Encode(e.to_string()))?;
    let length = line_bound(encoded.len_hint() - 80);
    if length > MAX_LINE_BYTES {
        return Err(RecordError::TooLarge {
            length,
            limit: MAX_LINE_BYTES,
        });
    }
    Ok(Prepared { encoded, draft })
}

impl Prepared {
    /// The complete line (with `\n`) for `seq` and `timestamp`.
    pub(crate) fn line(&self, seq: Seq, timestamp: Timestamp) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded.len_hint());
        self.encoded.write_line(seq, timestamp, &mut out);
        out
    }
}
