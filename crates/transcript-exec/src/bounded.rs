//! Bounded values: what the exec layer hands the recorder never makes a
//! line over [`transcript_domain::MAX_LINE_BYTES`].
//!
//! Strings follow the workspace's one truncation rule,
//! [`transcript_domain::truncate::truncate_str`]: the marker fits inside
//! the limit (a recorded line must fit):
//!
//! * a string longer than the limit keeps the longest prefix, cut on a
//!   character boundary, that leaves room for `…[truncated: N bytes,
//!   sha256 H]` (N and H of the original string's UTF-8; a shorter marker
//!   when the limit cannot hold that one), so the result, marker included,
//!   is never longer than the limit and bounding is idempotent;
//! * an array or object over the limit is bounded member by member; if it
//!   is still over twice the limit it becomes
//!   `{"_truncated": true, "original_size_bytes": N, "sha256": H,
//!   "preview": <first 256 chars of its JSON>}` (N and H over its compact
//!   JSON, or over the recorded bytes of a verbatim value).
//!
//! Applied by the [`crate::Emitter`] to step results and errors, tool
//! inputs, outputs and errors, and every text-like field of message blocks
//! (text, thinking, stream, command, tool_use input, tool_result content).
//! If a payload bounded that way would still not fit a line (thousands of
//! blocks; on a storage of smaller lines, such as NATS messages, a few large
//! blocks: [`bound_payload_within`]), it is bounded again from the original
//! with smaller limits.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use transcript_domain::text::lower_hex;
use transcript_domain::truncate;
use transcript_domain::{BlockBody, MAX_LINE_BYTES, Payload, RawJson};

/// Default per-value limit (1 MiB).
pub const DEFAULT_MAX_VALUE_BYTES: usize = 1 << 20;

/// Characters of JSON kept in a stub's `preview`.
pub const PREVIEW_CHARS: usize = 256;

/// Room left on a line for the envelope (seq, ids, path, timestamp, keys).
const ENVELOPE_RESERVE: usize = 64 * 1024;

/// The marker appended to a cut string ([`transcript_domain::truncate::marker`]).
pub fn marker(total: u64, sha256: &str) -> String {
    truncate::marker(usize::try_from(total).unwrap_or(usize::MAX), sha256)
}

/// Lowercase hex sha256 of `bytes` (the domain's one hex rendering).
pub fn sha256_hex(bytes: &[u8]) -> String {
    lower_hex(&Sha256::digest(bytes))
}

/// `s` cut to fit `limit` bytes with the marker, or `None` when it fits
/// ([`truncate::truncate_str`]).
pub fn bound_str(s: &str, limit: usize) -> Option<String> {
    truncate::truncate_str(s, limit, &sha256_hex)
}

fn stub(json_text: &str) -> Value {
    json!({
        "_truncated": true,
        "original_size_bytes": json_text.len(),
        "sha256": sha256_hex(json_text.as_bytes()),
        "preview": json_text.chars().take(PREVIEW_CHARS).collect::<String>(),
    })
}

/// `value` bounded to `limit` (see the module docs), or `None` when it fits.
pub fn bound_value(value: &Value, limit: usize) -> Option<Value> {
    bound_with_text(value, None, limit)
}

/// `original` is the value's recorded JSON when it was given verbatim.
fn bound_with_text(value: &Value, original: Option<&str>, limit: usize) -> Option<Value> {
    match value {
        Value::String(s) => bound_str(s, limit).map(Value::String),
        Value::Array(_) | Value::Object(_) => {
            if json_len(value) <= limit {
                return None;
            }
            let bounded = match value {
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .map(|v| bound_value(v, limit).unwrap_or_else(|| v.clone()))
                        .collect(),
                ),
                Value::Object(map) => Value::Object(
                    map.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                bound_value(v, limit).unwrap_or_else(|| v.clone()),
                            )
                        })
                        .collect::<Map<_, _>>(),
                ),
                _ => return None,
            };
            if json_len(&bounded) <= limit.saturating_mul(2) {
                Some(bounded)
            } else {
                Some(match original {
                    Some(text) => stub(text),
                    None => stub(&value.to_string()),
                })
            }
        }
        // Numbers, booleans and null are small.
        _ => None,
    }
}

/// `raw` bounded to `limit`, or `None` when it fits (verbatim values are
/// only parsed when they are over the limit).
pub fn bound_raw(raw: &RawJson, limit: usize) -> Option<RawJson> {
    if raw.len() <= limit {
        return None;
    }
    let value = raw.try_to_value().ok()?;
    let bounded = bound_with_text(&value, Some(raw.get()), limit)?;
    RawJson::from_value(&bounded).ok()
}

/// Compact JSON length of `value`, without building the text.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    match serde_json::to_writer(&mut c, value) {
        Ok(()) => c.0,
        Err(_) => usize::MAX,
    }
}

/// Encoded length of `s` as a JSON string (quotes and escapes included).
fn json_str_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

fn bound_string_in_place(s: &mut String, limit: usize) {
    if let Some(b) = bound_str(s, limit) {
        *s = b;
    }
}

fn bound_raw_in_place(raw: &mut RawJson, limit: usize) {
    if let Some(b) = bound_raw(raw, limit) {
        *raw = b;
    }
}

fn bound_each(payload: &mut Payload, limit: usize) {
    if let Some(p) = payload.as_step_mut() {
        if let Some(e) = &mut p.error {
            bound_string_in_place(e, limit);
        }
        if let Some(r) = &mut p.result {
            bound_raw_in_place(r, limit);
        }
    }
    if let Some(m) = payload.as_message_mut() {
        for block in &mut m.blocks {
            match &mut block.body {
                BlockBody::Text { text } | BlockBody::Stream { text } => {
                    bound_string_in_place(text, limit)
                }
                BlockBody::Thinking { thinking } => bound_string_in_place(thinking, limit),
                BlockBody::Command { command } => bound_string_in_place(command, limit),
                BlockBody::ToolUse { tool_input, .. } => bound_raw_in_place(tool_input, limit),
                BlockBody::ToolResult { tool_content, .. } => {
                    bound_raw_in_place(tool_content, limit)
                }
            }
        }
    }
    if let Some(p) = payload.as_tool_mut() {
        bound_raw_in_place(&mut p.input, limit);
        bound_raw_in_place(&mut p.output, limit);
        if let Some(e) = &mut p.error {
            bound_string_in_place(e, limit);
        }
    }
}

/// An upper estimate of the payload's encoded size.
fn payload_len(payload: &Payload) -> usize {
    let opt = |s: &Option<String>| s.as_deref().map_or(0, json_str_len);
    if let Some(p) = payload.as_step() {
        return 64
            + json_str_len(&p.name)
            + json_str_len(&p.kind)
            + opt(&p.error)
            + p.result.as_ref().map_or(0, RawJson::len);
    }
    if let Some(m) = payload.as_message() {
        let blocks: usize = m
            .blocks
            .iter()
            .map(|b| {
                64 + match &b.body {
                    BlockBody::Text { text } | BlockBody::Stream { text } => json_str_len(text),
                    BlockBody::Thinking { thinking } => json_str_len(thinking),
                    BlockBody::Command { command } => json_str_len(command),
                    BlockBody::ToolUse {
                        tool_name,
                        tool_id,
                        tool_input,
                    } => json_str_len(tool_name) + json_str_len(tool_id) + tool_input.len(),
                    BlockBody::ToolResult {
                        tool_id,
                        tool_content,
                    } => json_str_len(tool_id) + tool_content.len(),
                }
            })
            .sum();
        return 256 + opt(&m.provider) + opt(&m.model) + opt(&m.request_id) + blocks;
    }
    if let Some(p) = payload.as_tool() {
        return 96
            + json_str_len(&p.name)
            + json_str_len(&p.call_id)
            + p.input.len()
            + p.output.len()
            + opt(&p.error);
    }
    // `null` run payloads, which our writers never produce.
    64
}

/// Bounds every large value of `payload` to `limit`; when the result would
/// still not fit a line, bounds the original again with smaller limits.
pub fn bound_payload(payload: &mut Payload, limit: usize) {
    bound_payload_within(payload, limit, MAX_LINE_BYTES);
}

/// [`bound_payload`] for lines of at most `max_line` bytes (capped at
/// [`MAX_LINE_BYTES`]; a storage whose messages are smaller, such as a NATS
/// server's `max_payload`): the envelope's room (64 KiB, at most a quarter of
/// `max_line`) is kept, and a payload of many values, each within `limit` but
/// too large together, is bounded again with smaller limits until it fits.
pub fn bound_payload_within(payload: &mut Payload, limit: usize, max_line: usize) {
    let max_line = max_line.min(MAX_LINE_BYTES);
    let budget = max_line - ENVELOPE_RESERVE.min(max_line / 4);
    let len = payload_len(payload);
    if len <= limit.min(budget) {
        return;
    }
    if len <= budget {
        // Bounding only shrinks: it fits, no copy of the original needed.
        bound_each(payload, limit);
        return;
    }
    let original = payload.clone();
    bound_each(payload, limit);
    for smaller in [limit / 16, 4096, 256, 0] {
        if payload_len(payload) <= budget {
            return;
        }
        *payload = original.clone();
        bound_each(payload, smaller.min(limit));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use transcript_domain::{ContentBlock, Fidelity, MessagePayload, Role};

    #[test]
    fn strings_fit_the_limit_with_their_marker_and_bounding_is_idempotent() {
        let s = "é".repeat(1000);
        let b = bound_str(&s, 300).unwrap();
        assert!(b.len() <= 300);
        assert!(b.ends_with(&marker(2000, &sha256_hex(s.as_bytes()))));
        assert_eq!(bound_str(&b, 300), None);
        assert_eq!(bound_str("short", 300), None);
        // A limit too small for any marker but the ellipsis.
        assert_eq!(bound_str(&s, 3).unwrap(), "…");
    }

    /// One truncation rule (#32 item 4, `transcript_domain::truncate`): the
    /// marker takes exactly the room it needs, so a cut string is as long as
    /// the limit allows (not 128 bytes short of it), and a limit too small
    /// for the full marker gets a shorter one instead of a result over it.
    #[test]
    fn a_cut_string_keeps_all_the_room_the_marker_leaves() {
        let s = "x".repeat(2000);
        let m = marker(2000, &sha256_hex(s.as_bytes()));
        let b = bound_str(&s, 300).unwrap();
        assert_eq!(b, format!("{}{m}", "x".repeat(300 - m.len())));
        let small = bound_str(&s, 40).unwrap();
        assert_eq!(small.len(), 40, "{small}");
        assert!(small.ends_with("…[truncated: 2000 bytes]"), "{small}");
    }

    #[test]
    fn containers_bound_members_then_become_stubs() {
        let big = "x".repeat(5000);
        let v = json!({"stdout": big, "exit_code": 0});
        let b = bound_value(&v, 1000).unwrap();
        assert_eq!(b["exit_code"], 0);
        assert!(b["stdout"].as_str().unwrap().len() <= 1000);
        let many = Value::Array((0..100).map(|i| json!(format!("{i:0>50}"))).collect());
        let text = many.to_string();
        let s = bound_value(&many, 1000).unwrap();
        assert_eq!(s["_truncated"], true);
        assert_eq!(s["original_size_bytes"], text.len());
        assert_eq!(s["sha256"], sha256_hex(text.as_bytes()));
        assert_eq!(bound_value(&json!({"a": 1}), 1000), None);
        let raw = RawJson::from_json(format!("[ {} ]", "1, ".repeat(999) + "1")).unwrap();
        let stubbed = bound_raw(&raw, 100).unwrap().to_value();
        assert_eq!(stubbed["sha256"], sha256_hex(raw.get().as_bytes()));
    }

    #[test]
    fn a_payload_of_many_blocks_still_fits_a_line() {
        let block = "y".repeat(900_000);
        let blocks = (0..40)
            .map(|_| ContentBlock::text(Fidelity::Router, block.clone()))
            .collect();
        let mut p = Payload::MessageAssistant(MessagePayload::new(Role::Assistant, blocks));
        bound_payload(&mut p, DEFAULT_MAX_VALUE_BYTES);
        assert!(payload_len(&p) <= MAX_LINE_BYTES - ENVELOPE_RESERVE);
        let m = p.as_message().unwrap();
        assert_eq!(m.blocks.len(), 40);
        match &m.blocks[0].body {
            BlockBody::Text { text } => {
                assert!(text.ends_with(&marker(900_000, &sha256_hex(block.as_bytes()))))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_smaller_line_budget_cuts_many_values_that_fit_the_value_cap() {
        // Four values at a NATS cap (1 MiB max_payload), 6x once escaped: 2 MB together.
        let block = "\u{1}".repeat(87_040);
        let blocks = (0..4)
            .map(|_| ContentBlock::text(Fidelity::Router, block.clone()))
            .collect();
        let mut p = Payload::MessageAssistant(MessagePayload::new(Role::Assistant, blocks));
        let mut on_files = p.clone();
        bound_payload(&mut on_files, 87_040);
        assert_eq!(
            on_files, p,
            "within the value cap and the file line: kept whole"
        );
        bound_payload_within(&mut p, 87_040, 1 << 20);
        assert!(payload_len(&p) <= (1 << 20) - ENVELOPE_RESERVE);
        for b in &p.as_message().unwrap().blocks {
            match &b.body {
                BlockBody::Text { text } => assert!(text.contains("…[truncated: 87040 bytes")),
                other => panic!("{other:?}"),
            }
        }
    }
}
