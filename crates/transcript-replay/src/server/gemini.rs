//! Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`,
//! `:generateContent`, `:countTokens`), as Gemini CLI reads it.

use serde_json::{Value, json};

use super::render::{Answer, Ctx, pieces};
use super::script::{Block, Usage};
use super::sse::SseEvent;

/// Renders the turn as a streaming or a non-streaming `GenerateContentResponse`.
pub(crate) fn answer(ctx: &Ctx<'_>, stream: bool) -> Answer {
    if stream {
        Answer::Stream(events(ctx))
    } else {
        let parts: Vec<Value> = ctx
            .turn
            .blocks
            .iter()
            .flat_map(|b| parts(b, false))
            .collect();
        Answer::Json(chunk(ctx, parts, true))
    }
}

/// Gemini usage: the prompt count includes cached input, candidates exclude thoughts.
pub(crate) fn usage(u: &Usage) -> Value {
    let candidates = u.output_tokens.saturating_sub(u.reasoning_tokens);
    json!({
        "promptTokenCount": u.total_input(),
        "candidatesTokenCount": candidates,
        "thoughtsTokenCount": u.reasoning_tokens,
        "cachedContentTokenCount": u.cache_read_input_tokens,
        "totalTokenCount": u.total_input() + u.output_tokens,
    })
}

/// The parts of one block; text is split into two parts when `split` (as a stream would).
fn parts(block: &Block, split: bool) -> Vec<Value> {
    match block {
        Block::Text(text) if split => pieces(text)
            .into_iter()
            .map(|p| json!({"text": p}))
            .collect(),
        Block::Text(text) => vec![json!({"text": text})],
        Block::Thinking { text, signature } => {
            vec![json!({"text": text, "thought": true, "thoughtSignature": signature})]
        }
        Block::ToolCall {
            id,
            name,
            arguments,
        } => {
            let mut call = json!({"name": name, "args": arguments});
            if let Some(id) = id.as_deref().filter(|id| !cli_made(name, id)) {
                call["id"] = json!(id);
            }
            vec![json!({"functionCall": call})]
        }
    }
}

/// Whether `id` is one Gemini CLI made for a call the API sent without an id:
/// `<tool>_<milliseconds>_<index>` (Gemini CLI 0.61.0, `read_file_1796600803153_0`). The
/// Gemini API sends no ids: a recorded call with such an id is served without one, as the API
/// served it, and the CLI makes its own again (its results are then paired by tool and
/// arguments, `pairing`).
pub(crate) fn cli_made(name: &str, id: &str) -> bool {
    let Some(rest) = id.strip_prefix(name).and_then(|r| r.strip_prefix('_')) else {
        return false;
    };
    let mut numbers = rest.split('_');
    let digits =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    digits(numbers.next()) && digits(numbers.next()) && numbers.next().is_none()
}

fn chunk(ctx: &Ctx<'_>, parts: Vec<Value>, last: bool) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    let mut out = json!({
        "candidates": [],
        "modelVersion": ctx.turn.answered_by.as_deref().unwrap_or(&ctx.model),
        "responseId": ctx.id("gen"),
    });
    if last {
        candidate["finishReason"] = json!("STOP");
        out["usageMetadata"] = usage(&ctx.turn.usage);
    }
    out["candidates"] = json!([candidate]);
    out
}

fn events(ctx: &Ctx<'_>) -> Vec<SseEvent> {
    let parts: Vec<Value> = ctx
        .turn
        .blocks
        .iter()
        .flat_map(|b| parts(b, true))
        .collect();
    let n = parts.len();
    if n == 0 {
        return vec![SseEvent::data(&chunk(ctx, vec![], true))];
    }
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| SseEvent::data(&chunk(ctx, vec![p], i + 1 == n)))
        .collect()
}

/// The Google API error body for an HTTP status.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    json!({"error": {"code": status, "message": message, "status": kind}})
}

/// The answer to `:countTokens`: a rough count (4 bytes a token) of the body.
pub(crate) fn count_tokens(body_len: usize) -> Value {
    json!({"totalTokens": body_len.div_ceil(4)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_the_cli_made_are_not_served() {
        assert!(cli_made("read_file", "read_file_1796600803153_0"));
        assert!(!cli_made("read_file", "read_file_x_0"));
        assert!(!cli_made("read_file", "glob_1_0"));
        assert!(!cli_made("read_file", "read_file_1_0_2"));
        assert!(!cli_made("read_file", "g1"));
        let turn = crate::server::script::Turn {
            blocks: vec![
                Block::ToolCall {
                    id: Some("read_file_1796600803153_0".into()),
                    name: "read_file".into(),
                    arguments: json!({}),
                },
                Block::ToolCall {
                    id: Some("api-id".into()),
                    name: "read_file".into(),
                    arguments: json!({}),
                },
            ],
            ..Default::default()
        };
        let ctx = Ctx {
            turn: &turn,
            model: "m".into(),
            seq: 1,
        };
        let Answer::Json(v) = answer(&ctx, false) else {
            panic!("expected JSON")
        };
        let parts = &v["candidates"][0]["content"]["parts"];
        assert!(parts[0]["functionCall"].get("id").is_none(), "{parts}");
        assert_eq!(parts[1]["functionCall"]["id"], "api-id");
    }
    use crate::server::script::Turn;
    use crate::server::sse;

    #[test]
    fn stream_chunks_carry_parts_and_the_last_one_usage() {
        let turn = Turn::default()
            .then_thinking("hmm", "ts-1")
            .then_text("hello there")
            .then_tool_call("read_file", json!({"absolute_path": "/w/notes.txt"}))
            .with_usage(Usage::new(40, 12).with_cache(10, 0).with_reasoning(2));
        let ctx = Ctx {
            turn: &turn,
            model: "gemini-test".into(),
            seq: 1,
        };
        let Answer::Stream(events) = answer(&ctx, true) else {
            panic!("expected a stream")
        };
        let wire: String = events.iter().map(SseEvent::encode).collect();
        let values: Vec<Value> = sse::parse(&wire)
            .iter()
            .map(|e| e.json().unwrap())
            .collect();
        assert_eq!(values.len(), 4);
        let parts: Vec<&Value> = values
            .iter()
            .map(|v| &v["candidates"][0]["content"]["parts"][0])
            .collect();
        assert_eq!(parts[0]["thought"], true);
        assert_eq!(parts[0]["thoughtSignature"], "ts-1");
        let text: String = parts[1..3]
            .iter()
            .map(|p| p["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, "hello there");
        assert_eq!(parts[3]["functionCall"]["name"], "read_file");
        assert!(values[..3].iter().all(|v| v.get("usageMetadata").is_none()));
        let last = &values[3];
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert_eq!(last["responseId"], "gen_testkit_0001");
        let u = &last["usageMetadata"];
        assert_eq!(u["promptTokenCount"], 50);
        assert_eq!(u["candidatesTokenCount"], 10);
        assert_eq!(u["thoughtsTokenCount"], 2);
        assert_eq!(u["cachedContentTokenCount"], 10);
        assert_eq!(u["totalTokenCount"], 62);
    }
}
