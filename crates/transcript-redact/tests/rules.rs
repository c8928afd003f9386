//! The built-in rules are data (`BUILTIN_RULES`): each one compiles, has
//! examples, and masks every one of them on its own (a test per rule, run
//! as one loop that names the rule that fails).
#![allow(clippy::unwrap_used)]

use transcript_redact::{BUILTIN_RULES, Redactor};

#[test]
fn every_builtin_rule_compiles() {
    // Compiling fails loudly: the first pattern that does not compile is
    // the error, nothing is dropped.
    let r = Redactor::try_builtin().unwrap();
    let names: Vec<&str> = BUILTIN_RULES.iter().map(|r| r.name).collect();
    assert_eq!(r.rule_names(), names);
    // A broken pattern is reported by name, never skipped.
    let broken = transcript_redact::BuiltinRule {
        name: "broken",
        pattern: "(?P<secret>unclosed",
        folds: false,
        examples: &[],
    };
    let err = Redactor::empty().with_builtin_rule(&broken).unwrap_err();
    assert!(err.to_string().contains("unclosed"), "{err}");
}

#[test]
fn every_builtin_rule_masks_its_examples_alone() {
    let mut failures = Vec::new();
    for rule in BUILTIN_RULES {
        if rule.examples.is_empty() {
            failures.push(format!("{}: no example", rule.name));
        }
        let alone = Redactor::empty().with_builtin_rule(rule).unwrap();
        for (text, gone) in rule.examples {
            let masked = alone.mask_text(text);
            for g in *gone {
                if masked.contains(g) {
                    failures.push(format!("{}: {g:?} survives in {masked:?}", rule.name));
                }
            }
            if !masked.contains(" chars)") {
                failures.push(format!("{}: no mask in {masked:?}", rule.name));
            }
            if alone.mask_text(&masked) != masked {
                failures.push(format!("{}: not idempotent on {masked:?}", rule.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn rule_names_are_unique() {
    let mut names: Vec<&str> = BUILTIN_RULES.iter().map(|r| r.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), BUILTIN_RULES.len());
}
