//! An HTTP agent speaking the OpenAI-compatible Chat Completions API with a
//! tool loop.
//!
//! Each request sends the system and user prompts, the conversation so far
//! and the step's router tools (as functions whose parameters are the
//! tools' own JSON Schemas). When the model answers with `tool_calls`, each
//! call runs through the agent seam under the model's call id (router
//! fidelity `tool.call` / `tool.result`); a tool the step does not offer is
//! never run, the model gets the refusal as the tool's error result and the
//! transcript records the pair. The results go back as `tool` messages and
//! the next turn starts; the
//! loop ends on an answer without tool calls or at the turn limit (an
//! error). Every model response becomes one `message.assistant`: its text
//! and `tool_use` blocks (fidelity `agent_emitted`) followed by the
//! `tool_result` blocks answering them (fidelity `router`), with provider
//! `openai`, the model and the usage it reported (decisions 10, 11).
//!
//! The client is deliberately small: plain `http://` (a local gateway or a
//! test server), HTTP/1.1 with `Connection: close`, `Content-Length` or
//! chunked responses. For TLS endpoints, register your own [`AgentRunner`].

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use transcript_domain::{ContentBlock, Fidelity, MessagePayload, RawJson, Role, Usage};

use crate::agent::{AgentError, AgentReply, AgentRequest, AgentRunner, AgentSeam};
use crate::template::value_to_text;
use crate::tools::any_object;

/// Default turn limit when the step sets none.
pub const DEFAULT_MAX_TURNS: u32 = 8;

/// Runs agents against an OpenAI-compatible `/chat/completions` endpoint.
#[derive(Debug, Clone)]
pub struct HttpAgentRunner {
    base_url: String,
    api_key: Option<String>,
    default_model: String,
}

impl HttpAgentRunner {
    /// A runner for `base_url` (e.g. `http://127.0.0.1:8080/v1`); requests
    /// go to `<base_url>/chat/completions`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: None,
            default_model: "gpt-4o-mini".into(),
        }
    }

    /// Sends `Authorization: Bearer <key>`.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The model used when the step names none.
    pub fn with_default_model(mut self, model: impl Into<String>) -> Self {
        self.default_model = model.into();
        self
    }
}

fn usage_of(v: &Value) -> Option<Usage> {
    let u = v.get("usage")?;
    let get = |p: &[&str]| {
        let mut cur = u;
        for k in p {
            cur = cur.get(*k)?;
        }
        cur.as_u64()
    };
    let cached = get(&["prompt_tokens_details", "cached_tokens"]);
    let usage = Usage {
        // Decision 10: input tokens exclude cache reads.
        input_tokens: get(&["prompt_tokens"]).map(|p| p.saturating_sub(cached.unwrap_or(0))),
        output_tokens: get(&["completion_tokens"]),
        cache_read_tokens: cached,
        reasoning_tokens: get(&["completion_tokens_details", "reasoning_tokens"]),
        ..Usage::default()
    };
    (!usage.is_empty()).then_some(usage)
}

#[async_trait]
impl AgentRunner for HttpAgentRunner {
    async fn run(&self, request: AgentRequest, seam: &AgentSeam) -> Result<AgentReply, AgentError> {
        let model = request
            .model
            .clone()
            .unwrap_or_else(|| self.default_model.clone());
        let mut messages = Vec::new();
        if !request.system_prompt.is_empty() {
            messages.push(json!({"role": "system", "content": request.system_prompt}));
        }
        messages.push(json!({"role": "user", "content": request.prompt}));
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t,
                    "description": format!("router tool {t}"),
                    "parameters": seam.tool_parameters(t).unwrap_or_else(any_object),
                }})
            })
            .collect();
        let max_turns = request.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        let url = format!("{}/chat/completions", self.base_url);
        for _turn in 0..max_turns {
            let mut body = json!({"model": model, "messages": messages});
            if !tools.is_empty() {
                body["tools"] = json!(tools);
            }
            let response = tokio::select! {
                r = post_json(&url, &body, self.api_key.as_deref()) => r?,
                _ = seam.cancel().cancelled() => return Err(AgentError("cancelled".into())),
            };
            let message = response
                .pointer("/choices/0/message")
                .cloned()
                .ok_or_else(|| {
                    AgentError(format!(
                        "response has no choices[0].message: {response:.300}"
                    ))
                })?;
            let text = message
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let calls = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut blocks = Vec::new();
            if !text.is_empty() {
                blocks.push(ContentBlock::text(Fidelity::AgentEmitted, text.clone()));
            }
            let mut parsed = Vec::new();
            for call in &calls {
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let name = call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let args_text = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("{}");
                // Arguments are a JSON string; keep unparsable ones as text.
                let args = serde_json::from_str::<Value>(args_text)
                    .unwrap_or_else(|_| Value::String(args_text.to_owned()));
                blocks.push(ContentBlock::tool_use(
                    Fidelity::AgentEmitted,
                    name.clone(),
                    id.clone(),
                    RawJson::from_value(&args).unwrap_or_default(),
                ));
                parsed.push((id, name, args));
            }
            let mut tool_messages = Vec::new();
            for (id, name, args) in parsed {
                let outcome = seam.call_tool(&name, args, Some(id.clone())).await;
                let content = match &outcome {
                    Ok(v) => v.clone(),
                    Err(e) => json!({"error": e.to_string()}),
                };
                blocks.push(ContentBlock::tool_result(
                    Fidelity::Router,
                    id.clone(),
                    RawJson::from_value(&content).unwrap_or_default(),
                ));
                tool_messages.push(json!({
                    "role": "tool",
                    "tool_call_id": id,
                    "content": value_to_text(&content),
                }));
            }
            let mut payload = MessagePayload::new(Role::Assistant, blocks);
            payload.provider = Some("openai".into());
            payload.model = response
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned);
            payload.usage = usage_of(&response);
            seam.assistant(payload).await;
            if calls.is_empty() {
                return Ok(AgentReply {
                    output: text,
                    ..AgentReply::default()
                });
            }
            if seam.cancel().is_cancelled() {
                return Err(AgentError("cancelled".into()));
            }
            messages.push(message);
            messages.extend(tool_messages);
        }
        Err(AgentError(format!(
            "turn limit of {max_turns} reached without a final answer"
        )))
    }
}

/// POSTs JSON over plain HTTP/1.1 and parses the JSON answer.
async fn post_json(url: &str, body: &Value, api_key: Option<&str>) -> Result<Value, AgentError> {
    let err = |m: String| AgentError(format!("POST {url}: {m}"));
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| err("only http:// URLs are supported".into()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let payload = serde_json::to_vec(body).map_err(|e| err(e.to_string()))?;
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        payload.len()
    );
    if let Some(k) = api_key {
        head.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| err(format!("connect failed: {e}")))?;
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| err(e.to_string()))?;
    stream
        .write_all(&payload)
        .await
        .map_err(|e| err(e.to_string()))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .map_err(|e| err(format!("read failed: {e}")))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| err("malformed HTTP response".into()))?;
    let headers = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let status: u16 = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| err("no HTTP status".into()))?;
    let lower = headers.to_ascii_lowercase();
    if lower.contains("transfer-encoding: chunked") {
        body = dechunk(&body).ok_or_else(|| err("malformed chunked body".into()))?;
    } else if let Some(len) = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        body.truncate(len);
    }
    if !(200..300).contains(&status) {
        return Err(err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body)
                .chars()
                .take(300)
                .collect::<String>()
        )));
    }
    serde_json::from_slice(&body).map_err(|e| err(format!("response is not JSON: {e}")))
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dechunks_and_maps_usage() {
        assert_eq!(
            dechunk(b"4\r\nWiki\r\n5;x=1\r\npedia\r\n0\r\n\r\n").unwrap(),
            b"Wikipedia"
        );
        assert!(dechunk(b"zz\r\n").is_none());
        let u = usage_of(
            &json!({"usage": {"prompt_tokens": 10, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 1}}}),
        )
        .unwrap();
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.reasoning_tokens
            ),
            (Some(6), Some(3), Some(4), Some(1))
        );
        assert!(usage_of(&json!({})).is_none());
    }
}
