//! The redaction corpus (`fixtures/redaction/corpus.json`, issue 28 item 4):
//! every form a secret was shown to slip through in, as free text and as a
//! structured value, must come out masked; ordinary text must come out
//! unchanged. The same corpus drives the attacker's test through the binary
//! (`crates/transcript-cli/tests/redaction_attack.rs`).
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use transcript_domain::RawJson;
use transcript_redact::Redactor;

const CORPUS: &str = include_str!("../../../fixtures/redaction/corpus.json");

fn corpus() -> Value {
    serde_json::from_str(CORPUS).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn every_leaking_form_is_masked_in_text() {
    let r = Redactor::builtin();
    let mut failures = Vec::new();
    for case in corpus()["leak"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let text = case["text"].as_str().unwrap();
        let before = r.masks_made();
        let masked = r.mask_text(text);
        for gone in strings(&case["gone"]) {
            if masked.contains(&gone) {
                failures.push(format!("{name}: {gone:?} survives in {masked:?}"));
            }
        }
        for kept in strings(&case["kept"]) {
            if !masked.contains(&kept) {
                failures.push(format!("{name}: {kept:?} was lost from {masked:?}"));
            }
        }
        if r.masks_made() == before {
            failures.push(format!("{name}: no mask counted"));
        }
        // Idempotent on its own output.
        if r.mask_text(&masked) != masked {
            failures.push(format!("{name}: masking again changed {masked:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_leaking_form_is_masked_in_structured_values() {
    let r = Redactor::builtin();
    let mut failures = Vec::new();
    for case in corpus()["leak"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let text = case["text"].as_str().unwrap();
        // As a string value, as an array item, and as an object key.
        let mut values = vec![
            serde_json::json!({ "output": text }),
            serde_json::json!([text]),
            serde_json::json!({ text: 1 }),
        ];
        if let Some(json) = case.get("json") {
            values.push(json.clone());
        }
        for value in values {
            let raw = RawJson::from_value(&value).unwrap();
            let masked = r.mask_raw(&raw);
            let line = masked.get().to_owned();
            for gone in strings(&case["gone"]) {
                // Searched in the JSON text and in the decoded strings: the
                // escaped form (`\n`, `\"`) must not hide a survivor.
                let decoded = decoded_strings(&masked.to_value());
                if line.contains(&gone) || decoded.iter().any(|s| s.contains(&gone)) {
                    failures.push(format!("{name}: {gone:?} survives in {line}"));
                }
            }
            if r.mask_raw(&masked).get() != masked.get() {
                failures.push(format!("{name}: masking again changed {line}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every string of a value, keys included.
fn decoded_strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(decoded_strings).collect(),
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(decoded_strings(v)))
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn secrets_as_keys_keep_every_entry() {
    // Two secret keys of one kind and length mask to the same text: both
    // entries must survive, neither key may.
    let r = Redactor::builtin();
    let a = "sk-ant-api03-AAAAaaaaBBBBbbbbCCCCcccc0001";
    let b = "sk-ant-api03-ZZZZzzzzYYYYyyyyXXXXxxxx0002";
    let raw = RawJson::from_value(&serde_json::json!({ a: 1, b: 2, "plain": 3 })).unwrap();
    let masked = r.mask_raw(&raw).to_value();
    let map = masked.as_object().unwrap();
    assert_eq!(map.len(), 3, "{masked}");
    assert_eq!(map["plain"], 3);
    let text = masked.to_string();
    assert!(
        !text.contains("AAAAaaaa") && !text.contains("ZZZZzzzz"),
        "{text}"
    );
    let mut values: Vec<i64> = map.values().map(|v| v.as_i64().unwrap()).collect();
    values.sort_unstable();
    assert_eq!(values, [1, 2, 3]);
    assert_eq!(r.mask_raw(&r.mask_raw(&raw)).to_value(), masked);
}

#[test]
fn ordinary_text_of_the_corpus_is_untouched() {
    let r = Redactor::builtin();
    for text in strings(&corpus()["keep"]) {
        assert_eq!(r.mask_text(&text), text);
    }
    assert_eq!(r.masks_made(), 0);
}

#[test]
fn keys_under_a_sensitive_key_are_masked_whole() {
    let r = Redactor::builtin();
    let raw = RawJson::from_value(&serde_json::json!({
        "credentials": {"hunter2Key": true, "hunter3Key": {"x": "y"}},
        "user": {"ann": 1}
    }))
    .unwrap();
    let masked = r.mask_raw(&raw);
    let text = masked.get().to_owned();
    assert!(
        !text.contains("hunter2Key") && !text.contains("hunter3Key"),
        "{text}"
    );
    assert!(text.contains("\"ann\":1"), "{text}");
    let v = masked.to_value();
    assert_eq!(v["credentials"].as_object().unwrap().len(), 2, "{v}");
    // Idempotent, ranks (` #2`) included.
    assert_eq!(r.mask_raw(&masked).get(), masked.get());
}

mod mixed {
    use proptest::prelude::*;

    use super::*;

    /// Every `gone` fragment of the corpus.
    fn fragments() -> Vec<String> {
        corpus()["leak"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| strings(&c["gone"]))
            .collect()
    }

    fn pieces() -> Vec<String> {
        let mut p: Vec<String> = corpus()["leak"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["text"].as_str().unwrap().to_owned())
            .collect();
        p.extend(
            [
                "\n",
                "\r\n",
                "\\n",
                "  ",
                "password=",
                "\"api_key\": ",
                "Bearer ",
                "…",
                "…(3 chars)",
                " #2",
                "%3D",
                "-----BEGIN PGP PRIVATE KEY BLOCK-----",
                "-----END RSA PRIVATE KEY-----",
                "sk-ant-",
                "\"",
                "'",
                ":",
            ]
            .map(str::to_owned),
        );
        p
    }

    proptest! {
        /// Corpus forms glued to each other and to separators, quotes and
        /// marks in any order: masking is idempotent and the masked text of
        /// a case never holds one of its fragments.
        #[test]
        fn corpus_forms_mixed_stay_masked_and_idempotent(
            picks in proptest::collection::vec(proptest::sample::select(pieces()), 0..7),
        ) {
            static R: std::sync::LazyLock<Redactor> = std::sync::LazyLock::new(Redactor::builtin);
            let text: String = picks.concat();
            static GONE: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(fragments);
            let once = R.mask_text(&text).into_owned();
            prop_assert_eq!(R.mask_text(&once).into_owned(), once.clone());
            for g in GONE.iter() {
                prop_assert!(!once.contains(g.as_str()), "{g:?} survives in {once:?}");
            }
            let raw = RawJson::from_value(&serde_json::json!({ text.clone(): [text.clone()] })).unwrap();
            let masked = R.mask_raw(&raw);
            let again = R.mask_raw(&masked);
            prop_assert_eq!(again.get(), masked.get());
        }
    }
}
