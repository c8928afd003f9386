//! Copilot names models with a dotted version (`claude-opus-4.6`) where the price table
//! hyphenates it (`claude-opus-4-6`): #51 item 4. Every model name in the real Copilot
//! captures (`$TRANSCRIPT_REAL_FIXTURES/copilot`, read from the JSON by key, not through the
//! normalizer) is priced, a dotted one under its hyphenated entry by the rule, and every turn
//! the normalizer bills from them has a price. A name the table still lacks stays unpriced.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use serde_json::Value;
use transcript_domain::Usage;
use transcript_providers::pricing::hyphenate_versions;
use transcript_providers::{Output, Pricing, Provider};

/// Every string under a key naming a model (`model`, `selectedModel`, `currentModel`, …).
fn model_names(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if let (true, Value::String(s)) = (k.to_lowercase().ends_with("model"), v) {
                    out.insert(s.clone());
                }
                model_names(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| model_names(v, out)),
        _ => {}
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: Some(1000),
        output_tokens: Some(100),
        ..Usage::default()
    }
}

#[test]
fn every_model_name_of_the_real_copilot_captures_is_priced() {
    let Some(root) = common::real_root() else {
        return;
    };
    let table = Pricing::embedded();
    let mut names = BTreeSet::new();
    let mut turn_models = BTreeSet::new();
    for file in common::inputs(&root.join("copilot")) {
        let bytes = std::fs::read(&file).unwrap();
        for line in bytes.split(|b| *b == b'\n') {
            if let Ok(v) = serde_json::from_slice::<Value>(line) {
                model_names(&v, &mut names);
            }
        }
        for o in transcript_providers::normalize(Provider::Copilot, &bytes) {
            if let Output::Turn(m) = o
                && m.usage.is_some()
                && let Some(model) = m.model
            {
                turn_models.insert(model);
            }
        }
    }
    // A fixture's placeholder is no model name, nor Copilot's `auto` (its router's choice,
    // `previousModel` of a model change: no request is billed under it).
    names.retain(|n| !n.starts_with('[') && n != "auto");
    assert!(
        names.contains("claude-opus-4.6"),
        "the captures name the dotted models: {names:?}"
    );
    let mut dotted = 0;
    for name in &names {
        let cost = table
            .cost(name, &usage())
            .unwrap_or_else(|| panic!("no price for the captures' model {name}"));
        if table.lookup(name).map(|(k, _)| k) != Some(name.as_str())
            && let Some(h) = hyphenate_versions(name)
        {
            dotted += 1;
            assert_eq!(cost.priced_as, h, "{name}");
        }
    }
    assert!(
        dotted >= 2,
        "claude-opus-4.6 and claude-haiku-4.5: {names:?}"
    );
    assert!(!turn_models.is_empty());
    for model in &turn_models {
        assert!(
            table.cost(model, &usage()).is_some(),
            "a billed turn's model has no price: {model}"
        );
    }
    // The rule, by hand: a dot between digits only; a name the table spells with a dot
    // keeps its own entry; a name that has no entry either way stays unpriced.
    assert_eq!(
        table.lookup("claude-opus-4.6").unwrap().0,
        "claude-opus-4-6"
    );
    assert_eq!(table.lookup("gpt-4.1").unwrap().0, "gpt-4.1");
    assert_eq!(hyphenate_versions("gpt-5-mini"), None);
    assert_eq!(
        hyphenate_versions("a.b-4.6.1"),
        Some("a.b-4-6-1".to_owned())
    );
    assert!(table.cost("claude-nonesuch-9.9", &usage()).is_none());
}
