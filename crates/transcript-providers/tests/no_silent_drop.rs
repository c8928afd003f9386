//! Nothing is dropped silently (issue #23 item 9): each case that used to
//! lose content or miscount a record now keeps the content where it can and
//! reports it with a diagnostic of the right kind.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use transcript_providers::{Diagnostic, DiagnosticKind as K, Output, Provider, normalize};

fn texts(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::Turn(m) => Some(
                m.blocks
                    .iter()
                    .filter_map(|b| b.as_text().map(str::to_owned)),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

fn diags(out: &[Output], kind: K) -> Vec<&Diagnostic> {
    out.iter()
        .filter_map(Output::as_diagnostic)
        .filter(|d| d.kind == kind)
        .collect()
}

/// Normalizes, checking chunking invariance on the way.
fn run(p: Provider, input: &str) -> Vec<Output> {
    assert_chunking_invariant(p, input.as_bytes(), "inline input")
}

#[test]
fn a_second_content_block_start_on_an_open_index_keeps_the_first_block() {
    let sse = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"FIRST"}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"SECOND"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_stop
data: {"type":"message_stop"}

"#;
    let out = run(Provider::Anthropic, sse);
    assert_eq!(texts(&out), ["FIRST", "SECOND"]);
    let incomplete = diags(&out, K::Incomplete);
    assert!(
        incomplete
            .iter()
            .any(|d| d.detail.contains("started again")),
        "{incomplete:?}"
    );
}

#[test]
fn an_openai_chunk_after_finish_reason_is_kept_and_flagged() {
    let sse = r#"data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"A"},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"B"},"finish_reason":null}]}

data: [DONE]

"#;
    let out = run(Provider::OpenAi, sse);
    assert_eq!(texts(&out), ["A", "B"]);
    let late = diags(&out, K::Malformed);
    assert_eq!(late.len(), 1, "{out:?}");
    assert!(late[0].detail.contains("after finish_reason"));
    assert_eq!(late[0].position.line, 5);
    // A later finish_reason flushes the late deltas (joined, as deltas are).
    let again = format!(
        "{sse}data: {}\n\n",
        r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"C"},"finish_reason":"stop"}]}"#
    );
    let out = run(Provider::OpenAi, &again);
    assert_eq!(texts(&out), ["A", "BC"]);
    assert_eq!(diags(&out, K::Malformed).len(), 2);
}

#[test]
fn text_of_an_unexpected_type_is_kept_as_json_text_and_flagged() {
    let cases: &[(Provider, &str, &str)] = &[
        (
            Provider::Claude,
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":{"a":1}}]}}"#,
            r#"{"a":1}"#,
        ),
        (
            Provider::Codex,
            r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":42}}"#,
            "42",
        ),
        (
            Provider::Gemini,
            r#"{"type":"message","role":"assistant","content":["x"]}"#,
            r#"["x"]"#,
        ),
        (
            Provider::OpenAi,
            r#"{"object":"chat.completion","id":"c","choices":[{"message":{"role":"assistant","content":{"x":true}}}]}"#,
            r#"{"x":true}"#,
        ),
        (
            Provider::Copilot,
            r#"{"type":"assistant.message","data":{"messageId":"m","content":[1,2]}}"#,
            "[1,2]",
        ),
    ];
    for (p, record, want) in cases {
        let out = run(*p, &format!("{record}\n"));
        assert_eq!(texts(&out), [*want], "{p}");
        let m = diags(&out, K::Malformed);
        assert_eq!(m.len(), 1, "{p}: {out:?}");
        assert!(m[0].detail.contains("not a string"), "{p}: {}", m[0]);
    }
    // Absent text stays empty text, without a diagnostic.
    let out = normalize(
        Provider::Codex,
        br#"{"type":"item.completed","item":{"id":"i","type":"agent_message"}}"#,
    );
    assert!(diags(&out, K::Malformed).is_empty());
}

#[test]
fn unknown_codex_event_msgs_and_responses_events_are_counted_as_unknown() {
    let rollout = r#"{"type":"event_msg","payload":{"type":"brand_new_event"}}
{"type":"event_msg","payload":{"type":"entered_review_mode"}}
{"type":"event_msg","payload":{"type":"agent_message_delta","delta":"x"}}
"#;
    let out = run(Provider::Codex, rollout);
    let kinds: Vec<_> = out
        .iter()
        .filter_map(Output::as_diagnostic)
        .map(|d| (d.kind, d.record.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (K::Unknown, "event_msg/brand_new_event"),
            (K::Metadata, "event_msg/entered_review_mode"),
            (K::Progress, "event_msg/agent_message_delta"),
        ]
    );
    let sse = "event: response.brand_new\ndata: {\"type\":\"response.brand_new\"}\n\n\
               event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n\
               event: response.output_text.annotation.added\ndata: {\"type\":\"response.output_text.annotation.added\"}\n\n";
    let out = run(Provider::OpenAi, sse);
    let kinds: Vec<_> = out
        .iter()
        .filter_map(Output::as_diagnostic)
        .map(|d| (d.kind, d.record.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (K::Unknown, "response.brand_new"),
            (K::Progress, "response.output_text.delta"),
            (K::Progress, "response.output_text.annotation.added"),
        ]
    );
}
