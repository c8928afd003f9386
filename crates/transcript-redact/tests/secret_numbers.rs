//! Issue #56: a secret made of digits (a PIN) travels as a JSON number when a workflow hands
//! it on (`inputs: { x: "{{inputs.pin}}" }` renders the value itself). The mask of a
//! `secret: true` input catches it there too, as its masked text; no other rule turns a
//! number into a string.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use transcript_domain::{EventMask, Payload, RawJson, StepPayload};
use transcript_redact::Redactor;

fn result_after(redactor: &Redactor, result: Value) -> Value {
    let mut payload = Payload::StepCompleted(
        StepPayload::new("s", "command").with_result(RawJson::from_value(&result).unwrap()),
    );
    redactor.mask(&mut payload);
    let Payload::StepCompleted(step) = payload else {
        unreachable!("the payload keeps its type")
    };
    step.result.unwrap().parse().unwrap()
}

#[test]
fn a_number_holding_a_secret_is_masked_and_other_numbers_stay_numbers() {
    let redactor = Redactor::empty().with_secret("pin", "907315").unwrap();
    let masked = result_after(
        &redactor,
        json!({"x": 907315, "nested": [1907315], "exit_code": 0, "other": 123456}),
    );
    assert_eq!(masked["x"], json!("…(6 chars)"));
    assert!(masked["nested"][0].is_string(), "{masked}");
    assert!(!masked.to_string().contains("907315"), "{masked}");
    assert_eq!(masked["exit_code"], json!(0));
    assert_eq!(masked["other"], json!(123456));
    // A pattern of digits masks strings, never numbers: a count stays a count.
    let digits = Redactor::empty().with_pattern("[0-9]{6}").unwrap();
    let kept = result_after(&digits, json!({"n": 123456, "s": "123456"}));
    assert_eq!(kept["n"], json!(123456));
    assert_ne!(kept["s"], json!("123456"));
}
