//! Aligning two lists of sibling step executions: a step of A and a step of B are the same
//! execution when they have the same path, iteration and occurrence (the n-th sibling of that
//! path and iteration). Positions do not count, so parallel branches that started in another
//! order still meet.

use std::collections::HashMap;

use crate::record::StepRecord;

/// One aligned position.
#[derive(Debug, Clone, Copy)]
pub enum Pair<'a> {
    /// In both.
    Both(&'a StepRecord, &'a StepRecord, u64),
    /// Only in A.
    OnlyA(&'a StepRecord, u64),
    /// Only in B.
    OnlyB(&'a StepRecord, u64),
}

type Key<'a> = (&'a str, u64, u64);

/// Each step with its occurrence among the siblings of the same path and iteration.
fn keyed(steps: &[StepRecord]) -> Vec<(Key<'_>, &StepRecord)> {
    let mut seen: HashMap<(&str, u64), u64> = HashMap::new();
    steps
        .iter()
        .map(|s| {
            let n = seen.entry((s.path.as_str(), s.iteration)).or_default();
            let key = (s.path.as_str(), s.iteration, *n);
            *n += 1;
            (key, s)
        })
        .collect()
}

/// A's steps in A's order, each paired with B's step of the same key; B's steps without a
/// partner come right after the partnered step that precedes them in B (first when none does).
pub fn align<'a>(a: &'a [StepRecord], b: &'a [StepRecord]) -> Vec<Pair<'a>> {
    let a_keyed = keyed(a);
    let b_keyed = keyed(b);
    let b_index: HashMap<Key<'_>, &StepRecord> = b_keyed.iter().copied().collect();
    let a_keys: std::collections::HashSet<Key<'_>> = a_keyed.iter().map(|(k, _)| *k).collect();
    let mut out: Vec<Pair<'a>> = a_keyed
        .iter()
        .map(|(key, s)| match b_index.get(key) {
            Some(other) => Pair::Both(s, other, key.2),
            None => Pair::OnlyA(s, key.2),
        })
        .collect();
    // Insert B-only steps after their predecessor in B.
    let mut anchor: Option<Key<'_>> = None;
    let mut inserted_after: HashMap<Option<Key<'_>>, usize> = HashMap::new();
    for (key, s) in &b_keyed {
        if a_keys.contains(key) {
            anchor = Some(*key);
            continue;
        }
        let base = match anchor {
            Some(k) => out
                .iter()
                .position(
                    |p| matches!(p, Pair::Both(x, _, n) if (x.path.as_str(), x.iteration, *n) == k),
                )
                .map_or(out.len(), |i| i + 1),
            None => 0,
        };
        let offset = inserted_after.entry(anchor).or_default();
        let at = (base + *offset).min(out.len());
        out.insert(at, Pair::OnlyB(s, key.2));
        *offset += 1;
    }
    out
}
