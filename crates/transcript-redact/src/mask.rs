//! The mask format: what a mask keeps (a known, non-secret kind prefix such
//! as `sk-ant-`, and the length) and the marker that replaces the rest.

use std::ops::Range;

/// The marker a mask writes: `…(N chars)`, N the number of characters it
/// replaces.
pub const MARKER: &str = r"…\(\d+ chars\)";

/// A marker with the kind prefix a built-in rule keeps in front of it
/// (`sk-ant-…(101 chars)`). Text matching this is never masked again, so
/// masking is idempotent and a later rule (`token=` followed by a masked
/// key) does not mask the kept prefix apart from its marker.
pub(crate) const MARKER_WITH_KIND: &str = r"(?:(?:sk-(?:ant-|proj-|svcacct-|admin-)?|AIza|gh[pousr]_|github_pat_|xox[abposr]-|hf_|AKIA|ASIA|eyJ)|-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?…\(\d+ chars\)";

/// Masks a whole value, keeping only its length: `…(13 chars)`.
pub fn mask_value(value: &str) -> String {
    format!("…({} chars)", value.chars().count())
}

/// Masks a value after a literal prefix that stays visible (e.g. `Bearer `).
pub fn mask_with(prefix: &str, value: &str) -> String {
    format!("{prefix}{}", mask_value(value))
}

/// Masks `hay[span]` except the parts inside `markers` (sorted, disjoint
/// byte ranges of earlier masks), which are kept as they are. Returns the
/// masked text and how many masks were written (empty parts write none).
pub(crate) fn mask_around(
    hay: &str,
    span: Range<usize>,
    markers: &[Range<usize>],
) -> (String, u64) {
    let mut out = String::new();
    let mut made = 0;
    let mut push = |part: &str, out: &mut String| {
        if !part.is_empty() {
            made += 1;
            out.push_str(&mask_value(part));
        }
    };
    let mut pos = span.start;
    // Sorted: the markers inside the span are a run of them.
    for m in markers
        .iter()
        .skip_while(|m| m.end <= span.start)
        .take_while(|m| m.start < span.end)
    {
        let start = m.start.max(pos);
        let end = m.end.min(span.end);
        push(&hay[pos..start], &mut out);
        out.push_str(&hay[start..end]);
        pos = end;
    }
    push(&hay[pos..span.end], &mut out);
    (out, made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_length() {
        assert_eq!(mask_value("abcdefghijklm"), "…(13 chars)");
        assert_eq!(mask_value("hunter22"), "…(8 chars)");
        assert_eq!(mask_value("ééééééééééééé"), "…(13 chars)");
        assert_eq!(mask_value("a…b"), "…(3 chars)");
        assert_eq!(
            mask_with("Bearer ", "abcdefghijklmnop"),
            "Bearer …(16 chars)"
        );
    }

    #[test]
    fn markers_inside_a_span_are_kept() {
        let hay = "ab…(3 chars)cd";
        let marker = 2..hay.len() - 2;
        assert_eq!(
            mask_around(hay, 0..hay.len(), std::slice::from_ref(&marker)),
            ("…(2 chars)…(3 chars)…(2 chars)".to_owned(), 2)
        );
        assert_eq!(
            mask_around(hay, marker.clone(), &[marker]),
            ("…(3 chars)".to_owned(), 0)
        );
        assert_eq!(mask_around(hay, 1..1, &[]), (String::new(), 0));
    }
}
