//! How much of a transcript fits one request, and cutting it into parts that do.
//!
//! Tokens are **estimated**, not counted: one token per [`BYTES_PER_TOKEN`] bytes of UTF-8,
//! rounded up. Tokenizers of current models average about four characters of English a
//! token and fewer for JSON, code and other scripts, so three bytes over-counts most
//! transcripts: a part planned to fit usually does. It is not a promise for every model's
//! tokenizer: set `max_context_tokens` below the model's real window to keep a margin.

/// Bytes of UTF-8 counted as one token.
pub const BYTES_PER_TOKEN: u64 = 3;

/// Tokens kept free for the model's answer in every request.
pub const ANSWER_TOKENS: u64 = 512;

/// Tokens kept free for the notes carried from one part to the next (a chunked grading).
pub const NOTES_TOKENS: u64 = 768;

/// Fewer tokens than this left for the transcript in a request: the settings are refused.
pub const MIN_PART_TOKENS: u64 = 256;

/// The estimated tokens of `text`: its UTF-8 bytes divided by [`BYTES_PER_TOKEN`], rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Why a transcript cannot be graded within the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlanError {
    /// The instructions and rubric leave too little room (tokens left, the context).
    NoRoom(u64, u64),
    /// It needs more parts than allowed (estimated tokens, parts it needs, `None` when no
    /// part would hold anything beside the notes, parts allowed).
    TooLarge(u64, Option<usize>, u32),
}

/// The parts `transcript` is graded in: one when it fits with `overhead` tokens (instructions,
/// rubric, framing, the answer) in `context`; else parts of at most `context - overhead -`
/// [`NOTES_TOKENS`] tokens, at most `max_parts` of them. The parts, joined, are the
/// transcript.
pub(crate) fn plan(
    transcript: &str,
    overhead: u64,
    context: u64,
    max_parts: u32,
) -> Result<Vec<&str>, PlanError> {
    let tokens = estimate_tokens(transcript);
    let whole_room = context.saturating_sub(overhead);
    if whole_room < MIN_PART_TOKENS {
        return Err(PlanError::NoRoom(whole_room, context));
    }
    if tokens <= whole_room {
        return Ok(vec![transcript]);
    }
    let room = whole_room.saturating_sub(NOTES_TOKENS);
    if max_parts <= 1 || room < MIN_PART_TOKENS {
        let needed = (room >= MIN_PART_TOKENS).then(|| tokens.div_ceil(room) as usize);
        return Err(PlanError::TooLarge(tokens, needed, max_parts));
    }
    let max_bytes = usize::try_from(room * BYTES_PER_TOKEN).unwrap_or(usize::MAX);
    let parts = split(transcript, max_bytes);
    if parts.len() > max_parts as usize {
        return Err(PlanError::TooLarge(tokens, Some(parts.len()), max_parts));
    }
    Ok(parts)
}

/// `text` cut into pieces of at most `max_bytes` (at least 4), each ending at a line break
/// when one is in reach, else at a character boundary. The pieces joined are `text`.
pub(crate) fn split(text: &str, max_bytes: usize) -> Vec<&str> {
    let max_bytes = max_bytes.max(4);
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.len() > max_bytes {
        let mut cut = max_bytes;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(nl) = rest[..cut].rfind('\n') {
            cut = nl + 1;
        }
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_join_to_the_text_and_respect_the_size() {
        let text = "line one\nä second line that is long\n\nthird\n".repeat(40) + "no newline ééé";
        for max in [4, 5, 7, 16, 100, 1000, 10_000] {
            let parts = split(&text, max);
            assert_eq!(parts.concat(), text, "max {max}");
            assert!(parts.iter().all(|p| p.len() <= max.max(4)), "max {max}");
            assert!(parts.iter().all(|p| !p.is_empty()));
        }
        assert_eq!(split("", 10), [""]);
    }

    #[test]
    fn a_transcript_fits_whole_in_parts_or_is_too_large() {
        let text = "x".repeat(3000); // 1000 tokens
        assert_eq!(plan(&text, 500, 1500, 8).unwrap().len(), 1);
        // 2000 - 500 overhead - 768 notes = 732 tokens a part: 2196 bytes, so three parts.
        let big = "x".repeat(6000);
        assert_eq!(plan(&big, 500, 2000, 8).unwrap().len(), 3);
        assert_eq!(
            plan(&"x".repeat(6000), 500, 2000, 2),
            Err(PlanError::TooLarge(2000, Some(3), 2))
        );
        assert_eq!(
            plan(&"x".repeat(6000), 500, 2000, 1),
            Err(PlanError::TooLarge(2000, Some(3), 1))
        );
        assert_eq!(plan(&text, 900, 1000, 8), Err(PlanError::NoRoom(100, 1000)));
    }
}
