//! The continuation of a turn an earlier import already wrote: what a grown session file
//! added to it.

use transcript_domain::{MessagePayload, Usage};

use crate::index::{TailDigest, block_digest};

/// `new` without what `old` (the digest of a turn already written) holds: blocks `old` has
/// are dropped (each matched once, by digest), usage is what each count grew by.
pub(super) fn continuation(new: &MessagePayload, old: &TailDigest) -> Option<MessagePayload> {
    let mut unmatched: Vec<&str> = old.blocks.iter().map(String::as_str).collect();
    let mut blocks = Vec::new();
    for b in &new.blocks {
        let digest = block_digest(b)?;
        match unmatched.iter().position(|o| *o == digest) {
            Some(i) => {
                unmatched.remove(i);
            }
            None => blocks.push(b.clone()),
        }
    }
    let old_usage: Usage = old.usage.clone().unwrap_or_default();
    let usage = new.usage.as_ref().map(|u| {
        let d = |n: Option<u64>, o: Option<u64>| n.map(|n| n.saturating_sub(o.unwrap_or(0)));
        Usage {
            input_tokens: d(u.input_tokens, old_usage.input_tokens),
            output_tokens: d(u.output_tokens, old_usage.output_tokens),
            cache_read_tokens: d(u.cache_read_tokens, old_usage.cache_read_tokens),
            cache_write_tokens: d(u.cache_write_tokens, old_usage.cache_write_tokens),
            reasoning_tokens: d(u.reasoning_tokens, old_usage.reasoning_tokens),
            cost_usd: match (u.cost_usd, old_usage.cost_usd) {
                (Some(n), Some(o)) if n > o => Some(n - o),
                (Some(_), Some(_)) => None,
                (n, None) => n,
                (None, _) => None,
            },
            ..Default::default()
        }
    });
    let grew = usage
        .as_ref()
        .is_some_and(|u| *u != Usage::default() && !zero(u));
    if blocks.is_empty() && !grew {
        return None;
    }
    Some(MessagePayload {
        role: new.role,
        blocks,
        provider: new.provider.clone(),
        model: new.model.clone(),
        usage: usage.filter(|u| !zero(u)),
        request_id: new.request_id.clone(),
    })
}

fn zero(u: &Usage) -> bool {
    [
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
    ]
    .iter()
    .all(|c| c.unwrap_or(0) == 0)
        && u.cost_usd.is_none()
}
