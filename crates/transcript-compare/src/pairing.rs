//! Tool calls of one turn meet as a set, not by position: an agent CLI runs parallel calls at
//! once and hands their results back in the order they finished (Claude Code returns the
//! results of two parallel calls in either order), so A's calls are paired with B's by name
//! and arguments (numbers as numbers), and results follow the calls they answer. What is
//! left unpaired on both sides meets by position, so a changed argument is still one change.
//!
//! Both lists keep their shape: B's blocks are reordered only among B's own `tool_use` slots
//! and among its own `tool_result` slots, and then compared with A's position by position.

use std::collections::HashMap;

use serde_json::Value;

use crate::record::{BlockRecord, ToolCallRecord};
use crate::values::canonical;

/// The key a call is paired by: its name and its arguments with numbers in one form.
pub fn call_key(name: &str, input: &Value) -> String {
    format!("{name}\u{0}{}", canonical(input))
}

/// For each of A's items (its key, when it has one) the index of B's item it meets, and B's
/// remaining items after: a permutation of `0..b_keys.len()`. Equal keys meet first, in
/// order; then each of A's unmet items takes B's next unmet one.
fn permutation(a_keys: &[Option<String>], b_keys: &[Option<String>]) -> Vec<usize> {
    let mut free: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, k) in b_keys.iter().enumerate().rev() {
        if let Some(k) = k {
            free.entry(k.as_str()).or_default().push(i);
        }
    }
    let mut taken = vec![false; b_keys.len()];
    let met: Vec<Option<usize>> = a_keys
        .iter()
        .map(|k| {
            let i = free.get_mut(k.as_deref()?)?.pop()?;
            taken[i] = true;
            Some(i)
        })
        .collect();
    let mut rest = (0..b_keys.len()).filter(|i| !taken[*i]).collect::<Vec<_>>();
    rest.reverse();
    let mut order: Vec<usize> = met
        .into_iter()
        .filter_map(|m| m.or_else(|| rest.pop()))
        .collect();
    order.extend(rest.into_iter().rev());
    order
}

/// B's blocks of one turn, reordered among its own tool slots so that they meet A's: each
/// `tool_use` slot holds the call of B paired with A's call at that slot, each `tool_result`
/// slot the result of the call paired with the call A's result answers.
pub fn pair_blocks<'b>(a: &[BlockRecord], b: &'b [BlockRecord]) -> Vec<&'b BlockRecord> {
    let uses = |blocks: &[BlockRecord]| -> Vec<(usize, String, String)> {
        blocks
            .iter()
            .enumerate()
            .filter_map(|(i, blk)| match blk {
                BlockRecord::ToolUse { name, id, input } => {
                    Some((i, id.clone(), call_key(name, input)))
                }
                _ => None,
            })
            .collect()
    };
    let results = |blocks: &[BlockRecord]| -> Vec<(usize, String)> {
        blocks
            .iter()
            .enumerate()
            .filter_map(|(i, blk)| match blk {
                BlockRecord::ToolResult { id, .. } => Some((i, id.clone())),
                _ => None,
            })
            .collect()
    };
    let (a_uses, b_uses) = (uses(a), uses(b));
    let use_order = permutation(
        &a_uses.iter().map(|u| Some(u.2.clone())).collect::<Vec<_>>(),
        &b_uses.iter().map(|u| Some(u.2.clone())).collect::<Vec<_>>(),
    );
    // A's call id → the id of B's call it met.
    let partner: HashMap<&str, &str> = a_uses
        .iter()
        .zip(&use_order)
        .filter_map(|(au, bi)| Some((au.1.as_str(), b_uses.get(*bi)?.1.as_str())))
        .collect();
    let (a_results, b_results) = (results(a), results(b));
    let result_order = permutation(
        &a_results
            .iter()
            .map(|(_, id)| partner.get(id.as_str()).map(|p| (*p).to_owned()))
            .collect::<Vec<_>>(),
        &b_results
            .iter()
            .map(|(_, id)| Some(id.clone()))
            .collect::<Vec<_>>(),
    );
    let mut out: Vec<&BlockRecord> = b.iter().collect();
    for (slot, from) in b_uses.iter().zip(&use_order) {
        if let Some(src) = b_uses.get(*from) {
            out[slot.0] = &b[src.0];
        }
    }
    for (slot, from) in b_results.iter().zip(&result_order) {
        if let Some(src) = b_results.get(*from) {
            out[slot.0] = &b[src.0];
        }
    }
    out
}

/// B's router calls reordered to meet A's: calls made after the same assistant turn are paired
/// by name and arguments, whatever order they ran in; the rest by position.
pub fn pair_calls<'b>(a: &[&ToolCallRecord], b: &[&'b ToolCallRecord]) -> Vec<&'b ToolCallRecord> {
    let key = |c: &ToolCallRecord| Some(format!("{}\u{0}{}", c.turn, call_key(&c.name, &c.input)));
    let order = permutation(
        &a.iter().map(|c| key(c)).collect::<Vec<_>>(),
        &b.iter().map(|c| key(c)).collect::<Vec<_>>(),
    );
    order
        .into_iter()
        .filter_map(|i| b.get(i).copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<Option<String>> {
        k.iter().map(|s| Some((*s).to_owned())).collect()
    }

    #[test]
    fn equal_keys_meet_and_the_rest_meet_by_position() {
        assert_eq!(permutation(&keys(&["x", "y"]), &keys(&["y", "x"])), [1, 0]);
        assert_eq!(
            permutation(&keys(&["x", "q", "y"]), &keys(&["y", "r", "x"])),
            [2, 1, 0]
        );
        assert_eq!(
            permutation(&keys(&["x"]), &keys(&["a", "b", "x"])),
            [2, 0, 1]
        );
        assert_eq!(permutation(&keys(&["x", "x"]), &keys(&["x", "x"])), [0, 1]);
        assert_eq!(permutation(&keys(&["a", "b"]), &keys(&["c"])), [0]);
        assert_eq!(permutation(&[None, None], &keys(&["c", "d"])), [0, 1]);
    }
}
