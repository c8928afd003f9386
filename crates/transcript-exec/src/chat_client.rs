//! One OpenAI-compatible Chat Completions request at a time, outside any workflow: the HTTP
//! adapter of `transcript check`'s judge (transcript-compare's `Grader` port, composed by the
//! CLI). It shares the HTTP agent's transport ([`crate::http_agent`]): the same client
//! (rustls, connect and request timeouts), the same retries of 429, 5xx and connection
//! failures ([`RetryPolicy`]), the same body cap, and the answer read through the providers
//! crate's OpenAI normalizer.
//!
//! **Endpoint**, as the HTTP agent takes it: the base URL given
//! ([`ChatClient::with_base_url`]), else `OPENAI_BASE_URL`, else
//! [`crate::http_agent::DEFAULT_BASE_URL`]; requests go to `<base>/chat/completions`. The API
//! key is read from the environment variable named by [`ChatClient::with_api_key_env`]
//! (default `OPENAI_API_KEY`) when a request is made, never stored in the client and never
//! taken from an argument; it goes in `Authorization: Bearer <key>` only.
//!
//! **Secrets**: no error carries the key: a server that quotes it back (in an error body) has
//! it replaced by `***` before the message leaves this module, and the client's `Debug` names
//! the variable, not its value. A base URL's user and password are not shown in
//! [`ChatClient::endpoint`].

use std::time::Duration;

use serde_json::json;
use transcript_domain::{BlockBody, Usage};

use crate::agent::AgentError;
use crate::http_agent::DEFAULT_BASE_URL;
use crate::http_transport::{Reply, RetryPolicy, http_client, read_reply, send};

/// The variable the key is read from unless [`ChatClient::with_api_key_env`] names another.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// A Chat Completions client for single requests (no tools, no streaming).
#[derive(Debug, Clone)]
pub struct ChatClient {
    base_url: Option<String>,
    model: String,
    api_key_env: String,
    retry: RetryPolicy,
    timeout: Duration,
    max_body_bytes: usize,
    json_object: bool,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatAnswer {
    /// The answer's text (its text blocks joined).
    pub text: String,
    /// The model the answer names, when it names one.
    pub model: Option<String>,
    /// The usage it reported.
    pub usage: Option<Usage>,
}

/// A request that got no usable answer: the endpoint and the cause (an HTTP status and the
/// provider's message, a connection failure, a refusal, an answer without a message). It
/// never holds the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ChatError {
    /// `POST <url>: <cause>`.
    pub message: String,
}

impl ChatClient {
    /// A client asking `model`, its endpoint and key from the environment (see the module).
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: None,
            model: model.into(),
            api_key_env: DEFAULT_API_KEY_ENV.to_owned(),
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(300),
            max_body_bytes: 16 * 1024 * 1024,
            json_object: false,
        }
    }

    /// The base URL (e.g. `http://127.0.0.1:8080/v1`) instead of `OPENAI_BASE_URL`; `None`
    /// keeps the environment's.
    pub fn with_base_url(mut self, base_url: Option<String>) -> Self {
        self.base_url = base_url.filter(|b| !b.is_empty());
        self
    }

    /// The environment variable holding the API key (an unset or empty one: no key sent).
    pub fn with_api_key_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = name.into();
        self
    }

    /// Retries on 429, 5xx and connection failures.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Retries after the first attempt (the default policy's backoff).
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.retry.max_retries = max_retries;
        self
    }

    /// Longest a request (its whole response included) may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Asks for a JSON object as the answer (`response_format: {"type": "json_object"}`,
    /// OpenAI's JSON mode, which most compatible servers accept).
    pub fn json_object(mut self, on: bool) -> Self {
        self.json_object = on;
        self
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The URL requests go to, without a user or password it may hold.
    pub fn endpoint(&self) -> String {
        let url = self.url();
        match reqwest::Url::parse(&url) {
            Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.to_string()
            }
            _ => url,
        }
    }

    /// `<base>/chat/completions`, the base as given, else `OPENAI_BASE_URL`, else the default.
    fn url(&self) -> String {
        let base = self
            .base_url
            .clone()
            .or_else(|| std::env::var("OPENAI_BASE_URL").ok())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        format!("{}/chat/completions", base.trim_end_matches('/'))
    }

    /// What no message may show: the key, and a password in the URL.
    fn secrets(&self, url: &str) -> Vec<String> {
        let key = std::env::var(&self.api_key_env).ok();
        let password = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.password().map(str::to_owned));
        key.into_iter()
            .chain(password)
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// Sends a system and a user message and returns the answer's text. The errors name the
    /// endpoint and the cause, with the key masked.
    pub async fn complete(&self, system: &str, user: &str) -> Result<ChatAnswer, ChatError> {
        let url = self.url();
        let shown = self.endpoint();
        let secrets = self.secrets(&url);
        let key = std::env::var(&self.api_key_env)
            .ok()
            .filter(|k| !k.is_empty());
        let mask = |e: AgentError| {
            let mut message = e.to_string().replace(&url, &shown);
            for secret in &secrets {
                message = message.replace(secret.as_str(), "***");
            }
            ChatError { message }
        };
        let mut body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "stream": false,
        });
        if self.json_object {
            body["response_format"] = json!({"type": "json_object"});
        }
        let client = http_client(self.timeout).map_err(mask)?;
        let response = send(&client, (&url, key.as_deref()), self.retry, &body, &|| None)
            .await
            .map_err(mask)?;
        let reply = read_reply(response, &url, self.max_body_bytes)
            .await
            .map_err(mask)?;
        answer(reply, &url).map_err(mask)
    }
}

impl ChatClient {
    /// [`ChatClient::complete`] for a port that speaks in strings (transcript-compare's
    /// `Grader`): the answer's text, or the error's message (the key masked). The future owns
    /// a copy of the client.
    pub fn ask(
        &self,
        system: String,
        user: String,
    ) -> impl Future<Output = Result<String, String>> + Send + 'static {
        let client = self.clone();
        async move {
            client
                .complete(&system, &user)
                .await
                .map(|a| a.text)
                .map_err(|e| e.to_string())
        }
    }
}

/// The text of a reply that answered; a provider error, an incomplete answer, a refusal or
/// a reply without a message is an error.
fn answer(reply: Reply, url: &str) -> Result<ChatAnswer, AgentError> {
    if let Some(e) = reply.errors.first() {
        return Err(AgentError::Provider(format!("POST {url}: {e}")));
    }
    if let Some(e) = reply.incomplete.first() {
        return Err(AgentError::Answer(format!(
            "POST {url}: incomplete answer: {e}"
        )));
    }
    if let Some(r) = reply.refusals.first() {
        return Err(AgentError::Answer(format!(
            "POST {url}: the model refused: {r}"
        )));
    }
    let turn = reply
        .turn
        .ok_or_else(|| AgentError::Answer(format!("POST {url}: the answer holds no message")))?;
    let text: String = turn
        .blocks
        .iter()
        .filter_map(|b| match &b.body {
            BlockBody::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    Ok(ChatAnswer {
        text,
        model: turn.model.clone(),
        usage: turn.usage.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_shown_holds_no_user_or_password() {
        let c = ChatClient::new("m").with_base_url(Some("http://u:pw@127.0.0.1:9/v1/".into()));
        assert_eq!(c.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(c.secrets(&c.url()).last().map(String::as_str), Some("pw"));
        let c = ChatClient::new("m").with_base_url(Some("http://127.0.0.1:9/v1".into()));
        assert_eq!(c.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        // The client holds the variable's name, never a key.
        let shown = format!("{:?}", c.with_api_key_env("JUDGE_KEY_VAR"));
        assert!(shown.contains("JUDGE_KEY_VAR"), "{shown}");
    }

    #[tokio::test]
    async fn a_password_in_the_base_url_is_masked_in_errors() {
        // A port nothing listens on (bound, then closed): the connection is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = ChatClient::new("m")
            .with_base_url(Some(format!(
                "http://user:hunter2secret@127.0.0.1:{port}/v1"
            )))
            .with_max_retries(0);
        let e = c.complete("s", "u").await.unwrap_err();
        assert!(!e.message.contains("hunter2secret"), "{e}");
        assert!(
            e.message.starts_with(&format!(
                "POST http://127.0.0.1:{port}/v1/chat/completions: "
            )),
            "{e}"
        );
    }
}
