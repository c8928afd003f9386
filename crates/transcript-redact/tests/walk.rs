//! Redaction walks every string of every record (issue #39 item 8): a key
//! in any string field of any payload, split by colour codes, URL-encoded,
//! or split between two adjacent blocks of one message, is masked. Checked
//! from outside: the masked event's JSON line, every string of it decoded,
//! holds no fragment of the key.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use transcript_domain::{
    ContentBlock, DecodedEvent, EventDraft, EventMask, Fidelity, MessagePayload, Payload, RawJson,
    Role, RunId, StepPayload, Timestamp, ToolPayload, decode_str,
};
use transcript_redact::Redactor;

const KIND: &str = "sk-ant-";
const TAIL: &str = "api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp";

fn key() -> String {
    format!("{KIND}{TAIL}")
}

/// Fragments of the key's tail that must not survive (its halves too).
fn fragments() -> Vec<&'static str> {
    vec![TAIL, &TAIL[..TAIL.len() / 2], &TAIL[TAIL.len() / 2..]]
}

fn url_encoded(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// Every string of a value (keys included), one per line.
fn all_strings(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                out.push_str(k);
                out.push('\n');
                walk(x, out);
            }),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(v, &mut out);
    out
}

fn line_of(payload: Payload, path: &str) -> String {
    EventDraft::new(path, 0, payload)
        .into_event(1, RunId::from_bytes([7; 16]), None, Timestamp::UNIX_EPOCH)
        .to_line()
        .unwrap()
}

/// The fragments found in `line`, raw or JSON-decoded, with the tail's
/// URL-encoded forms.
fn leaks(line: &str) -> Vec<String> {
    let decoded = all_strings(&serde_json::from_str(line).unwrap());
    let mut out = Vec::new();
    for f in fragments() {
        for form in [f.to_owned(), url_encoded(f)] {
            if line.contains(&form) || decoded.contains(&form) {
                out.push(form);
            }
        }
    }
    out
}

/// One payload per event type with `s` in every string field it has.
fn every_field(s: &str) -> Vec<Payload> {
    let raw = RawJson::from_value(&json!({ "k": s, s: [s] })).unwrap();
    let mut message = MessagePayload::new(
        Role::Assistant,
        vec![
            ContentBlock::text(Fidelity::AgentEmitted, s),
            ContentBlock::thinking(Fidelity::AgentEmitted, s),
            ContentBlock::tool_use(Fidelity::AgentEmitted, s, s, raw.clone()),
            ContentBlock::tool_result(Fidelity::AgentEmitted, s, RawJson::string(s)),
            ContentBlock::command(Fidelity::Router, s),
            ContentBlock::stream(Fidelity::AgentEmitted, s),
        ],
    );
    message.provider = Some(s.to_owned());
    message.model = Some(s.to_owned());
    let step = StepPayload::new(s, s)
        .with_error(s)
        .with_result(raw.clone());
    vec![
        Payload::RunStarted(StepPayload::new(s, s)),
        Payload::RunCompleted(step.clone()),
        Payload::StepStarted(StepPayload::new(s, s)),
        Payload::StepCompleted(step.clone()),
        Payload::CallWorkflowStarted(StepPayload::new(s, s)),
        Payload::CallWorkflowCompleted(step),
        Payload::MessageUser(MessagePayload {
            role: Role::User,
            ..message.clone()
        }),
        Payload::MessageAssistant(message),
        Payload::ToolCall(ToolPayload::call(s, s, raw.clone(), Fidelity::Router)),
        Payload::ToolResult(ToolPayload::result(
            s,
            s,
            raw,
            Some(s.to_owned()),
            Fidelity::Router,
        )),
    ]
}

/// The shapes a key takes: plain, glued into a name, split by colour codes,
/// URL-encoded, URL-encoded twice.
fn shapes() -> Vec<(&'static str, String)> {
    let (a, b) = TAIL.split_at(TAIL.len() / 2);
    vec![
        ("plain", key()),
        ("glued", format!("claude-{}", key())),
        (
            "colour codes",
            format!("{KIND}\x1b[01;31m\x1b[K{a}\x1b[m\x1b[K{b}"),
        ),
        (
            "OSC hyperlink",
            format!("\x1b]8;;x\x1b\\{KIND}{a}\x1b]8;;\x1b\\{b}"),
        ),
        ("URL-encoded", url_encoded(&key())),
        ("URL-encoded twice", url_encoded(&url_encoded(&key()))),
        (
            "colour codes URL-encoded",
            format!("{KIND}\x1b[1m{}", url_encoded(TAIL)),
        ),
    ]
}

#[test]
fn every_string_field_of_every_payload_is_masked_in_every_shape() {
    let r = Redactor::builtin();
    let mut failures = Vec::new();
    for (shape, s) in shapes() {
        for mut payload in every_field(&s) {
            let event_type = payload.event_type();
            r.mask(&mut payload);
            assert_eq!(payload.event_type(), event_type);
            let line = line_of(payload, "p");
            for leak in leaks(&line) {
                failures.push(format!("{shape} {event_type:?}: {leak:?} in {line}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_string_of_a_decoded_event_is_masked_envelope_included() {
    let r = Redactor::builtin();
    for (shape, s) in shapes() {
        for payload in every_field(&s) {
            let line = line_of(payload, &s);
            let mut event: DecodedEvent = decode_str(&line).unwrap().event;
            r.mask_decoded(&mut event);
            let mut out = Vec::new();
            event.encode_line(&mut out).unwrap();
            let out = String::from_utf8(out).unwrap();
            assert!(leaks(&out).is_empty(), "{shape}: {out}");
        }
    }
    // A newer writer's event type, role and block type are strings too.
    let k = key();
    let foreign = format!(
        r#"{{"seq":1,"run_id":"{}","type":"note.{k}","path":"","iteration":0,"timestamp":"2026-01-01T00:00:00.000Z","payload":{{"role":"r{k}","blocks":[{{"type":"t{k}","x":1}}]}}}}"#,
        RunId::from_bytes([7; 16])
    );
    let mut event = decode_str(&foreign).unwrap().event;
    r.mask_decoded(&mut event);
    let mut out = Vec::new();
    event.encode_line(&mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(leaks(&out).is_empty(), "{out}");
}

#[test]
fn a_key_split_between_adjacent_blocks_is_masked_in_both() {
    let r = Redactor::builtin();
    let k = key();
    for cut in 1..k.len() {
        let (a, b) = k.split_at(cut);
        let mut payload = Payload::MessageAssistant(MessagePayload::new(
            Role::Assistant,
            vec![
                ContentBlock::text(Fidelity::AgentEmitted, format!("here: {a}")),
                ContentBlock::text(Fidelity::AgentEmitted, format!("{b} done")),
            ],
        ));
        r.mask(&mut payload);
        let once = payload.clone();
        r.mask(&mut payload);
        assert_eq!(payload, once, "masking masked blocks changes nothing");
        let line = line_of(payload, "p");
        assert!(leaks(&line).is_empty(), "cut {cut}: {line}");
        assert!(line.contains("here: ") && line.contains(" done"), "{line}");
    }
}

#[test]
fn blocks_with_another_block_between_them_are_not_joined() {
    // A tool call between two texts: they are not one text, and a text
    // that is no key alone is kept.
    let r = Redactor::builtin();
    let mut payload = Payload::MessageAssistant(MessagePayload::new(
        Role::Assistant,
        vec![
            ContentBlock::text(Fidelity::AgentEmitted, "sk-ant-"),
            ContentBlock::tool_use(Fidelity::AgentEmitted, "Bash", "t1", RawJson::null()),
            ContentBlock::text(Fidelity::AgentEmitted, "api03-notakeyaloneAAAABBBB"),
        ],
    ));
    r.mask(&mut payload);
    assert!(line_of(payload, "p").contains("api03-notakeyaloneAAAABBBB"));
}

#[test]
fn structure_only_masks_the_names_it_keeps() {
    let r = Redactor::structure_only();
    for mut payload in every_field(&format!("claude-{}", key())) {
        r.mask(&mut payload);
        let line = line_of(payload, "p");
        assert!(leaks(&line).is_empty(), "{line}");
    }
    let mut payload = Payload::StepStarted(StepPayload::new("build", "command"));
    r.mask(&mut payload);
    assert!(line_of(payload, "p").contains(r#""name":"build","kind":"command""#));
}

#[test]
fn escapes_outside_a_key_are_kept_and_masking_is_idempotent() {
    let r = Redactor::builtin();
    for (shape, s) in shapes() {
        let text = format!("\x1b[32mok\x1b[m 100%25 {s} tail");
        let once = r.mask_text(&text).into_owned();
        assert!(
            once.starts_with("\x1b[32mok\x1b[m 100%25 "),
            "{shape}: {once:?}"
        );
        assert!(once.ends_with(" tail"), "{shape}: {once:?}");
        assert_eq!(r.mask_text(&once), once, "{shape}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Wherever colour codes cut a key, and whichever of its characters
    /// are URL-encoded, no fragment of it survives.
    #[test]
    fn a_key_cut_by_codes_or_partly_encoded_is_masked(
        cuts in proptest::collection::vec(0usize..TAIL.len(), 0..4),
        encoded in proptest::collection::vec(any::<bool>(), TAIL.len()),
        code in prop::sample::select(vec!["\x1b[m", "\x1b[01;31m\x1b[K", "\x1b]0;t\x07", "\x08"]),
    ) {
        let mut tail = String::new();
        for (i, c) in TAIL.chars().enumerate() {
            if cuts.contains(&i) {
                tail.push_str(code);
            }
            if encoded[i] {
                tail.push_str(&url_encoded(&c.to_string()));
            } else {
                tail.push(c);
            }
        }
        let all_encoded = encoded.iter().all(|e| *e) && cuts.is_empty();
        // Mixed plain and encoded characters are only a key once decoded
        // wholly; a key cut by codes is one once they are removed.
        if cuts.is_empty() || !encoded.iter().any(|e| *e) || all_encoded {
            let r = Redactor::builtin();
            let masked = r.mask_text(&format!("x {KIND}{tail} y")).into_owned();
            let plain: String = masked.chars().filter(|c| !c.is_control()).collect();
            for f in fragments() {
                prop_assert!(!plain.contains(f), "{masked:?}");
            }
            prop_assert!(masked.starts_with("x ") && masked.ends_with(" y"), "{masked:?}");
        }
    }
}
