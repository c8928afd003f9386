//! Line diffs of two texts (outputs, agent text, thinking) as unified-diff hunks, by
//! `similar`'s Myers diff with 3 lines of context.

use similar::{ChangeTag, TextDiff};

use crate::model::{DiffLine, Hunk, LineOp};

/// Texts longer than this many lines on either side get no line diff (both values are still
/// in the change): the diff's work grows with the product of the lengths.
pub const MAX_DIFF_LINES: usize = 10_000;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The hunks turning `a` into `b`; empty when they are equal, when both are one line (the
/// two values say it all) or when either is longer than [`MAX_DIFF_LINES`].
pub fn hunks(a: &str, b: &str) -> Vec<Hunk> {
    if a == b || (!a.contains('\n') && !b.contains('\n')) {
        return Vec::new();
    }
    if a.lines().count() > MAX_DIFF_LINES || b.lines().count() > MAX_DIFF_LINES {
        return Vec::new();
    }
    let diff = TextDiff::from_lines(a, b);
    diff.grouped_ops(CONTEXT)
        .iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let (a_range, b_range) = (
                first.old_range().start..last.old_range().end,
                first.new_range().start..last.new_range().end,
            );
            let lines = group
                .iter()
                .flat_map(|op| diff.iter_changes(op))
                .map(|change| DiffLine {
                    op: match change.tag() {
                        ChangeTag::Equal => LineOp::Equal,
                        ChangeTag::Delete => LineOp::Delete,
                        ChangeTag::Insert => LineOp::Insert,
                    },
                    text: change
                        .value()
                        .strip_suffix('\n')
                        .map(|l| l.strip_suffix('\r').unwrap_or(l))
                        .unwrap_or(change.value())
                        .to_owned(),
                })
                .collect();
            Some(Hunk {
                a_start: a_range.start as u64 + 1,
                a_lines: a_range.len() as u64,
                b_start: b_range.start as u64 + 1,
                b_lines: b_range.len() as u64,
                lines,
            })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_is_one_hunk_with_context() {
        let a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        let h = hunks(a, b);
        assert_eq!(h.len(), 1);
        assert_eq!((h[0].a_start, h[0].a_lines, h[0].b_lines), (2, 7, 7));
        let ops: Vec<(LineOp, &str)> = h[0].lines.iter().map(|l| (l.op, l.text.as_str())).collect();
        assert!(ops.contains(&(LineOp::Delete, "5")));
        assert!(ops.contains(&(LineOp::Insert, "five")));
        assert_eq!(ops.iter().filter(|(op, _)| *op == LineOp::Equal).count(), 6);
    }

    #[test]
    fn equal_single_line_and_huge_texts_get_no_hunks() {
        assert!(hunks("a\nb", "a\nb").is_empty());
        assert!(hunks("a", "b").is_empty());
        let big = "x\n".repeat(MAX_DIFF_LINES + 1);
        assert!(hunks(&big, "y\n").is_empty());
        assert_eq!(hunks("a", "a\nb").len(), 1);
    }
}
