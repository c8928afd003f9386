//! Wire-contract tests: 000's examples, our golden lines, property
//! round-trips and tolerant decoding of foreign, newer and broken input.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use transcript_domain::{
    BlockBody, BlockType, ContentBlock, DecodeError, DecodeWarning, DecodedBlock, DecodedPayload,
    EncodedParts, EventDraft, EventKind, EventType, ExchangeEvent, Fidelity, MessagePayload,
    Payload, PayloadKind, PreEncoded, RawJson, Role, RunId, StepPayload, Timestamp, ToolPayload,
    Usage, decode_line, decode_str,
};

const RUN: &str = "550e8400-e29b-41d4-a716-446655440000";

fn golden_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/golden/wire-examples.jsonl")
}

fn envelope(ty: &str, payload: Value) -> String {
    json!({"seq": 1, "run_id": RUN, "type": ty, "path": "analyze", "iteration": 0,
           "timestamp": "2026-06-08T08:14:42.123Z", "payload": payload})
    .to_string()
}

fn reencode(line: &str) -> Value {
    let decoded = decode_str(line).unwrap();
    assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
    let event = decoded.event.to_event().unwrap();
    serde_json::from_str(&event.to_line().unwrap()).unwrap()
}

#[test]
fn seed_envelope_example_decodes_as_run_started_with_null_payload() {
    let line = r#"{
      "seq": 1,
      "run_id": "550e8400-e29b-41d4-a716-446655440000",
      "type": "run.started",
      "path": "",
      "iteration": 0,
      "timestamp": "2026-06-08T08:14:42.123Z",
      "payload": null
    }"#;
    let d = decode_str(line).unwrap();
    assert!(d.warnings.is_empty());
    assert_eq!(d.event.kind, EventKind::Known(EventType::RunStarted));
    assert_eq!(d.event.payload, DecodedPayload::Null);
    assert_eq!(d.event.run_id, RunId::parse(RUN).unwrap());
    assert_eq!(d.event.timestamp.to_string(), "2026-06-08T08:14:42.123Z");
    // The seed allows null for run.*: it converts to the writer side (which our own writers
    // never record: decision 2) and re-encodes byte for byte.
    let event = d.event.to_event().unwrap();
    assert_eq!(
        event.payload,
        Payload::RunNull(transcript_domain::RunEdge::Started)
    );
    let compact = RawJson::from_json(line.to_owned()).unwrap();
    assert_eq!(event.to_line().unwrap(), format!("{}\n", compact.get()));
    let strict: ExchangeEvent = serde_json::from_str(line).unwrap();
    assert_eq!(strict, event);
}

/// Every JSON example of seed 000 (the envelope, the three payload examples, the five block
/// examples), with its own key order: decode → to_event and `Deserialize` both give the
/// writer-side event, which encodes to exactly the example's compact line.
#[test]
fn every_seed_example_round_trips_byte_for_byte() {
    let envelope_of = |ty: &str, payload: &str| {
        format!(
            r#"{{"seq":1,"run_id":"{RUN}","type":"{ty}","path":"analyze","iteration":0,"timestamp":"2026-06-08T08:14:42.123Z","payload":{payload}}}"#
        )
    };
    let block = |b: &str| format!(r#"{{"role":"assistant","blocks":[{b}]}}"#);
    let lines = vec![
        format!(
            r#"{{"seq":1,"run_id":"{RUN}","type":"run.started","path":"","iteration":0,"timestamp":"2026-06-08T08:14:42.123Z","payload":null}}"#
        ),
        envelope_of("step.started", r#"{"name":"analyze","kind":"agent"}"#),
        envelope_of(
            "message.user",
            r#"{"role":"user","blocks":[{"type":"text","fidelity":"router","text":"Review main.go for bugs."}]}"#,
        ),
        envelope_of(
            "tool.call",
            r#"{"name":"Read","call_id":"tool_01H...","input":{"path":"main.go"},"output":null,"fidelity":"router"}"#,
        ),
        envelope_of(
            "message.assistant",
            &block(r#"{"type":"text","fidelity":"agent_emitted","text":"Found 2 issues."}"#),
        ),
        envelope_of(
            "message.assistant",
            &block(
                r#"{"type":"thinking","fidelity":"agent_emitted","thinking":"First I should..."}"#,
            ),
        ),
        envelope_of(
            "message.assistant",
            &block(
                r#"{"type":"tool_use","fidelity":"agent_emitted","tool_name":"Read","tool_id":"toolu_01","tool_input":{"path":"main.go"}}"#,
            ),
        ),
        envelope_of(
            "message.assistant",
            &block(
                r#"{"type":"tool_result","fidelity":"router","tool_id":"toolu_01","tool_content":"package main\n..."}"#,
            ),
        ),
        envelope_of(
            "message.assistant",
            &block(r#"{"type":"command","fidelity":"router","command":"go test ./..."}"#),
        ),
    ];
    for line in lines {
        let decoded = decode_str(&line).unwrap();
        assert!(
            decoded.warnings.is_empty(),
            "{line}: {:?}",
            decoded.warnings
        );
        let via_decoder = decoded.event.to_event().unwrap();
        let via_serde: ExchangeEvent = serde_json::from_str(&line).unwrap();
        assert_eq!(via_decoder, via_serde);
        assert_eq!(via_serde.to_line().unwrap(), format!("{line}\n"));
    }
}

#[test]
fn seed_payload_examples_decode_typed_and_reencode_equal() {
    let step = json!({"name": "analyze", "kind": "agent"});
    let user = json!({"role": "user", "blocks": [
        {"type": "text", "fidelity": "router", "text": "Review main.go for bugs."}]});
    let tool = json!({"name": "Read", "call_id": "tool_01H...", "input": {"path": "main.go"},
                      "output": null, "fidelity": "router"});
    for (ty, payload) in [
        ("step.started", step),
        ("message.user", user),
        ("tool.call", tool),
    ] {
        let line = envelope(ty, payload.clone());
        assert_eq!(reencode(&line)["payload"], payload, "{ty}");
    }
    let d = decode_str(&envelope(
        "tool.call",
        json!({"name": "Read", "call_id": "tool_01H...", "input": {"path": "main.go"},
               "output": null, "fidelity": "router"}),
    ))
    .unwrap();
    let DecodedPayload::Tool(t) = &d.event.payload else {
        panic!("not a tool payload")
    };
    assert_eq!(t.fidelity, Fidelity::Router);
    assert_eq!(t.input.get(), r#"{"path":"main.go"}"#);
}

#[test]
fn seed_block_examples_decode_to_expected_types_and_reencode_equal() {
    let blocks = [
        (
            json!({"type": "text", "fidelity": "agent_emitted", "text": "Found 2 issues."}),
            ContentBlock::text(Fidelity::AgentEmitted, "Found 2 issues."),
        ),
        (
            json!({"type": "thinking", "fidelity": "agent_emitted", "thinking": "First I should..."}),
            ContentBlock::thinking(Fidelity::AgentEmitted, "First I should..."),
        ),
        (
            json!({"type": "tool_use", "fidelity": "agent_emitted", "tool_name": "Read",
                "tool_id": "toolu_01", "tool_input": {"path": "main.go"}}),
            ContentBlock::tool_use(
                Fidelity::AgentEmitted,
                "Read",
                "toolu_01",
                RawJson::from_json(r#"{"path":"main.go"}"#.to_owned()).unwrap(),
            ),
        ),
        (
            json!({"type": "tool_result", "fidelity": "router", "tool_id": "toolu_01",
                "tool_content": "package main\n..."}),
            ContentBlock::tool_result(
                Fidelity::Router,
                "toolu_01",
                RawJson::string("package main\n..."),
            ),
        ),
        (
            json!({"type": "command", "fidelity": "router", "command": "go test ./..."}),
            ContentBlock::command(Fidelity::Router, "go test ./..."),
        ),
    ];
    for (value, expected) in blocks {
        let line = envelope(
            "message.assistant",
            json!({"role": "assistant", "blocks": [value.clone()]}),
        );
        let d = decode_str(&line).unwrap();
        let DecodedPayload::Message(m) = &d.event.payload else {
            panic!("not a message")
        };
        assert_eq!(m.blocks, vec![DecodedBlock::Known(expected.clone())]);
        assert_eq!(serde_json::to_value(&expected).unwrap(), value);
        assert_eq!(reencode(&line)["payload"]["blocks"][0], value);
    }
}

#[test]
fn stream_blocks_write_text_and_read_chunk_too() {
    let b = ContentBlock::stream(Fidelity::AgentEmitted, "par");
    assert_eq!(
        serde_json::to_value(&b).unwrap(),
        json!({"type": "stream", "fidelity": "agent_emitted", "text": "par"})
    );
    let line = envelope(
        "message.assistant",
        json!({"role": "assistant", "blocks": [
        {"type": "stream", "fidelity": "agent_emitted", "chunk": "tial"}]}),
    );
    let d = decode_str(&line).unwrap();
    assert_eq!(
        d.event.message().unwrap().blocks[0],
        DecodedBlock::Known(ContentBlock::stream(Fidelity::AgentEmitted, "tial"))
    );
}

#[test]
fn golden_wire_examples_cover_every_type_and_reencode_byte_for_byte() {
    let text = std::fs::read_to_string(golden_path()).unwrap();
    let mut event_types = std::collections::BTreeSet::new();
    let mut block_types = std::collections::BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let d = decode_str(line).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        assert!(d.warnings.is_empty(), "line {}: {:?}", n + 1, d.warnings);
        let event = d
            .event
            .to_event()
            .unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        event_types.insert(event.event_type());
        if let Some(m) = event.payload.as_message() {
            block_types.extend(m.blocks.iter().map(ContentBlock::block_type));
        }
        assert_eq!(
            event.to_line().unwrap(),
            format!("{line}\n"),
            "line {}",
            n + 1
        );
        // The tolerant re-encoding and the serde impl agree with the canonical line.
        let mut tolerant = Vec::new();
        d.event.encode_line(&mut tolerant).unwrap();
        assert_eq!(String::from_utf8(tolerant).unwrap(), format!("{line}\n"));
        assert_eq!(serde_json::to_string(&event).unwrap(), line);
    }
    assert_eq!(event_types.len(), EventType::ALL.len(), "{event_types:?}");
    assert_eq!(block_types.len(), BlockType::ALL.len(), "{block_types:?}");
}

#[test]
fn unknown_event_type_is_kept_with_its_raw_payload_and_warned() {
    let line = envelope("step.retried", json!({"attempt": 2, "z": [1, 2]}));
    let d = decode_str(&line).unwrap();
    assert_eq!(d.event.kind, EventKind::Unknown("step.retried".into()));
    assert!(
        matches!(&d.warnings[..], [DecodeWarning::UnknownEventType { type_name }] if type_name == "step.retried")
    );
    assert_eq!(
        d.event.payload,
        DecodedPayload::Raw(RawJson::from_json(r#"{"attempt":2,"z":[1,2]}"#.into()).unwrap())
    );
    // Unknown types still go through the shape probe.
    let d = decode_str(&envelope(
        "agent.note",
        json!({"role": "assistant", "blocks": []}),
    ))
    .unwrap();
    assert!(matches!(d.event.payload, DecodedPayload::Message(_)));
    let d = decode_str(&envelope(
        "agent.note",
        json!([{"type": "text", "fidelity": "router", "text": "x"}]),
    ))
    .unwrap();
    assert!(matches!(d.event.payload, DecodedPayload::Blocks(ref b) if b.len() == 1));
    let d = decode_str(&envelope(
        "agent.note",
        json!({"call_id": "c", "name": "n", "fidelity": "router"}),
    ))
    .unwrap();
    assert!(matches!(d.event.payload, DecodedPayload::Tool(_)));
    let d = decode_str(&envelope("agent.note", json!({"kind": "x", "name": "n"}))).unwrap();
    assert!(matches!(d.event.payload, DecodedPayload::Step(_)));
    let d = decode_str(&envelope("agent.note", json!(42))).unwrap();
    assert!(matches!(d.event.payload, DecodedPayload::Raw(ref r) if r.get() == "42"));
    assert!(d.event.to_event().is_err());
}

#[test]
fn unknown_block_type_is_kept_verbatim_and_warned() {
    let line = envelope(
        "message.assistant",
        json!({"role": "assistant", "blocks": [
        {"type": "text", "fidelity": "agent_emitted", "text": "a"},
        {"type": "image", "fidelity": "agent_emitted", "url": "https://x/y.png"},
        {"type": "text", "text": "no fidelity"}]}),
    );
    let d = decode_str(&line).unwrap();
    let m = d.event.message().unwrap();
    assert_eq!(m.blocks.len(), 3);
    assert!(
        matches!(&m.blocks[1], DecodedBlock::Unknown(u) if u.block_type == "image" && u.raw.get().contains("y.png"))
    );
    assert!(matches!(&m.blocks[2], DecodedBlock::Unknown(u) if u.block_type == "text"));
    assert!(d.warnings.contains(&DecodeWarning::UnknownBlockType {
        index: 1,
        type_name: "image".into()
    }));
    assert!(matches!(
        &d.warnings[1],
        DecodeWarning::InvalidBlock { index: 2, .. }
    ));
    // Re-encoding keeps the unknown blocks as written.
    let mut out = Vec::new();
    d.event.encode_line(&mut out).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["payload"]["blocks"][1]["url"], "https://x/y.png");
    assert_eq!(m.known_blocks().count(), 1);
}

#[test]
fn payload_not_fitting_its_type_falls_back_to_the_probe_with_a_warning() {
    // A step event carrying a tool-shaped payload.
    let line = envelope(
        "step.started",
        json!({"call_id": "c1", "name": "Read", "fidelity": "router"}),
    );
    let d = decode_str(&line).unwrap();
    assert!(matches!(d.event.payload, DecodedPayload::Tool(_)));
    assert!(matches!(
        &d.warnings[..],
        [DecodeWarning::PayloadMismatch {
            event_type: EventType::StepStarted,
            expected: PayloadKind::Step,
            ..
        }]
    ));
    // A message with a non-array blocks field is kept raw.
    let line = envelope("message.user", json!({"role": "user", "blocks": "oops"}));
    let d = decode_str(&line).unwrap();
    assert!(matches!(d.event.payload, DecodedPayload::Raw(ref r) if r.get().contains("oops")));
    // A tool event with a null payload.
    let d = decode_str(&envelope("tool.call", Value::Null)).unwrap();
    assert_eq!(d.event.payload, DecodedPayload::Null);
    assert_eq!(d.warnings.len(), 1);
}

#[test]
fn foreign_but_valid_forms_are_accepted() {
    // Go's RFC3339Nano with trimmed zeros, another offset, missing path/iteration,
    // empty optional ids, empty error strings (omitempty), extra fields.
    let line = r#"{"seq":9,"run_id":"550E8400-E29B-41D4-A716-446655440000","parent_run_id":"","type":"step.completed","timestamp":"2026-06-08T10:14:42.1+02:00","payload":{"name":"a","kind":"command","error":"","extra":true},"future_field":1}"#;
    let d = decode_str(line).unwrap();
    assert!(d.warnings.is_empty());
    let e = d.event.to_event().unwrap();
    assert_eq!(e.run_id.to_string(), RUN);
    assert_eq!(e.parent_run_id, None);
    assert_eq!(e.path, "");
    assert_eq!(e.timestamp.to_string(), "2026-06-08T08:14:42.100Z");
    assert_eq!(
        e.payload,
        Payload::StepCompleted(StepPayload::new("a", "command"))
    );
}

#[test]
fn malformed_lines_give_typed_errors_naming_the_cause() {
    let ok = envelope("step.started", json!({"name": "a", "kind": "agent"}));
    type Check = fn(&DecodeError) -> bool;
    let cases: Vec<(Vec<u8>, Check)> = vec![
        (ok.as_bytes()[..ok.len() / 2].to_vec(), |e| {
            matches!(e, DecodeError::Syntax { .. })
        }),
        (b"garbage".to_vec(), |e| {
            matches!(e, DecodeError::Syntax { .. })
        }),
        (b"".to_vec(), |e| matches!(e, DecodeError::Empty)),
        (b"   ".to_vec(), |e| matches!(e, DecodeError::Empty)),
        (b"[1,2]".to_vec(), |e| {
            matches!(e, DecodeError::Shape { .. })
        }),
        (vec![b'{', 0xff, 0xfe, b'}'], |e| {
            matches!(e, DecodeError::InvalidUtf8 { valid_up_to: 1 })
        }),
        (
            ok.replace("\"seq\":1", "\"seq\":\"1\"").into_bytes(),
            |e| matches!(e, DecodeError::Shape { message } if message.contains("seq") || message.contains("string")),
        ),
        (
            ok.replace("\"seq\":1,", "").into_bytes(),
            |e| matches!(e, DecodeError::Shape { message } if message.contains("seq")),
        ),
        (ok.replace(RUN, "run-abc").into_bytes(), |e| {
            matches!(
                e,
                DecodeError::InvalidRunId {
                    field: "run_id",
                    ..
                }
            )
        }),
        (
            ok.replace("2026-06-08T08:14:42.123Z", "yesterday")
                .into_bytes(),
            |e| matches!(e, DecodeError::InvalidTimestamp(_)),
        ),
        (
            ok.replace("\"iteration\":0", "\"iteration\":-1")
                .into_bytes(),
            |e| matches!(e, DecodeError::Shape { .. }),
        ),
        (ok.replace("analyze", "ana\u{0}lyze").into_bytes(), |e| {
            matches!(e, DecodeError::Syntax { .. })
        }),
    ];
    for (i, (line, check)) in cases.into_iter().enumerate() {
        let err = decode_line(&line).expect_err(&format!("case {i} should fail"));
        assert!(check(&err), "case {i}: unexpected {err:?}");
        assert!(!err.to_string().is_empty());
    }
    let err = decode_str(&ok.replace(RUN, "run-abc")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "run_id: invalid run id \"run-abc\": expected a 36-character hyphenated UUID"
    );
}

#[test]
fn pre_encoded_lines_equal_full_encoding() {
    let run = RunId::parse(RUN).unwrap();
    let parent = RunId::parse("00000000-0000-4000-8000-000000000001").unwrap();
    let draft = EventDraft::new(
        "a.b",
        3,
        Payload::ToolCall(ToolPayload::call(
            "read_file",
            "c-1",
            RawJson::from_value(&json!({"path": "x\u{2028}y"})).unwrap(),
            Fidelity::Router,
        )),
    )
    .with_child(parent);
    let pre = PreEncoded::new(run, Some(parent), &draft).unwrap();
    let ts = Timestamp::parse("2026-01-02T03:04:05.006Z").unwrap();
    let mut spliced = Vec::new();
    pre.write_line(18_446_744_073_709_551_615, ts, &mut spliced);
    // Encoding into a shared buffer after other bytes gives the same line.
    let mut shared = b"earlier record".to_vec();
    let start = shared.len();
    let split = PreEncoded::encode_into(run, Some(parent), &draft, &mut shared).unwrap();
    let parts = EncodedParts {
        middle: &shared[start..split],
        payload: &shared[split..],
    };
    assert_eq!(
        (parts.middle, parts.payload),
        (pre.parts().middle, pre.parts().payload)
    );
    let mut from_parts = Vec::new();
    parts.write_line_with(u64::MAX, &ts.canonical_bytes(), &mut from_parts);
    assert_eq!(from_parts, spliced);
    assert!(parts.len_hint() >= from_parts.len() && pre.len_hint() >= from_parts.len());
    let event = draft.into_event(u64::MAX, run, Some(parent), ts);
    assert_eq!(
        String::from_utf8(spliced).unwrap(),
        event.to_line().unwrap()
    );
}

// ---- property tests -------------------------------------------------------

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![".*", "[\\x00-\\x1f\u{2028}\u{2029}\"\\\\é漢🦀a-z]{0,24}",]
}

fn any_raw() -> BoxedStrategy<RawJson> {
    let leaf = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(any_text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .prop_map(RawJson::from)
    .boxed()
}

fn any_fidelity() -> impl Strategy<Value = Fidelity> {
    prop_oneof![Just(Fidelity::Router), Just(Fidelity::AgentEmitted)]
}

fn any_block() -> BoxedStrategy<ContentBlock> {
    let body = prop_oneof![
        any_text().prop_map(|text| BlockBody::Text { text }),
        any_text().prop_map(|thinking| BlockBody::Thinking { thinking }),
        (any_text(), any_text(), any_raw()).prop_map(|(tool_name, tool_id, tool_input)| {
            BlockBody::ToolUse {
                tool_name,
                tool_id,
                tool_input,
            }
        }),
        (any_text(), any_raw()).prop_map(|(tool_id, tool_content)| BlockBody::ToolResult {
            tool_id,
            tool_content
        }),
        any_text().prop_map(|command| BlockBody::Command { command }),
        any_text().prop_map(|text| BlockBody::Stream { text }),
    ];
    (any_fidelity(), body)
        .prop_map(|(fidelity, body)| ContentBlock { fidelity, body })
        .boxed()
}

/// Failure texts, including the empty one (which reads as absent).
fn any_error() -> impl Strategy<Value = String> {
    prop_oneof![1 => Just(String::new()), 4 => "[^\\x00]{1,12}"]
}

fn any_step() -> BoxedStrategy<StepPayload> {
    (
        any_text(),
        any_text(),
        proptest::option::of(any_error()),
        proptest::option::of(any_raw()),
        proptest::option::of((any::<u32>(), proptest::collection::vec(any_text(), 0..3))),
    )
        .prop_map(|(name, kind, error, result, refused)| StepPayload {
            name,
            kind,
            error,
            result,
            workflow: None,
            inputs: None,
            replay_of: None,
            forked_at: None,
            workspace: None,
            sandbox: None,
            network: None,
            network_refused: refused.map(|(count, first)| transcript_domain::NetworkRefused {
                count: u64::from(count),
                first,
            }),
        })
        .boxed()
}

fn any_usage() -> impl Strategy<Value = Usage> {
    let n = || proptest::option::of(any::<u32>().prop_map(u64::from));
    let cost = prop_oneof![
        8 => (0u32..100_000).prop_map(|c| f64::from(c) / 1000.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
    ];
    (n(), n(), n(), n(), n(), proptest::option::of(cost)).prop_map(|(i, o, cr, cw, r, c)| Usage {
        input_tokens: i,
        output_tokens: o,
        cache_read_tokens: cr,
        cache_write_tokens: cw,
        reasoning_tokens: r,
        cost_usd: c,
        ..Default::default()
    })
}

fn any_message() -> BoxedStrategy<MessagePayload> {
    (
        prop_oneof![Just(Role::User), Just(Role::Assistant)],
        prop::collection::vec(any_block(), 0..5),
        proptest::option::of(any_text()),
        proptest::option::of(any_text()),
        proptest::option::of(any_usage()),
        proptest::option::of(any_text()),
    )
        .prop_map(
            |(role, blocks, provider, model, usage, request_id)| MessagePayload {
                role,
                blocks,
                provider,
                model,
                usage,
                request_id,
            },
        )
        .boxed()
}

fn any_tool() -> BoxedStrategy<ToolPayload> {
    (
        any_text(),
        any_text(),
        any_raw(),
        any_raw(),
        proptest::option::of(any_error()),
        any_fidelity(),
    )
        .prop_map(
            |(name, call_id, input, output, error, fidelity)| ToolPayload {
                name,
                call_id,
                input,
                output,
                error,
                fidelity,
            },
        )
        .boxed()
}

fn any_payload() -> BoxedStrategy<Payload> {
    prop_oneof![
        any_step().prop_map(Payload::RunStarted),
        any_step().prop_map(Payload::RunCompleted),
        any_step().prop_map(Payload::StepStarted),
        any_step().prop_map(Payload::StepCompleted),
        any_step().prop_map(Payload::CallWorkflowStarted),
        any_step().prop_map(Payload::CallWorkflowCompleted),
        any_message().prop_map(Payload::MessageUser),
        any_message().prop_map(Payload::MessageAssistant),
        any_tool().prop_map(Payload::ToolCall),
        any_tool().prop_map(Payload::ToolResult),
    ]
    .boxed()
}

fn any_run_id() -> impl Strategy<Value = RunId> {
    any::<[u8; 16]>().prop_map(RunId::from_bytes)
}

fn any_event() -> BoxedStrategy<ExchangeEvent> {
    (
        1..u64::MAX,
        any_run_id(),
        proptest::option::of(any_run_id()),
        proptest::option::of(any_run_id()),
        any_text(),
        any::<u64>(),
        Timestamp::MIN.unix_millis()..=Timestamp::MAX.unix_millis(),
        any_payload(),
    )
        .prop_map(
            |(seq, run_id, parent_run_id, child_run_id, path, iteration, ms, payload)| {
                ExchangeEvent {
                    seq,
                    run_id,
                    parent_run_id,
                    child_run_id,
                    path,
                    iteration,
                    timestamp: Timestamp::from_unix_millis(ms).unwrap_or(Timestamp::UNIX_EPOCH),
                    payload,
                }
            },
        )
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_of_encode_is_identity(raw in any_event()) {
        // A payload that is not canonical (an empty error, a NaN cost) is
        // written exactly as its canonical form, which then round-trips.
        let mut event = raw.clone();
        event.payload.canonicalize();
        prop_assert_eq!(raw.to_line().unwrap(), event.to_line().unwrap());
        let line = event.to_line().unwrap();
        prop_assert!(line.ends_with('\n'));
        prop_assert_eq!(line.matches('\n').count(), 1, "one line per event");
        let decoded = decode_str(&line).unwrap();
        prop_assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
        let back = decoded.event.to_event().unwrap();
        prop_assert_eq!(&back, &event);
        prop_assert_eq!(&back.to_line().unwrap(), &line);
        // The strict `Deserialize` agrees with the decoder on every line we write.
        let strict: ExchangeEvent = serde_json::from_str(&line).unwrap();
        prop_assert_eq!(&strict, &event);
    }

    #[test]
    fn decoder_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_line(&bytes);
    }

    #[test]
    fn decoder_never_panics_on_mutated_lines(event in any_event(), cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut line = event.to_line().unwrap().into_bytes();
        let i = cut.index(line.len());
        line[i] = byte;
        let _ = decode_line(&line);
        line.truncate(i);
        let _ = decode_line(&line);
    }
}

/// A JSON value of any shape, small: what a mutation puts in place of a field.
fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(Value::from(1.5e300)),
        "[a-z.]{0,12}".prop_map(Value::from),
        Just(json!("x.unknown_type")),
        Just(json!([])),
        Just(json!({})),
        Just(json!([{"type": "future_block", "fidelity": "router"}])),
    ]
}

/// Every JSON pointer in `value`, walked iteratively.
fn pointers(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), value)];
    while let Some((ptr, v)) = stack.pop() {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    stack.push((
                        format!("{ptr}/{}", k.replace('~', "~0").replace('/', "~1")),
                        child,
                    ));
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    stack.push((format!("{ptr}/{i}"), child));
                }
            }
            _ => {}
        }
        out.push(ptr);
    }
    out
}

/// A structured mutation of a valid line: each keeps the line valid UTF-8 JSON (or nearly:
/// a cut), so the decoder's typed paths are exercised instead of its UTF-8 check.
#[derive(Debug, Clone)]
enum Mutation {
    Remove,
    Replace(Value),
    Wrap,
    Nest(usize),
    Cut,
}

fn any_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::Remove),
        any_json().prop_map(Mutation::Replace),
        Just(Mutation::Wrap),
        (100usize..3000).prop_map(Mutation::Nest),
        Just(Mutation::Cut),
    ]
}

fn apply(mut root: Value, at: &str, mutation: &Mutation) -> String {
    match mutation {
        Mutation::Cut => {
            let text = root.to_string();
            let cut = text.len() * 2 / 3;
            let cut = (0..=cut)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            return text[..cut].to_owned();
        }
        Mutation::Remove => {
            if let Some((parent, key)) = at.rsplit_once('/') {
                match root.pointer_mut(parent) {
                    Some(Value::Object(map)) => {
                        map.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(items)) => {
                        if let Ok(i) = key.parse::<usize>()
                            && i < items.len()
                        {
                            items.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        Mutation::Replace(v) => {
            if let Some(slot) = root.pointer_mut(at) {
                *slot = v.clone();
            }
        }
        Mutation::Wrap => {
            if let Some(slot) = root.pointer_mut(at) {
                *slot = Value::Array(vec![slot.take()]);
            }
        }
        Mutation::Nest(depth) => {
            // Spliced as text: building a deep `Value` would itself recurse on drop.
            if let Some(slot) = root.pointer_mut(at) {
                *slot = json!("__NEST__");
            }
            let nest = format!("{}1{}", "[".repeat(*depth), "]".repeat(*depth));
            return root.to_string().replacen("\"__NEST__\"", &nest, 1);
        }
    }
    root.to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Near-valid lines: a valid event with one field removed, retyped, wrapped, nested
    /// thousands deep or cut. The decoder never panics; what it accepts re-encodes to a line
    /// that decodes to the same event (tolerant decoding is stable); what it refuses is a
    /// typed error with a message.
    #[test]
    fn decoder_handles_structured_near_valid_lines(
        event in any_event(),
        pick in any::<prop::sample::Index>(),
        mutation in any_mutation(),
    ) {
        let value: Value = serde_json::from_str(&event.to_line().unwrap()).unwrap();
        let ptrs = pointers(&value);
        let at = ptrs[pick.index(ptrs.len())].clone();
        let line = apply(value, &at, &mutation);
        match decode_str(&line) {
            Ok(decoded) => {
                let mut again = Vec::new();
                decoded.event.encode_line(&mut again).unwrap();
                prop_assert_eq!(again.iter().filter(|&&b| b == b'\n').count(), 1);
                let redecoded = decode_line(&again[..again.len() - 1]).unwrap();
                prop_assert_eq!(&redecoded.event, &decoded.event);
            }
            Err(err) => prop_assert!(!err.to_string().is_empty()),
        }
    }
}

#[test]
fn run_provenance_decodes_typed_and_reencodes_byte_for_byte() {
    // Wire decision 16: `workflow`, `inputs` (secret ones "***") and `replay_of` on run.started.
    let line = envelope(
        "run.started",
        json!({"name": "wf", "kind": "workflow",
               "workflow": {"path": "flows/wf.yaml", "sha256": "ab12", "text": "name: wf\n"},
               "inputs": {"ref": "main", "token": "***"},
               "replay_of": RUN, "workspace": "/srv/checkout"}),
    );
    let decoded = decode_str(&line).unwrap();
    assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
    let step = decoded.event.step().expect("a typed step payload").clone();
    assert_eq!(
        step.workflow,
        Some(transcript_domain::WorkflowSource {
            path: "flows/wf.yaml".into(),
            sha256: "ab12".into(),
            text: Some("name: wf\n".into()),
            text_omitted_bytes: None,
        })
    );
    assert_eq!(step.workspace.as_deref(), Some("/srv/checkout"));
    assert_eq!(
        step.inputs.unwrap().to_value(),
        json!({"ref": "main", "token": "***"})
    );
    assert_eq!(step.replay_of.as_deref(), Some(RUN));
    let event = decoded.event.to_event().unwrap();
    let canonical = event.to_line().unwrap();
    assert_eq!(
        decode_str(&canonical)
            .unwrap()
            .event
            .to_event()
            .unwrap()
            .to_line()
            .unwrap(),
        canonical
    );
    assert_eq!(
        reencode(&line),
        serde_json::from_str::<Value>(&line).unwrap()
    );
    // Absent fields stay absent: an older run.started is unchanged.
    let old = envelope("run.started", json!({"name": "wf", "kind": "workflow"}));
    assert_eq!(reencode(&old), serde_json::from_str::<Value>(&old).unwrap());
}

/// Decision 20: a workflow text past the bound is not written; its size stands in for it.
#[test]
fn a_workflow_text_past_the_bound_is_a_stub_with_its_size() {
    use transcript_domain::{WORKFLOW_TEXT_MAX, WorkflowSource};
    let small = WorkflowSource::of_text("w.yaml", "ab", "name: w\n");
    assert_eq!(small.text.as_deref(), Some("name: w\n"));
    assert_eq!(small.text_omitted_bytes, None);
    let edge = "x".repeat(WORKFLOW_TEXT_MAX);
    assert!(
        WorkflowSource::of_text("w.yaml", "ab", &edge)
            .text
            .is_some()
    );
    let big = "x".repeat(WORKFLOW_TEXT_MAX + 1);
    let stub = WorkflowSource::of_text("w.yaml", "ab", &big);
    assert_eq!(stub.text, None);
    assert_eq!(stub.text_omitted_bytes, Some(WORKFLOW_TEXT_MAX as u64 + 1));
    let json = serde_json::to_value(&stub).unwrap();
    assert_eq!(
        json,
        json!({"path": "w.yaml", "sha256": "ab", "text_omitted_bytes": WORKFLOW_TEXT_MAX + 1})
    );
}
