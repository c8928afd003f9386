//! Bounded output (idea from seed 002): tool inputs and outputs larger than
//! a byte limit are shortened. Strings are cut on a UTF-8 boundary and
//! marked; other values become a stub that keeps the original's size and
//! sha256 so it can still be matched against the transcript.
//!
//! The marker and the stub are the ones the exec layer writes (`transcript-exec`'s
//! `bounded.rs`), but the cut differs: here `--truncate-outputs N` keeps up to N bytes of a
//! string and appends the marker after them (a reader asked for N bytes of content), while
//! exec reserves room for the marker inside its limit (a recorded line must fit). One rule
//! for both would change either the export documents or the transcripts (#32 item 4).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use transcript_domain::RawJson;

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
/// * A string longer than `limit` bytes is cut at the last character
///   boundary at or below `limit` and followed by
///   `…[truncated: N bytes, sha256 H]` (N and H of the original string's UTF-8).
/// * Any other value whose compact JSON exceeds `limit` bytes becomes
///   `{"_truncated": true, "original_size_bytes": N, "sha256": H,
///   "preview": <first 256 chars of the JSON>}`, where H is the sha256 of
///   the original compact serialization.
/// * Values within the limit are returned unchanged.
pub fn truncate_value(value: &Value, limit: usize) -> Value {
    match value {
        Value::String(s) => {
            if s.len() <= limit {
                return value.clone();
            }
            let mut cut = limit;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            Value::String(format!(
                "{}…[truncated: {} bytes, sha256 {}]",
                &s[..cut],
                s.len(),
                sha256_hex(s.as_bytes())
            ))
        }
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
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_cut_on_char_boundary_and_marked() {
        // "é" is 2 bytes: a limit landing inside it cuts before it.
        let v = Value::String("aé".repeat(4)); // 12 bytes
        let t = truncate_value(&v, 2);
        let s = t.as_str().unwrap();
        assert!(s.starts_with("a…[truncated: 12 bytes, sha256 "), "{s}");
        let t = truncate_value(&v, 3);
        assert!(t.as_str().unwrap().starts_with("aé…[truncated"));
        // Just under / at / over the limit.
        assert_eq!(truncate_value(&v, 12), v);
        assert_eq!(truncate_value(&v, 13), v);
        assert_ne!(truncate_value(&v, 11), v);
        // 4-byte characters.
        let crab = Value::String("🦀🦀".into());
        assert!(
            truncate_value(&crab, 5)
                .as_str()
                .unwrap()
                .starts_with("🦀…")
        );
        assert!(truncate_value(&crab, 3).as_str().unwrap().starts_with("…"));
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
        let s = RawJson::string("hello world");
        assert!(
            truncate_raw(&s, Some(5))
                .as_str()
                .unwrap()
                .starts_with("hello…")
        );
    }

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
