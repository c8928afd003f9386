//! What the server received: every request, recorded, with helpers to read what an agent sent.

use std::fmt;

use serde_json::Value;

/// The API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// OpenAI Responses (`/v1/responses`).
    OpenAiResponses,
    /// Gemini (`/v1beta/models/...`).
    Gemini,
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    OpenAiChat,
}

impl Provider {
    /// Every provider, in a fixed order.
    pub const ALL: [Provider; 4] = [
        Provider::Anthropic,
        Provider::OpenAiResponses,
        Provider::Gemini,
        Provider::OpenAiChat,
    ];
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Gemini => "gemini",
            Provider::OpenAiChat => "openai-chat",
        })
    }
}

/// How the server treated a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handling {
    /// A generation request answered with script turn `turn` (0-based), possibly a fault.
    Turn(usize),
    /// A generation request beyond the script answered with the script's `after_end` fault.
    AfterEnd,
    /// A generation request beyond the script: answered HTTP 400 with a readable message.
    Unscripted,
    /// A generation request refused with HTTP 400: it did not carry what its turn expects
    /// (strict matching), a request before it did not, or the script refuses every request.
    Refused,
    /// A side request answered minimally: token counting, model listing, or a generation
    /// request beside the step's conversation ([`crate::server::Script::conversation`]).
    Auxiliary,
    /// An endpoint the server does not know: answered HTTP 404.
    Unknown,
}

/// One generation request the server answered in full, as it billed it: its own log, the
/// truth a test compares a transcript's per-turn model and usage with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bill {
    /// The request's [`RecordedRequest::index`].
    pub request: usize,
    /// The API it spoke.
    pub provider: Provider,
    /// The model the request named (its path for Gemini, its body's `model` otherwise).
    pub model: String,
    /// What the server billed for it (the answering script turn's usage).
    pub usage: super::script::Usage,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// 0-based arrival order on this server.
    pub index: usize,
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Path without the query, e.g. `/v1/messages`.
    pub path: String,
    /// The query string without `?`, if any (e.g. `beta=true`, `alt=sse`).
    pub query: Option<String>,
    /// Headers in arrival order, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `None` when empty or not JSON (see [`RecordedRequest::raw_body`]).
    pub body: Option<Value>,
    /// The body as text (lossy UTF-8).
    pub raw_body: String,
    /// The API the path belongs to, if any.
    pub provider: Option<Provider>,
    /// What the server did with it.
    pub handling: Handling,
}

impl RecordedRequest {
    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether this request asked for a model answer (as opposed to a side request).
    pub fn is_generation(&self) -> bool {
        matches!(
            self.handling,
            Handling::Turn(_) | Handling::AfterEnd | Handling::Unscripted | Handling::Refused
        )
    }

    /// The names of the tools the request offered the model, in order.
    pub fn tool_names(&self) -> Vec<String> {
        let Some(body) = &self.body else {
            return Vec::new();
        };
        let tools = body["tools"].as_array().into_iter().flatten();
        match self.provider {
            Some(Provider::Gemini) => tools
                .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
                .filter_map(|f| f["name"].as_str().map(str::to_owned))
                .collect(),
            _ => tools
                .filter_map(|t| {
                    t["name"]
                        .as_str()
                        .or_else(|| t["function"]["name"].as_str())
                        .or_else(|| t["type"].as_str())
                        .map(str::to_owned)
                })
                .collect(),
        }
    }

    /// The text of every tool result the agent sent back in this request, in order:
    /// Anthropic `tool_result` blocks, Responses `function_call_output` items, Gemini
    /// `functionResponse` parts (their `response` as JSON text), Chat `tool` messages.
    pub fn tool_results(&self) -> Vec<String> {
        let (Some(body), Some(provider)) = (&self.body, self.provider) else {
            return Vec::new();
        };
        sent_results(provider, body)
            .into_iter()
            .map(|r| match provider {
                Provider::Gemini => r.raw.to_string(),
                _ => r.text,
            })
            .collect()
    }
}

/// One tool result a request sends back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SentResult {
    /// The call id it answers, when the API carries one.
    pub id: Option<String>,
    /// Its text: the string content, the joined `text` of content parts, Gemini's
    /// `response.output` (else `response.error`, else the response as JSON text).
    pub text: String,
    /// The value as sent.
    pub raw: Value,
    /// Which message of the request holds it (results of one turn share it).
    pub group: usize,
    /// The call it answers as the request's history shows it: tool name and arguments.
    pub call: Option<(String, Value)>,
}

/// One tool call in a request's history: id (if any), tool name, arguments.
type Call = (Option<String>, String, Value);

/// Arguments sent as JSON text (OpenAI) parsed; anything else as is.
fn arguments(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
        other => other.clone(),
    }
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// Every tool result in a request body of `provider`, in order (the whole history: callers
/// pick the ones they expect), each with the call it answers when the history shows it.
pub(crate) fn sent_results(provider: Provider, body: &Value) -> Vec<SentResult> {
    match provider {
        Provider::Gemini => gemini_results(body),
        _ => {
            let (calls, mut results) = match provider {
                Provider::Anthropic => anthropic_history(body),
                Provider::OpenAiResponses => responses_history(body),
                _ => chat_history(body),
            };
            for r in &mut results {
                r.call = calls
                    .iter()
                    .find(|(id, _, _)| id.is_some() && *id == r.id)
                    .map(|(_, name, args)| (name.clone(), args.clone()));
            }
            results
        }
    }
}

fn result(id: Option<String>, content: &Value, group: usize) -> SentResult {
    SentResult {
        id,
        text: text_of(content),
        raw: content.clone(),
        group,
        call: None,
    }
}

fn anthropic_history(body: &Value) -> (Vec<Call>, Vec<SentResult>) {
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    for (group, m) in items(&body["messages"]).iter().enumerate() {
        for b in items(&m["content"]) {
            if b["type"] == "tool_use" {
                calls.push((string(&b["id"]), text_of(&b["name"]), b["input"].clone()));
            } else if b["type"] == "tool_result" {
                results.push(result(string(&b["tool_use_id"]), &b["content"], group));
            }
        }
    }
    (calls, results)
}

fn responses_history(body: &Value) -> (Vec<Call>, Vec<SentResult>) {
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    // Results that follow one another are one turn's.
    let mut group = 0;
    let mut in_results = false;
    for i in items(&body["input"]) {
        let kind = i["type"].as_str().unwrap_or_default();
        if kind == "function_call_output" || kind == "custom_tool_call_output" {
            group += usize::from(!in_results);
            in_results = true;
            results.push(result(string(&i["call_id"]), &i["output"], group));
            continue;
        }
        in_results = false;
        if kind == "function_call" || kind == "custom_tool_call" {
            let args = if i["arguments"].is_null() {
                &i["input"]
            } else {
                &i["arguments"]
            };
            calls.push((string(&i["call_id"]), text_of(&i["name"]), arguments(args)));
        }
    }
    (calls, results)
}

fn chat_history(body: &Value) -> (Vec<Call>, Vec<SentResult>) {
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    let mut group = 0;
    for m in items(&body["messages"]) {
        if m["role"] == "tool" {
            results.push(result(string(&m["tool_call_id"]), &m["content"], group));
            continue;
        }
        group += 1;
        for c in items(&m["tool_calls"]) {
            let f = &c["function"];
            calls.push((
                string(&c["id"]),
                text_of(&f["name"]),
                arguments(&f["arguments"]),
            ));
        }
    }
    (calls, results)
}

/// Gemini's `functionResponse` parts, each paired with the `functionCall` of the model content
/// before it: by id when both have one, else the first call of that name not yet answered.
fn gemini_results(body: &Value) -> Vec<SentResult> {
    let mut out = Vec::new();
    let mut calls: Vec<Call> = Vec::new();
    for (group, c) in items(&body["contents"]).iter().enumerate() {
        let parts = items(&c["parts"]);
        if c["role"] == "model" {
            calls = parts
                .iter()
                .filter_map(|p| p.get("functionCall"))
                .map(|f| (string(&f["id"]), text_of(&f["name"]), f["args"].clone()))
                .collect();
            continue;
        }
        let mut answered = vec![false; calls.len()];
        for r in parts.iter().filter_map(|p| p.get("functionResponse")) {
            let response = &r["response"];
            let text = match (&response["output"], &response["error"]) {
                (Value::String(s), _) | (Value::Null, Value::String(s)) => s.clone(),
                _ => response.to_string(),
            };
            let (id, name) = (string(&r["id"]), text_of(&r["name"]));
            let by_id = calls.iter().position(|(i, _, _)| i.is_some() && *i == id);
            let by_name = || {
                calls
                    .iter()
                    .enumerate()
                    .position(|(k, (_, n, _))| !answered[k] && *n == name)
            };
            let call = by_id.or_else(by_name).map(|k| {
                answered[k] = true;
                (calls[k].1.clone(), calls[k].2.clone())
            });
            out.push(SentResult {
                id,
                text,
                raw: response.clone(),
                group,
                call: call.or(Some((name, Value::Null))),
            });
        }
    }
    out
}

/// Text of a content value: a string, or the concatenated `text` of an array of parts.
pub(crate) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(provider: Provider, body: Value) -> RecordedRequest {
        RecordedRequest {
            index: 0,
            method: "POST".into(),
            path: "/".into(),
            query: None,
            headers: vec![("x-api-key".into(), "k".into())],
            body: Some(body),
            raw_body: String::new(),
            provider: Some(provider),
            handling: Handling::Turn(1),
        }
    }

    #[test]
    fn tool_results_are_read_per_provider() {
        let a = request(
            Provider::Anthropic,
            json!({"messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "one"},
                {"type": "tool_result", "tool_use_id": "u", "content": [{"type": "text", "text": "two"}]}
            ]}]}),
        );
        assert_eq!(a.tool_results(), ["one", "two"]);
        let r = request(
            Provider::OpenAiResponses,
            json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "out"}]}),
        );
        assert_eq!(r.tool_results(), ["out"]);
        let g = request(
            Provider::Gemini,
            json!({"contents": [{"role": "user", "parts": [
                {"functionResponse": {"name": "read_file", "response": {"output": "x"}}}]}]}),
        );
        assert_eq!(g.tool_results(), [r#"{"output":"x"}"#]);
        let c = request(
            Provider::OpenAiChat,
            json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": "res"}]}),
        );
        assert_eq!(c.tool_results(), ["res"]);
        assert_eq!(a.header("X-API-KEY"), Some("k"));
    }

    #[test]
    fn tool_names_are_read_per_provider() {
        let g = request(
            Provider::Gemini,
            json!({"tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "glob"}]}]}),
        );
        assert_eq!(g.tool_names(), ["read_file", "glob"]);
        let c = request(
            Provider::OpenAiChat,
            json!({"tools": [{"type": "function", "function": {"name": "shell"}}]}),
        );
        assert_eq!(c.tool_names(), ["shell"]);
    }
}
