//! OpenAI Responses API (`POST /v1/responses`), as Codex reads it.

use serde_json::{Value, json};

use super::render::{Answer, Ctx, arguments_text, pieces};
use super::script::{Block, Usage};
use super::sse::SseEvent;

/// Renders the turn as a streaming or a non-streaming Responses answer.
pub(crate) fn answer(ctx: &Ctx<'_>, stream: bool) -> Answer {
    if stream {
        Answer::Stream(events(ctx))
    } else {
        Answer::Json(response(ctx, "completed", items(ctx), true))
    }
}

/// OpenAI usage: input includes cached input.
pub(crate) fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.total_input(),
        "input_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.total_input() + u.output_tokens,
    })
}

fn response(ctx: &Ctx<'_>, status: &str, output: Vec<Value>, with_usage: bool) -> Value {
    json!({
        "id": ctx.id("resp"),
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": ctx.model,
        "output": output,
        "usage": if with_usage { usage(&ctx.turn.usage) } else { Value::Null },
        "error": null,
        "incomplete_details": null,
    })
}

/// The finished output items, one per block.
fn items(ctx: &Ctx<'_>) -> Vec<Value> {
    ctx.turn
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| item(ctx, i, b, true))
        .collect()
}

/// One output item, `done` with its content or as first announced (empty).
fn item(ctx: &Ctx<'_>, index: usize, block: &Block, done: bool) -> Value {
    match block {
        Block::Text(text) => json!({
            "type": "message", "id": ctx.item_id("msg", index),
            "status": if done { "completed" } else { "in_progress" }, "role": "assistant",
            "content": if done {
                json!([{"type": "output_text", "text": text, "annotations": []}])
            } else {
                json!([])
            },
        }),
        Block::Thinking { text, signature } => json!({
            "type": "reasoning", "id": ctx.item_id("rs", index),
            "summary": if done { json!([{"type": "summary_text", "text": text}]) } else { json!([]) },
            "encrypted_content": if done { json!(signature) } else { Value::Null },
        }),
        Block::ToolCall {
            id,
            name,
            arguments,
        } => {
            let mut call = json!({
                "type": "function_call", "id": ctx.item_id("fc", index),
                "call_id": id.clone().unwrap_or_else(|| ctx.item_id("call", index)),
                "name": name,
                "arguments": if done { arguments_text(arguments) } else { String::new() },
                "status": if done { "completed" } else { "in_progress" },
            });
            if let Some((namespace, tool)) = mcp_namespace(name) {
                call["namespace"] = json!(namespace);
                call["name"] = json!(tool);
            }
            call
        }
    }
}

/// An MCP tool named the qualified way, `mcp__<server>__<tool>` (Claude Code's spelling), is
/// called the way Codex offers MCP tools in its Responses requests: inside the `namespace`
/// tool `mcp__<server>`, as `{"namespace": "mcp__<server>", "name": "<tool>"}` (Codex 0.169,
/// measured in transcript-mcp's `tests/real_codex_gemini.rs`). Server names hold no `__`.
fn mcp_namespace(name: &str) -> Option<(String, &str)> {
    let rest = name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then(|| (format!("mcp__{server}"), tool))
}

/// The Responses stream of one turn, in OpenAI's order: created, in progress, each output item
/// (added, its deltas, done), completed; every event numbered by `sequence_number`.
fn events(ctx: &Ctx<'_>) -> Vec<SseEvent> {
    let mut out = Stream::default();
    out.push(
        "response.created",
        json!({"response": response(ctx, "in_progress", vec![], false)}),
    );
    out.push(
        "response.in_progress",
        json!({"response": response(ctx, "in_progress", vec![], false)}),
    );
    for (index, block) in ctx.turn.blocks.iter().enumerate() {
        out.push(
            "response.output_item.added",
            json!({"output_index": index, "item": item(ctx, index, block, false)}),
        );
        match block {
            Block::Text(text) => text_events(&mut out, &ctx.item_id("msg", index), index, text),
            Block::Thinking { text, .. } => {
                reasoning_events(&mut out, &ctx.item_id("rs", index), index, text);
            }
            Block::ToolCall { arguments, .. } => {
                let text = arguments_text(arguments);
                call_events(&mut out, &ctx.item_id("fc", index), index, &text);
            }
        }
        out.push(
            "response.output_item.done",
            json!({"output_index": index, "item": item(ctx, index, block, true)}),
        );
    }
    out.push(
        "response.completed",
        json!({"response": response(ctx, "completed", items(ctx), true)}),
    );
    out.numbered()
}

/// Events of a stream in the making: (name, body with its `type`).
#[derive(Default)]
struct Stream(Vec<(String, Value)>);

impl Stream {
    fn push(&mut self, name: &str, mut v: Value) {
        v["type"] = json!(name);
        self.0.push((name.to_owned(), v));
    }

    /// The events with their `sequence_number`, from 0.
    fn numbered(self) -> Vec<SseEvent> {
        self.0
            .into_iter()
            .enumerate()
            .map(|(n, (name, mut v))| {
                v["sequence_number"] = json!(n);
                SseEvent::named(&name, &v)
            })
            .collect()
    }
}

/// A message item's content part: added empty, the text in deltas, then done.
fn text_events(out: &mut Stream, item_id: &str, index: usize, text: &str) {
    let part = json!({"type": "output_text", "text": "", "annotations": []});
    out.push(
        "response.content_part.added",
        json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
    );
    for piece in pieces(text) {
        out.push(
            "response.output_text.delta",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "delta": piece}),
        );
    }
    out.push(
        "response.output_text.done",
        json!({"item_id": item_id, "output_index": index, "content_index": 0, "text": text}),
    );
    let part = json!({"type": "output_text", "text": text, "annotations": []});
    out.push(
        "response.content_part.done",
        json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
    );
}

/// A reasoning item's summary part: added empty, the text in deltas, then done.
fn reasoning_events(out: &mut Stream, item_id: &str, index: usize, text: &str) {
    let ids = json!({"item_id": item_id, "output_index": index, "summary_index": 0});
    let with = |extra: Value| {
        let mut v = ids.clone();
        if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
            v.extend(extra.clone());
        }
        v
    };
    out.push(
        "response.reasoning_summary_part.added",
        with(json!({"part": {"type": "summary_text", "text": ""}})),
    );
    for piece in pieces(text) {
        out.push(
            "response.reasoning_summary_text.delta",
            with(json!({"delta": piece})),
        );
    }
    out.push(
        "response.reasoning_summary_text.done",
        with(json!({"text": text})),
    );
    out.push(
        "response.reasoning_summary_part.done",
        with(json!({"part": {"type": "summary_text", "text": text}})),
    );
}

/// A function call's arguments: in deltas, then done.
fn call_events(out: &mut Stream, item_id: &str, index: usize, text: &str) {
    for piece in pieces(text) {
        out.push(
            "response.function_call_arguments.delta",
            json!({"item_id": item_id, "output_index": index, "delta": piece}),
        );
    }
    out.push(
        "response.function_call_arguments.done",
        json!({"item_id": item_id, "output_index": index, "arguments": text}),
    );
}

/// The OpenAI error body for an HTTP status (Responses and Chat Completions share it).
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        400 => ("invalid_request_error", "invalid_request"),
        401 => ("invalid_request_error", "invalid_api_key"),
        404 => ("invalid_request_error", "not_found"),
        429 => ("rate_limit_exceeded", "rate_limit_exceeded"),
        503 => ("server_error", "server_is_overloaded"),
        _ => ("server_error", "server_error"),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::script::Turn;
    use crate::server::sse;

    #[test]
    fn stream_reassembles_items_and_completes_with_usage() {
        let turn = Turn::default()
            .then_thinking("plan", "enc-1")
            .then_text("running it")
            .then_tool_call("exec_command", json!({"cmd": "cat notes.txt"}))
            .with_usage(Usage::new(50, 20).with_cache(30, 0).with_reasoning(8));
        let ctx = Ctx {
            turn: &turn,
            model: "gpt-test".into(),
            seq: 2,
        };
        let Answer::Stream(events) = answer(&ctx, true) else {
            panic!("expected a stream")
        };
        let wire: String = events.iter().map(SseEvent::encode).collect();
        let parsed = sse::parse(&wire);
        assert_eq!(parsed, events);
        let values: Vec<Value> = parsed.iter().map(|e| e.json().unwrap()).collect();
        for (n, (e, v)) in parsed.iter().zip(&values).enumerate() {
            assert_eq!(e.event.as_deref(), v["type"].as_str());
            assert_eq!(v["sequence_number"], n);
        }
        assert_eq!(values[0]["type"], "response.created");
        assert_eq!(values[0]["response"]["id"], "resp_testkit_0002");
        let text: String = values
            .iter()
            .filter(|v| v["type"] == "response.output_text.delta")
            .map(|v| v["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, "running it");
        let args: String = values
            .iter()
            .filter(|v| v["type"] == "response.function_call_arguments.delta")
            .map(|v| v["delta"].as_str().unwrap())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&args).unwrap(),
            json!({"cmd": "cat notes.txt"})
        );
        let done: Vec<&Value> = values
            .iter()
            .filter(|v| v["type"] == "response.output_item.done")
            .map(|v| &v["item"])
            .collect();
        assert_eq!(done[0]["type"], "reasoning");
        assert_eq!(done[0]["encrypted_content"], "enc-1");
        assert_eq!(done[2]["type"], "function_call");
        assert_eq!(done[2]["call_id"], "call_testkit_0002_2");
        let last = values.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        let u = &last["response"]["usage"];
        assert_eq!(u["input_tokens"], 80);
        assert_eq!(u["input_tokens_details"]["cached_tokens"], 30);
        assert_eq!(u["output_tokens"], 20);
        assert_eq!(u["output_tokens_details"]["reasoning_tokens"], 8);
        assert_eq!(u["total_tokens"], 100);
    }

    #[test]
    fn a_qualified_mcp_tool_is_called_inside_its_namespace_as_codex_offers_it() {
        let turn = Turn::default()
            .then_tool_call("mcp__fault__echo", json!({"text": "x"}))
            .then_tool_call("mcp__files__read__all", json!({}))
            .then_tool_call("exec_command", json!({}))
            .then_tool_call("mcp__bad", json!({}));
        let ctx = Ctx {
            turn: &turn,
            model: "gpt-test".into(),
            seq: 1,
        };
        let Answer::Json(body) = answer(&ctx, false) else {
            panic!("expected JSON")
        };
        let calls: Vec<(Value, Value)> = body["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["namespace"].clone(), c["name"].clone()))
            .collect();
        assert_eq!(
            calls,
            [
                (json!("mcp__fault"), json!("echo")),
                (json!("mcp__files"), json!("read__all")),
                (Value::Null, json!("exec_command")),
                (Value::Null, json!("mcp__bad")),
            ]
        );
    }
}
