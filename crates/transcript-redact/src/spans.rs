//! Byte ranges to mask: folded-key continuation, union, difference and
//! clipping, each in time linear in its input.

use std::ops::Range;

/// Line separators a folded key continues over: real ones, and those of
/// JSON-escaped text (a backslash and `n`).
const FOLD_SEPARATORS: &[&str] = &["\r\n", "\n", r"\r\n", r"\n", "\r"];

/// Where a match ending at `end` stops once the lines folded after it are
/// included: each following line made only of key characters
/// (`[A-Za-z0-9_-]`, at least one, after an indentation of blanks and tabs
/// as in a YAML folded scalar), up to the end of the text, a line
/// separator, an escape or a closing quote, continues it.
pub(crate) fn fold_end(hay: &str, mut end: usize) -> usize {
    loop {
        let rest = &hay[end..];
        let Some(sep) = FOLD_SEPARATORS.iter().find(|s| rest.starts_with(**s)) else {
            return end;
        };
        let after = &rest[sep.len()..];
        let line = after.trim_start_matches([' ', '\t']);
        let indent = after.len() - line.len();
        let run = line
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
            .count();
        let ends_line = matches!(
            line.as_bytes().get(run),
            None | Some(b'\r' | b'\n' | b'\\' | b'"')
        );
        if run == 0 || !ends_line {
            return end;
        }
        end += sep.len() + indent + run;
    }
}

/// Sorted, disjoint ranges covering exactly what `ranges` cover.
pub(crate) fn union(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges.into_iter().filter(|r| !r.is_empty()) {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// `spans` (sorted, disjoint) minus `holes` (sorted, disjoint), in one walk
/// over both.
pub(crate) fn subtract(spans: Vec<Range<usize>>, holes: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(spans.len());
    let mut first = 0;
    for span in spans {
        while holes.get(first).is_some_and(|h| h.end <= span.start) {
            first += 1;
        }
        let mut pos = span.start;
        for hole in holes[first..].iter().take_while(|h| h.start < span.end) {
            if hole.start > pos {
                out.push(pos..hole.start);
            }
            pos = pos.max(hole.end);
        }
        if pos < span.end {
            out.push(pos..span.end);
        }
    }
    out
}

/// `spans` (sorted, disjoint) cut at the boundaries of consecutive parts of
/// `lens` bytes each: per part, its share in the part's own coordinates.
pub(crate) fn split_at_parts(spans: &[Range<usize>], lens: &[usize]) -> Vec<Vec<Range<usize>>> {
    let mut out = Vec::with_capacity(lens.len());
    let mut first = 0;
    let mut base = 0;
    for &len in lens {
        let end = base + len;
        while spans.get(first).is_some_and(|s| s.end <= base) {
            first += 1;
        }
        let part: Vec<Range<usize>> = spans[first..]
            .iter()
            .take_while(|s| s.start < end)
            .map(|s| s.start.max(base) - base..s.end.min(end) - base)
            .filter(|r| !r.is_empty())
            .collect();
        out.push(part);
        base = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_merges_overlapping_and_touching_ranges() {
        assert_eq!(union(vec![5..8, 0..2, 1..3, 8..9, 4..4]), vec![0..3, 5..9]);
    }

    #[test]
    fn subtract_cuts_holes_out() {
        assert_eq!(
            subtract(vec![0..10, 12..20], &[2..4, 9..13, 15..16]),
            vec![0..2, 4..9, 13..15, 16..20]
        );
    }

    #[test]
    fn spans_are_split_at_part_boundaries() {
        assert_eq!(
            split_at_parts(&[1..3, 4..9, 10..11], &[5, 3, 4]),
            vec![vec![1..3, 4..5], vec![0..3], vec![0..1, 2..3],]
        );
    }
}
