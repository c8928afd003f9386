//! OpenAI Chat Completions (`POST /v1/chat/completions`), for our own HTTP agent.

use serde_json::{Value, json};

use super::render::{Answer, Ctx, arguments_text, pieces};
use super::script::{Block, Usage};
use super::sse::SseEvent;

/// Renders the turn as a streaming or a non-streaming Chat Completions answer. The usage chunk
/// is streamed only when the request asked for it (`stream_options.include_usage`).
pub(crate) fn answer(ctx: &Ctx<'_>, stream: bool, include_usage: bool) -> Answer {
    if stream {
        Answer::Stream(events(ctx, include_usage))
    } else {
        Answer::Json(completion(ctx))
    }
}

/// Chat Completions usage: prompt tokens include cached input.
pub(crate) fn usage(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.total_input(),
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_input() + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    })
}

fn finish_reason(ctx: &Ctx<'_>) -> &'static str {
    if ctx.turn.calls_tools() {
        "tool_calls"
    } else {
        "stop"
    }
}

/// Tool calls in order with their stream index and id.
fn tool_calls<'a>(ctx: &'a Ctx<'_>) -> Vec<(usize, String, &'a str, String)> {
    ctx.turn
        .blocks
        .iter()
        .enumerate()
        .filter_map(|(i, b)| match b {
            Block::ToolCall {
                id,
                name,
                arguments,
            } => Some((
                id.clone().unwrap_or_else(|| ctx.item_id("call", i)),
                name.as_str(),
                arguments_text(arguments),
            )),
            _ => None,
        })
        .enumerate()
        .map(|(n, (id, name, args))| (n, id, name, args))
        .collect()
}

fn text(ctx: &Ctx<'_>, thinking: bool) -> String {
    ctx.turn
        .blocks
        .iter()
        .filter_map(|b| match (b, thinking) {
            (Block::Text(t), false) => Some(t.as_str()),
            (Block::Thinking { text, .. }, true) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn completion(ctx: &Ctx<'_>) -> Value {
    let mut message = json!({"role": "assistant", "content": text(ctx, false)});
    let reasoning = text(ctx, true);
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    let calls = tool_calls(ctx);
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|(_, id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
    }
    json!({
        "id": ctx.id("chatcmpl"), "object": "chat.completion", "created": 0, "model": ctx.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(ctx)}],
        "usage": usage(&ctx.turn.usage),
    })
}

fn events(ctx: &Ctx<'_>, include_usage: bool) -> Vec<SseEvent> {
    let chunk = |delta: Value, finish: Value| {
        SseEvent::data(&json!({
            "id": ctx.id("chatcmpl"), "object": "chat.completion.chunk", "created": 0,
            "model": ctx.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in pieces(&text(ctx, true))
        .into_iter()
        .filter(|p| !p.is_empty())
    {
        out.push(chunk(json!({"reasoning_content": piece}), Value::Null));
    }
    for piece in pieces(&text(ctx, false))
        .into_iter()
        .filter(|p| !p.is_empty())
    {
        out.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (index, id, name, args) in tool_calls(ctx) {
        out.push(chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in pieces(&args) {
            out.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    out.push(chunk(json!({}), json!(finish_reason(ctx))));
    if include_usage {
        out.push(SseEvent::data(&json!({
            "id": ctx.id("chatcmpl"), "object": "chat.completion.chunk", "created": 0,
            "model": ctx.model, "choices": [], "usage": usage(&ctx.turn.usage),
        })));
    }
    out.push(SseEvent {
        event: None,
        data: "[DONE]".to_owned(),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::script::Turn;
    use crate::server::sse;

    fn stream(turn: &Turn, include_usage: bool) -> Vec<SseEvent> {
        let ctx = Ctx {
            turn,
            model: "gpt-chat".into(),
            seq: 4,
        };
        let Answer::Stream(events) = answer(&ctx, true, include_usage) else {
            panic!("expected a stream")
        };
        let wire: String = events.iter().map(SseEvent::encode).collect();
        let parsed = sse::parse(&wire);
        assert_eq!(parsed, events);
        parsed
    }

    #[test]
    fn stream_assembles_content_tool_calls_and_usage_then_done() {
        let turn = Turn::text("looking")
            .then_tool_call("read_file", json!({"path": "a.txt"}))
            .then_tool_call("shell", json!({"cmd": "ls"}))
            .with_usage(Usage::new(9, 6).with_cache(1, 0));
        let events = stream(&turn, true);
        assert_eq!(events.last().unwrap().data, "[DONE]");
        let values: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|e| e.json().unwrap())
            .collect();
        let mut content = String::new();
        let mut args = [String::new(), String::new()];
        let mut names = Vec::new();
        for v in &values {
            let Some(delta) = v["choices"].get(0).map(|c| &c["delta"]) else {
                continue;
            };
            content += delta["content"].as_str().unwrap_or("");
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let i = call["index"].as_u64().unwrap() as usize;
                if let Some(name) = call["function"]["name"].as_str() {
                    names.push(name.to_owned());
                }
                args[i] += call["function"]["arguments"].as_str().unwrap_or("");
            }
        }
        assert_eq!(content, "looking");
        assert_eq!(names, ["read_file", "shell"]);
        assert_eq!(
            serde_json::from_str::<Value>(&args[1]).unwrap(),
            json!({"cmd": "ls"})
        );
        let finish = &values[values.len() - 2]["choices"][0]["finish_reason"];
        assert_eq!(finish, "tool_calls");
        let usage = &values[values.len() - 1]["usage"];
        assert_eq!(usage["prompt_tokens"], 10);
        assert_eq!(usage["completion_tokens"], 6);
        assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 1);
    }

    #[test]
    fn usage_chunk_only_when_asked() {
        let events = stream(&Turn::text("x").with_usage(Usage::new(1, 1)), false);
        assert!(events.iter().all(|e| !e.data.contains("\"usage\"")));
    }
}
