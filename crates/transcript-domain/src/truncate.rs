//! The one truncation rule for strings (#32 item 4): a string longer than a byte limit keeps
//! the longest prefix that ends on a character boundary and leaves room for the marker, so
//! the result, marker included, is never longer than the limit; the marker says how long the
//! original was and its sha256 (`…[truncated: N bytes, sha256 H]`), so the cut is visible
//! and the original can be matched. Cutting a result again changes nothing (it fits).
//!
//! When the limit cannot hold that marker, a shorter one is used: `…[truncated: N bytes]`,
//! else `…`, else none (the prefix alone, under 3 bytes): the limit always wins.
//!
//! Pure: the caller hashes (this crate has no digest), and only when a string is cut.

/// The marker a cut string ends with: `…[truncated: N bytes, sha256 H]`, N the original's
/// size in bytes and H the lowercase hex sha256 of its UTF-8.
pub fn marker(original_bytes: usize, sha256_hex: &str) -> String {
    format!("…[truncated: {original_bytes} bytes, sha256 {sha256_hex}]")
}

/// The marker without the hash, for limits too small for [`marker`].
pub fn short_marker(original_bytes: usize) -> String {
    format!("…[truncated: {original_bytes} bytes]")
}

/// The ellipsis alone, for limits too small for [`short_marker`].
pub const ELLIPSIS: &str = "…";

/// `s` cut to at most `limit` bytes, marker included (see the module docs), or `None` when
/// it fits. `sha256_hex` hashes the original's bytes (called only when `s` is cut).
pub fn truncate_str(s: &str, limit: usize, sha256_hex: &dyn Fn(&[u8]) -> String) -> Option<String> {
    if s.len() <= limit {
        return None;
    }
    let full = marker(s.len(), &sha256_hex(s.as_bytes()));
    let mark = [full, short_marker(s.len()), ELLIPSIS.to_owned()]
        .into_iter()
        .find(|m| m.len() <= limit)
        .unwrap_or_default();
    let cut = floor_char_boundary(s, limit - mark.len());
    let mut out = String::with_capacity(cut + mark.len());
    out.push_str(&s[..cut]);
    out.push_str(&mark);
    Some(out)
}

/// The largest character boundary of `s` at or below `at`.
pub fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut cut = at.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    cut
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fake_hash(_: &[u8]) -> String {
        "h".repeat(64)
    }

    #[test]
    fn the_result_never_exceeds_the_limit_and_respects_char_boundaries() {
        let texts = [
            "plain ascii text ".repeat(20),
            "aé🦀".repeat(40),
            "é".repeat(300),
        ];
        for s in &texts {
            for limit in 0..s.len() + 2 {
                let Some(out) = truncate_str(s, limit, &fake_hash) else {
                    assert!(s.len() <= limit);
                    continue;
                };
                assert!(out.len() <= limit, "{limit}: {} bytes", out.len());
                // The kept part is a prefix of the original (a valid str by construction).
                let kept = out.find(ELLIPSIS).map_or(out.as_str(), |i| &out[..i]);
                assert!(s.starts_with(kept));
                // Idempotent: a cut result fits.
                assert_eq!(truncate_str(&out, limit, &fake_hash), None);
            }
        }
    }

    #[test]
    fn the_marker_says_how_long_the_original_was_whenever_it_fits() {
        let s = "x".repeat(1000);
        let full = marker(1000, &"h".repeat(64));
        let out = truncate_str(&s, 200, &fake_hash).unwrap();
        assert_eq!(out.len(), 200);
        assert_eq!(out, format!("{}{full}", "x".repeat(200 - full.len())));
        // Too small for the hash: the size alone.
        let out = truncate_str(&s, 40, &fake_hash).unwrap();
        assert!(out.ends_with("…[truncated: 1000 bytes]"), "{out}");
        assert_eq!(out.len(), 40);
        // Smaller still: the ellipsis, then the prefix alone.
        assert_eq!(truncate_str(&s, 4, &fake_hash).unwrap(), "x…");
        assert_eq!(truncate_str(&s, 2, &fake_hash).unwrap(), "xx");
        assert_eq!(truncate_str(&s, 0, &fake_hash).unwrap(), "");
        assert_eq!(truncate_str(&s, 1000, &fake_hash), None);
    }

    #[test]
    fn the_hash_is_taken_only_when_a_string_is_cut() {
        let never = |_: &[u8]| -> String { panic!("hashed a string that fits") };
        assert_eq!(truncate_str("short", 5, &never), None);
    }
}
