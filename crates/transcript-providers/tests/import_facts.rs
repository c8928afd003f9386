//! The import's facts (issue #18) and the fixes that came with them: block order of a
//! streamed chat completion, synthesized ids.
#![allow(clippy::unwrap_used)]

use transcript_providers::{Fact, Item, Output, Provider, normalize, normalize_items};

fn chunk(delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

#[test]
fn streamed_text_around_a_tool_call_keeps_stream_order() {
    let sse = [
        chunk(r#"{"content":"before "}"#, None),
        chunk(
            r#"{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}"#,
            None,
        ),
        chunk(r#"{"content":"after"}"#, None),
        chunk("{}", Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let out = normalize(Provider::OpenAi, sse.as_bytes());
    let turn = out
        .iter()
        .find_map(|o| match o {
            Output::Turn(m) => Some(m),
            _ => None,
        })
        .unwrap();
    let kinds: Vec<&str> = turn
        .blocks
        .iter()
        .map(|b| b.block_type().as_str())
        .collect();
    assert_eq!(kinds, ["text", "tool_use", "text"]);
    assert_eq!(turn.blocks[0].as_text(), Some("before "));
    assert_eq!(turn.blocks[2].as_text(), Some("after"));
    // `created` is the provider's time.
    let items = normalize_items(Provider::OpenAi, sse.as_bytes());
    assert!(matches!(&items[0], Item::Fact(Fact::Time(t)) if t.unix_millis() == 1_700_000_000_000));
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, Item::Fact(Fact::Unfinished(_))))
    );
}

#[test]
fn synthesized_ids_are_marked_and_distinct_from_real_ones() {
    // A Codex item without id next to an item whose real id looks positional.
    let input = concat!(
        "{\"type\":\"item.completed\",\"item\":{\"id\":\"item@line1\",\"type\":\"command_execution\",\"command\":\"a\",\"aggregated_output\":\"\",\"exit_code\":0,\"status\":\"completed\"}}\n",
        "{\"type\":\"item.started\",\"item\":{\"type\":\"command_execution\",\"command\":\"b\",\"status\":\"in_progress\"}}\n",
    );
    let out = normalize(Provider::Codex, input.as_bytes());
    let ids: Vec<&str> = out
        .iter()
        .filter_map(|o| match o {
            Output::ToolCall(p) => Some(p.call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["item@line1", "synth:item@line2"]);
}

#[test]
fn a_cut_stream_says_what_is_missing_and_what_is_torn() {
    let input = b"{\"type\":\"init\",\"model\":\"g\"}\n{\"type\":\"message\",\"role\":\"user\",\"content\":\"hi\"}\n{\"type\":\"message\",\"role\":\"assis";
    let items = normalize_items(Provider::Gemini, input);
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Item::Fact(Fact::Prompt { text, .. }) if text == "hi"))
    );
    assert!(items.iter().any(|i| matches!(i, Item::Fact(Fact::Torn(_)))));
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Item::Fact(Fact::Unfinished("`result`"))))
    );
    // The plain stream is unchanged: the prompt is a diagnostic there.
    let out = normalize(Provider::Gemini, input);
    assert!(out.iter().all(|o| matches!(o, Output::Diagnostic(_))));
}
