//! Anthropic Messages API (`POST /v1/messages`), as Claude Code reads it.

use serde_json::{Value, json};

use super::render::{Answer, Ctx, arguments_text, pieces};
use super::script::{Block, Usage};
use super::sse::SseEvent;

/// Renders the turn as a streaming or a non-streaming Messages answer.
pub(crate) fn answer(ctx: &Ctx<'_>, stream: bool) -> Answer {
    if stream {
        Answer::Stream(events(ctx))
    } else {
        Answer::Json(message(ctx))
    }
}

fn stop_reason(ctx: &Ctx<'_>) -> &'static str {
    if ctx.turn.calls_tools() {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn usage(u: &Usage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": u.cache_creation_input_tokens,
        "cache_read_input_tokens": u.cache_read_input_tokens,
        "output_tokens": output_tokens,
    })
}

fn tool_id(ctx: &Ctx<'_>, index: usize, id: &Option<String>) -> String {
    id.clone().unwrap_or_else(|| ctx.item_id("toolu", index))
}

fn content(ctx: &Ctx<'_>) -> Vec<Value> {
    ctx.turn
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| match b {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Thinking { text, signature } => {
                json!({"type": "thinking", "thinking": text, "signature": signature})
            }
            Block::ToolCall {
                id,
                name,
                arguments,
            } => json!({"type": "tool_use", "id": tool_id(ctx, i, id), "name": name, "input": arguments}),
        })
        .collect()
}

fn message(ctx: &Ctx<'_>) -> Value {
    json!({
        "id": ctx.id("msg"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content(ctx),
        "stop_reason": stop_reason(ctx),
        "stop_sequence": null,
        "usage": usage(&ctx.turn.usage, ctx.turn.usage.output_tokens),
    })
}

fn events(ctx: &Ctx<'_>) -> Vec<SseEvent> {
    let u = &ctx.turn.usage;
    // Like the real API: message_start carries the input usage and a 1-token output snapshot;
    // the billed output arrives in message_delta (cumulative).
    let mut out = vec![SseEvent::named(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": ctx.id("msg"), "type": "message", "role": "assistant", "model": ctx.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": usage(u, u.output_tokens.min(1)),
        }}),
    )];
    out.push(SseEvent::named("ping", &json!({"type": "ping"})));
    for (index, block) in ctx.turn.blocks.iter().enumerate() {
        let start = |content_block: Value| {
            SseEvent::named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
            )
        };
        let delta = |delta: Value| {
            SseEvent::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        match block {
            Block::Text(text) => {
                out.push(start(json!({"type": "text", "text": ""})));
                for piece in pieces(text) {
                    out.push(delta(json!({"type": "text_delta", "text": piece})));
                }
            }
            Block::Thinking { text, signature } => {
                out.push(start(
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                ));
                for piece in pieces(text) {
                    out.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                }
                out.push(delta(
                    json!({"type": "signature_delta", "signature": signature}),
                ));
            }
            Block::ToolCall {
                id,
                name,
                arguments,
            } => {
                out.push(start(json!({
                    "type": "tool_use", "id": tool_id(ctx, index, id), "name": name, "input": {},
                })));
                let text = arguments_text(arguments);
                for piece in pieces(&text) {
                    out.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
            }
        }
        out.push(SseEvent::named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    out.push(SseEvent::named(
        "message_delta",
        &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(ctx), "stop_sequence": null},
            "usage": usage(u, u.output_tokens)}),
    ));
    out.push(SseEvent::named(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    out
}

/// The Anthropic error body for an HTTP status.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The answer to `POST /v1/messages/count_tokens`: a rough count (4 bytes a token) of the body.
pub(crate) fn count_tokens(body_len: usize) -> Value {
    json!({"input_tokens": body_len.div_ceil(4)})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::script::Turn;
    use crate::server::sse;

    fn wire(events: &[SseEvent]) -> String {
        events.iter().map(SseEvent::encode).collect()
    }

    #[test]
    fn stream_reassembles_to_the_scripted_blocks_and_usage() {
        let turn = Turn::default()
            .then_thinking("let me look", "sig-1")
            .then_text("I will read it")
            .then_tool_call("Read", json!({"file_path": "/tmp/x"}))
            .with_usage(Usage::new(100, 27).with_cache(5, 7));
        let ctx = Ctx {
            turn: &turn,
            model: "claude-test".into(),
            seq: 3,
        };
        let Answer::Stream(events) = answer(&ctx, true) else {
            panic!("expected a stream")
        };
        let parsed = sse::parse(&wire(&events));
        assert_eq!(parsed, events);
        let names: Vec<_> = parsed.iter().filter_map(|e| e.event.clone()).collect();
        assert_eq!(names.first().map(String::as_str), Some("message_start"));
        assert_eq!(names.last().map(String::as_str), Some("message_stop"));
        for e in &parsed {
            let v = e.json().expect("every data line is JSON");
            assert_eq!(Some(v["type"].as_str().unwrap_or("")), e.event.as_deref());
        }
        let start = parsed[0].json().unwrap();
        assert_eq!(start["message"]["id"], "msg_testkit_0003");
        assert_eq!(start["message"]["usage"]["input_tokens"], 100);
        assert_eq!(start["message"]["usage"]["output_tokens"], 1);
        let (mut thinking, mut sig, mut text, mut json_text) =
            (String::new(), String::new(), String::new(), String::new());
        for e in &parsed {
            let v = e.json().unwrap();
            let d = &v["delta"];
            match d["type"].as_str() {
                Some("thinking_delta") => thinking += d["thinking"].as_str().unwrap(),
                Some("signature_delta") => sig += d["signature"].as_str().unwrap(),
                Some("text_delta") => text += d["text"].as_str().unwrap(),
                Some("input_json_delta") => json_text += d["partial_json"].as_str().unwrap(),
                _ => {}
            }
        }
        assert_eq!(thinking, "let me look");
        assert_eq!(sig, "sig-1");
        assert_eq!(text, "I will read it");
        assert_eq!(
            serde_json::from_str::<Value>(&json_text).unwrap(),
            json!({"file_path": "/tmp/x"})
        );
        let delta = parsed[parsed.len() - 2].json().unwrap();
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta["usage"]["output_tokens"], 27);
        assert_eq!(delta["usage"]["cache_read_input_tokens"], 5);
        assert_eq!(delta["usage"]["cache_creation_input_tokens"], 7);
    }

    #[test]
    fn non_streaming_message_has_content_and_full_usage() {
        let turn = Turn::text("hi").with_usage(Usage::new(3, 4));
        let ctx = Ctx {
            turn: &turn,
            model: "m".into(),
            seq: 1,
        };
        let Answer::Json(v) = answer(&ctx, false) else {
            panic!("expected JSON")
        };
        assert_eq!(v["content"], json!([{"type": "text", "text": "hi"}]));
        assert_eq!(v["stop_reason"], "end_turn");
        assert_eq!(v["usage"]["output_tokens"], 4);
    }

    #[test]
    fn overloaded_error_body_is_typed() {
        assert_eq!(
            error_body(529, "Overloaded")["error"]["type"],
            "overloaded_error"
        );
    }
}
