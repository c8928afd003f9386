//! Bounded output (idea from seed 002): tool inputs and outputs larger than
//! a byte limit are shortened. Strings are cut by the domain's one rule
//! ([`transcript_domain::truncate`]: the result, marker included, is never
//! longer than the limit, cut on a character boundary, the marker naming the
//! original's size and sha256); other values become a stub that keeps the
//! original's size and sha256 so it can still be matched against the
//! transcript. The marker and the stub are the ones the exec layer writes
//! (`transcript-exec`'s `bounded.rs`).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use transcript_domain::RawJson;
use transcript_domain::truncate::truncate_str;

/// Characters of preview kept in a stub.
pub const PREVIEW_CHARS: usize = 256;

/// [`truncate_value`] for a value as recorded: sizes and hashes of
/// non-string values are taken over the recorded bytes, so a stub can be
/// matched against the transcript line it came from.
pub fn truncate_raw(raw: &RawJson, limit: Option<usize>) -> Value {
    let value = raw.to_value();
    let Some(limit) = limit else {
        return value;
    };
    match &value {
        Value::String(_) => truncate_value(&value, limit),
        _ if raw.get().len() <= limit => value,
        _ => stub(raw.get()),
    }
}

fn stub(text: &str) -> Value {
    json!({
        "_truncated": true,
        "original_size_bytes": text.len(),
        "sha256": sha256_hex(text.as_bytes()),
        "preview": text.chars().take(PREVIEW_CHARS).collect::<String>(),
    })
}

/// Shortens `value` when its serialized form exceeds `limit` bytes.
///
/// * A string longer than `limit` bytes is cut by
///   [`transcript_domain::truncate::truncate_str`]: the longest prefix on a
///   character boundary that leaves room for `…[truncated: N bytes, sha256 H]`
///   (N and H of the original string's UTF-8) within `limit` bytes.
/// * Any other value whose compact JSON exceeds `limit` bytes becomes
///   `{"_truncated": true, "original_size_bytes": N, "sha256": H,
///   "preview": <first 256 chars of the JSON>}`, where H is the sha256 of
///   the original compact serialization.
/// * Values within the limit are returned unchanged.
pub fn truncate_value(value: &Value, limit: usize) -> Value {
    match value {
        Value::String(s) => match truncate_str(s, limit, &sha256_hex) {
            Some(cut) => Value::String(cut),
            None => value.clone(),
        },
        other => {
            let text = other.to_string();
            if text.len() <= limit {
                return value.clone();
            }
            stub(&text)
        }
    }
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    transcript_domain::text::lower_hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_cut_within_the_limit_marker_included() {
        // 300 bytes of "aé" pairs (3 bytes each): every limit below them cuts.
        let original = "aé".repeat(100);
        let hash = sha256_hex(original.as_bytes());
        let full = format!("…[truncated: 300 bytes, sha256 {hash}]");
        let v = Value::String(original.clone());
        for limit in 0..300 {
            let t = truncate_value(&v, limit);
            let s = t.as_str().unwrap();
            assert!(s.len() <= limit, "{limit}: {} bytes", s.len());
            if limit >= full.len() {
                assert!(s.ends_with(&full), "{s}");
                let kept = &s[..s.len() - full.len()];
                assert!(original.starts_with(kept));
                // The longest prefix that fits: one more character would not.
                let next = original[kept.len()..].chars().next().unwrap().len_utf8();
                assert!(kept.len() + next + full.len() > limit);
            }
        }
        // Just under / at / over the limit.
        assert_eq!(truncate_value(&v, 300), v);
        assert_eq!(truncate_value(&v, 301), v);
        assert_ne!(truncate_value(&v, 299), v);
        // A limit landing inside "é" cuts before it.
        let t = truncate_value(&v, full.len() + 2);
        assert_eq!(t.as_str().unwrap(), format!("a{full}"));
        // 4-byte characters.
        let crab = Value::String("🦀".repeat(40));
        // 109 = two crabs (8 bytes), a third one's first byte and the 98-byte marker.
        let t = truncate_value(&crab, 109);
        assert!(
            t.as_str()
                .unwrap()
                .starts_with("🦀🦀…[truncated: 160 bytes"),
            "{t}"
        );
    }

    #[test]
    fn other_values_become_stubs_with_size_and_hash() {
        let v = json!({"files": ["a", "b"], "nested": {"deep": [1, 2, 3]}});
        let text = v.to_string();
        assert_eq!(truncate_value(&v, text.len()), v);
        let stub = truncate_value(&v, text.len() - 1);
        assert_eq!(stub["_truncated"], true);
        assert_eq!(stub["original_size_bytes"], text.len());
        assert_eq!(stub["sha256"], sha256_hex(text.as_bytes()));
        assert_eq!(stub["preview"], text);
        let big = Value::Array((0..1000).map(Value::from).collect());
        let stub = truncate_value(&big, 10);
        assert_eq!(
            stub["preview"].as_str().unwrap().chars().count(),
            PREVIEW_CHARS
        );
        assert_eq!(truncate_value(&json!(12345), 3)["_truncated"], true);
        assert_eq!(truncate_value(&Value::Null, 4), Value::Null);
    }

    #[test]
    fn raw_values_hash_the_recorded_bytes() {
        // RawJson is compact by construction: the recorded bytes have no spaces.
        let raw = RawJson::from_json(r#"{"z": 1, "a": [2]}"#.to_owned()).unwrap();
        assert_eq!(truncate_raw(&raw, None), json!({"a": [2], "z": 1}));
        let stub = truncate_raw(&raw, Some(4));
        assert_eq!(stub["original_size_bytes"], 15);
        assert_eq!(stub["sha256"], sha256_hex(br#"{"z":1,"a":[2]}"#));
        assert_eq!(truncate_raw(&raw, Some(15)), json!({"a": [2], "z": 1}));
        let s = RawJson::string(&"hello world ".repeat(20));
        let cut = truncate_raw(&s, Some(120));
        let cut = cut.as_str().unwrap();
        // 22 bytes of text and the 98-byte marker: exactly the limit.
        assert!(
            cut.starts_with("hello world hello worl…[truncated: 240 bytes"),
            "{cut}"
        );
        assert_eq!(cut.len(), 120);
    }

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
