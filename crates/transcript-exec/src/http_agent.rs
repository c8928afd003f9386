//! An HTTP agent speaking the OpenAI-compatible Chat Completions API with a
//! tool loop, on `reqwest` (rustls with the ring provider, so `https://`
//! endpoints work as well as a local `http://` gateway).
//!
//! Each request sends the system and user prompts, the conversation so far
//! and the step's router tools (as functions whose parameters are the
//! tools' own JSON Schemas), streaming (`stream: true` with
//! `stream_options.include_usage`). The response body, streamed or not, is
//! read through the providers crate's OpenAI normalizer — the same parser as
//! for imports — so reasoning (`reasoning_content`), refusals and tool calls
//! assembled from deltas are mapped once, in one place.
//!
//! **Causal order**: every model response becomes one `message.assistant`
//! (its thinking, text and `tool_use` blocks, fidelity `agent_emitted`,
//! provider `openai`, the model and the usage it reported) written
//! **before** the tool calls it asked for run. Each call then runs through
//! the agent seam under the model's call id (router fidelity `tool.call` /
//! `tool.result`; a tool the step does not offer is never run, the model
//! gets the refusal as the tool's error result). The results go back as
//! `tool` messages and the next turn starts; the loop ends on an answer
//! without tool calls or at the turn limit (an error). A refusal is recorded
//! as the turn's text and flagged in the step's recorded result (`warnings`: "the model
//! refused: …"); a stream that ends without its finish is an error, its
//! partial turn not recorded.
//!
//! **Endpoint**: the step's `env:` `OPENAI_BASE_URL` / `OPENAI_API_KEY`,
//! else the runner's ([`HttpAgentRunner::new`], [`HttpAgentRunner::with_api_key`]),
//! else the process environment's, else `https://api.openai.com/v1` and no
//! key. The key goes in `Authorization: Bearer <key>`.
//!
//! **Limits**: a connect timeout (10 s) and a per-request timeout
//! ([`HttpAgentRunner::with_timeout`], default 300 s), a response body cap
//! ([`HttpAgentRunner::with_max_body_bytes`], default 16 MiB), and bounded
//! retries with exponential backoff on 429, 5xx and connection failures
//! ([`RetryPolicy`], default 3 retries from 500 ms; a `Retry-After` is
//! honoured up to the backoff cap, in seconds or as an HTTP-date
//! (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110) read against the service's
//! clock ([`crate::ServiceBuilder::clock`]; a date in the past is no wait,
//! and a seam without a clock keeps the backoff); `OPENAI_MAX_RETRIES` in
//! the step's `env:` or the environment sets the count). A stream cut mid-way is not retried (part of the
//! answer may already be recorded): it fails the step.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use transcript_domain::{BlockBody, MessagePayload};

use crate::agent::{AgentError, AgentReply, AgentRequest, AgentRunner, AgentSeam};
pub use crate::http_transport::RetryPolicy;
use crate::http_transport::{Reply, http_client, read_reply, send};
use crate::template::value_to_text;
use crate::tools::any_object;

/// Default turn limit when the step sets none.
pub const DEFAULT_MAX_TURNS: u32 = 8;
/// Default base URL when neither the step, the runner nor the environment gives one.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model asked for when an agent step names none (`model:` absent): OpenAI's small chat
/// model, so an unconfigured step costs little. Replace it per step with `model:`, or for every
/// step of a runner with [`HttpAgentRunner::with_default_model`].
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// Runs agents against an OpenAI-compatible `/chat/completions` endpoint. A step without
/// `model:` asks for [`DEFAULT_MODEL`].
#[derive(Debug, Clone)]
pub struct HttpAgentRunner {
    base_url: Option<String>,
    api_key: Option<String>,
    default_model: String,
    retry: RetryPolicy,
    timeout: Duration,
    max_body_bytes: usize,
}

impl Default for HttpAgentRunner {
    fn default() -> Self {
        Self {
            base_url: None,
            api_key: None,
            default_model: DEFAULT_MODEL.into(),
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(300),
            max_body_bytes: 16 * 1024 * 1024,
        }
    }
}

impl HttpAgentRunner {
    /// A runner for `base_url` (e.g. `http://127.0.0.1:8080/v1`); requests
    /// go to `<base_url>/chat/completions`. A step's `OPENAI_BASE_URL` wins.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: Some(base_url.into()),
            ..Self::default()
        }
    }

    /// A runner taking the endpoint from the step or the environment only
    /// (`OPENAI_BASE_URL`, `OPENAI_API_KEY`): what the `transcript` binary
    /// registers for `provider: openai`.
    pub fn from_env() -> Self {
        Self::default()
    }

    /// Sends `Authorization: Bearer <key>` (a step's `OPENAI_API_KEY` wins).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The model used when the step names none.
    pub fn with_default_model(mut self, model: impl Into<String>) -> Self {
        self.default_model = model.into();
        self
    }

    /// Retries on 429, 5xx and connection failures.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Longest a request (its whole response included) may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Largest response body accepted.
    pub fn with_max_body_bytes(mut self, max: usize) -> Self {
        self.max_body_bytes = max;
        self
    }

    fn endpoint(&self, env: &BTreeMap<String, String>) -> (String, Option<String>) {
        let from = |k: &str| {
            env.get(k)
                .cloned()
                .filter(|v| !v.is_empty())
                .or_else(|| match k {
                    "OPENAI_BASE_URL" => self.base_url.clone(),
                    _ => self.api_key.clone(),
                })
                .or_else(|| std::env::var(k).ok().filter(|v| !v.is_empty()))
        };
        let base = from("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        (
            format!("{}/chat/completions", base.trim_end_matches('/')),
            from("OPENAI_API_KEY"),
        )
    }

    /// The retry policy, with `OPENAI_MAX_RETRIES` from the step's `env:` or
    /// the process environment replacing the runner's count.
    fn retry_policy(&self, env: &BTreeMap<String, String>) -> Result<RetryPolicy, AgentError> {
        let var = "OPENAI_MAX_RETRIES";
        match env.get(var).cloned().or_else(|| std::env::var(var).ok()) {
            None => Ok(self.retry),
            Some(v) => v
                .trim()
                .parse::<u32>()
                .map(|max_retries| RetryPolicy {
                    max_retries,
                    ..self.retry
                })
                .map_err(|_| AgentError::Setup(format!("{var}={v:?} is not a number of retries"))),
        }
    }

    fn client(&self) -> Result<reqwest::Client, AgentError> {
        http_client(self.timeout)
    }
}

#[async_trait]
impl AgentRunner for HttpAgentRunner {
    async fn run(&self, request: AgentRequest, seam: &AgentSeam) -> Result<AgentReply, AgentError> {
        let client = self.client()?;
        let (url, key) = self.endpoint(&request.env);
        let retry = self.retry_policy(&request.env)?;
        let model = request
            .model
            .clone()
            .unwrap_or_else(|| self.default_model.clone());
        let mut messages = first_messages(&request);
        // Call ids the model used in earlier turns (and this one).
        let mut seen_ids = HashSet::new();
        let tools = tool_specs(&request, seam);
        let max_turns = request.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        let mut warnings = Vec::new();
        for _turn in 0..max_turns {
            let mut body = json!({
                "model": model,
                "messages": messages,
                "stream": true,
                "stream_options": {"include_usage": true},
            });
            if !tools.is_empty() {
                body["tools"] = json!(tools);
            }
            let reply = tokio::select! {
                r = self.turn(&client, (&url, key.as_deref()), retry, &body, seam) => r?,
                _ = seam.cancel().cancelled() => return Err(AgentError::Cancelled),
            };
            let mut turn = answered_turn(reply, &url, &mut warnings)?;
            distinct_call_ids(&mut turn, &mut seen_ids);
            let (text, calls) = text_and_calls(&turn);
            // Causal order: the turn that asked for the tools, then the calls.
            seam.assistant(turn).await;
            if calls.is_empty() {
                return Ok(AgentReply {
                    output: text,
                    warnings,
                });
            }
            let tool_messages = call_tools(seam, &calls).await;
            if seam.cancel().is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            messages.push(assistant_message(text, &calls));
            messages.extend(tool_messages);
        }
        Err(AgentError::TurnLimit(max_turns))
    }
}

/// The conversation's start: the system prompt (if any), then the prompt.
fn first_messages(request: &AgentRequest) -> Vec<Value> {
    let mut messages = Vec::new();
    if !request.system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": request.system_prompt}));
    }
    messages.push(json!({"role": "user", "content": request.prompt}));
    messages
}

/// The step's `tools:` as the API's function declarations, each with
/// what the tool says it does ([`crate::Tool::description`]; omitted when
/// it says nothing).
fn tool_specs(request: &AgentRequest, seam: &AgentSeam) -> Vec<Value> {
    request
        .tools
        .iter()
        .map(|t| {
            let mut function = json!({
                "name": t,
                "parameters": seam.tool_parameters(t).unwrap_or_else(any_object),
            });
            if let Some(d) = seam.tool_description(t) {
                function["description"] = Value::String(d);
            }
            json!({"type": "function", "function": function})
        })
        .collect()
}

/// The turn of a reply that answered: an error, an incomplete answer or a
/// refusal without a message fails the step. A refusal is an answer (its
/// text is in the turn); `warnings` gets it, so the step's recorded result
/// tells it from an ordinary answer.
fn answered_turn(
    reply: Reply,
    url: &str,
    warnings: &mut Vec<String>,
) -> Result<MessagePayload, AgentError> {
    if let Some(e) = reply.errors.first() {
        return Err(AgentError::Provider(e.clone()));
    }
    if let Some(e) = reply.incomplete.first() {
        return Err(AgentError::Answer(format!(
            "POST {url}: incomplete answer: {e}"
        )));
    }
    warnings.extend(
        reply
            .refusals
            .iter()
            .map(|r| format!("the model refused: {r}")),
    );
    reply.turn.ok_or_else(|| {
        AgentError::Answer(match reply.refusals.first() {
            Some(r) => format!("POST {url}: the model refused without an answer: {r}"),
            None => format!("POST {url}: the answer holds no message"),
        })
    })
}

/// Runs each call `(id, name, arguments)` through the seam, in order; the
/// `tool` messages that answer them (an error as `{"error": ...}`).
async fn call_tools(seam: &AgentSeam, calls: &[(String, String, String)]) -> Vec<Value> {
    let mut tool_messages = Vec::new();
    for (id, name, args) in calls {
        let input =
            serde_json::from_str::<Value>(args).unwrap_or_else(|_| Value::String(args.clone()));
        let outcome = seam.call_tool(name, input, Some(id.clone())).await;
        let content = match &outcome {
            Ok(v) => v.clone(),
            Err(e) => json!({"error": e.to_string()}),
        };
        tool_messages.push(json!({
            "role": "tool",
            "tool_call_id": id,
            "content": value_to_text(&content),
        }));
    }
    tool_messages
}

/// The assistant message that asked for `calls`, as the API wants it back.
fn assistant_message(text: String, calls: &[(String, String, String)]) -> Value {
    json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { Value::String(text) },
        "tool_calls": calls.iter().map(|(id, name, args)| json!({
            "id": id, "type": "function",
            "function": {"name": name, "arguments": args},
        })).collect::<Vec<_>>(),
    })
}

/// Gives every tool call of the run a distinct id (#28): a model reusing an
/// id (`dup` for a read, then `dup` for a write; twice in one turn; after a
/// refused call) gets `dup~2`, `dup~3`, … in the recorded turn, the tool
/// events and the conversation sent back, so each executed call is recorded
/// under its own id and blocks and events still pair.
fn distinct_call_ids(turn: &mut MessagePayload, seen: &mut HashSet<String>) {
    for block in &mut turn.blocks {
        if let BlockBody::ToolUse { tool_id, .. } = &mut block.body {
            if seen.contains(tool_id.as_str()) {
                let mut n = 2u64;
                while seen.contains(&format!("{tool_id}~{n}")) {
                    n += 1;
                }
                *tool_id = format!("{tool_id}~{n}");
            }
            seen.insert(tool_id.clone());
        }
    }
}

/// The turn's text and its tool calls `(id, name, arguments JSON text)`.
fn text_and_calls(turn: &MessagePayload) -> (String, Vec<(String, String, String)>) {
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in &turn.blocks {
        match &block.body {
            BlockBody::Text { text: t } => text.push_str(t),
            BlockBody::ToolUse {
                tool_name,
                tool_id,
                tool_input,
            } => {
                // Arguments that were not JSON are kept as a JSON string: send the text back.
                let args = match tool_input.to_value() {
                    Value::String(s) => s,
                    _ => tool_input.get().to_owned(),
                };
                calls.push((tool_id.clone(), tool_name.clone(), args));
            }
            _ => {}
        }
    }
    (text, calls)
}

impl HttpAgentRunner {
    /// One request (with retries) and its answer read through the normalizer.
    async fn turn(
        &self,
        client: &reqwest::Client,
        (url, key): (&str, Option<&str>),
        retry: RetryPolicy,
        body: &Value,
        seam: &AgentSeam,
    ) -> Result<Reply, AgentError> {
        let response = send(client, (url, key), retry, body, &|| seam.now()).await?;
        read_reply(response, url, self.max_body_bytes).await
    }
}

/// An error with its sources ("error sending request: connection refused").
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_step_env_wins_over_the_runner_for_the_endpoint() {
        let r = HttpAgentRunner::new("http://runner/v1/").with_api_key("runner-key");
        let (url, key) = r.endpoint(&BTreeMap::new());
        assert_eq!(
            (url.as_str(), key.as_deref()),
            ("http://runner/v1/chat/completions", Some("runner-key"))
        );
        let env = BTreeMap::from([
            ("OPENAI_BASE_URL".to_owned(), "https://step/v1".to_owned()),
            ("OPENAI_API_KEY".to_owned(), "step-key".to_owned()),
        ]);
        let (url, key) = r.endpoint(&env);
        assert_eq!(
            (url.as_str(), key.as_deref()),
            ("https://step/v1/chat/completions", Some("step-key"))
        );
    }
}
