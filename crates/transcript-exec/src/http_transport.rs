//! The HTTP transport of the OpenAI-compatible clients ([`crate::http_agent`]'s tool loop
//! and [`crate::chat_client`]'s single requests): the client (rustls with ring, a 10 s
//! connect timeout, a per-request timeout), POSTs retried on 429, 5xx and connection failures
//! ([`RetryPolicy`], a `Retry-After` honoured in seconds or as an HTTP-date read against the
//! caller's clock), the provider's message of an error response (bounded), and a response
//! body, streamed or not, read through the providers crate's OpenAI normalizer under a byte
//! cap.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use transcript_domain::text::error_chain;
use transcript_domain::{MessagePayload, Timestamp};
use transcript_providers::{DiagnosticKind, Output, Provider};

use crate::agent::AgentError;

/// Most bytes of an error response kept for the step's error.
const ERROR_BODY_KEEP: usize = 64 * 1024;

/// Retries of a request answered 429 or 5xx, or whose connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: none).
    pub max_retries: u32,
    /// Wait before the first retry; doubled for each further one.
    pub initial_backoff: Duration,
    /// Longest wait between attempts (also caps `Retry-After`, in either form).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The wait before retry number `retry` (0-based), `retry_after` from the server.
    fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(retry.min(16)));
        retry_after.unwrap_or(exp).min(self.max_backoff)
    }
}

/// An HTTP client with a 10 s connect timeout and `timeout` per request.
pub(crate) fn http_client(timeout: Duration) -> Result<reqwest::Client, AgentError> {
    // reqwest is built without a default crypto provider: ring, once per process (an
    // error only means one is installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(timeout)
        .build()
        .map_err(|e| AgentError::Setup(format!("cannot build the HTTP client: {e}")))
}

/// One model turn as the normalizer read it.
pub(crate) struct Reply {
    pub(crate) turn: Option<MessagePayload>,
    pub(crate) errors: Vec<String>,
    pub(crate) incomplete: Vec<String>,
    /// What the model refused, in its words (its text is also in the turn).
    pub(crate) refusals: Vec<String>,
}

/// A response body, streamed or not, read through the providers crate's OpenAI normalizer
/// (at most `max_body_bytes`).
pub(crate) async fn read_reply(
    mut response: reqwest::Response,
    url: &str,
    max_body_bytes: usize,
) -> Result<Reply, AgentError> {
    let err = |m: String| AgentError::Transport(format!("POST {url}: {m}"));
    let mut normalizer = Provider::OpenAi.normalizer();
    let mut outputs = Vec::new();
    let mut received = 0usize;
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => {
                received += bytes.len();
                if received > max_body_bytes {
                    return Err(err(format!("response body exceeds {max_body_bytes} bytes")));
                }
                normalizer.feed(&bytes, &mut outputs);
            }
            Ok(None) => break,
            Err(e) => return Err(err(format!("response cut: {}", error_chain(&e)))),
        }
    }
    normalizer.finish(&mut outputs);
    Ok(Reply::of(outputs))
}

impl Reply {
    /// The turn, errors, incomplete answers and refusals of a normalizer's outputs.
    fn of(outputs: Vec<Output>) -> Reply {
        let mut reply = Reply {
            turn: None,
            errors: Vec::new(),
            incomplete: Vec::new(),
            refusals: Vec::new(),
        };
        for item in outputs {
            match item {
                // Several message ids in one answer: keep the blocks together.
                Output::Turn(m) => match &mut reply.turn {
                    Some(t) => {
                        t.blocks.extend(m.blocks);
                        if m.usage.is_some() {
                            t.usage = m.usage;
                        }
                    }
                    None => reply.turn = Some(m),
                },
                Output::Diagnostic(d) => {
                    let detail = if d.detail.is_empty() {
                        d.record.clone()
                    } else {
                        d.detail.clone()
                    };
                    match d.kind {
                        DiagnosticKind::ProviderError => reply.errors.push(detail),
                        DiagnosticKind::Incomplete => reply.incomplete.push(detail),
                        DiagnosticKind::Refusal => reply.refusals.push(detail),
                        _ => {}
                    }
                }
                // The router runs the calls (router fidelity): the normalizer's
                // agent-emitted reports of them are not recorded.
                Output::ToolCall(_) | Output::ToolResult(_) => {}
            }
        }
        reply
    }
}

/// POSTs `body`, retrying 429, 5xx and connection failures per `policy`
/// (a `Retry-After` date is read against `now`, the seam's clock when it has one).
pub(crate) async fn send(
    client: &reqwest::Client,
    (url, key): (&str, Option<&str>),
    policy: RetryPolicy,
    body: &Value,
    now: &(dyn Fn() -> Option<Timestamp> + Send + Sync),
) -> Result<reqwest::Response, AgentError> {
    let err = |m: String| AgentError::Transport(format!("POST {url}: {m}"));
    let payload = serde_json::to_vec(body).map_err(|e| err(e.to_string()))?;
    let mut retry = 0;
    loop {
        let mut req = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(payload.clone());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let (failure, retry_after) = match req.send().await {
            Ok(r) if r.status().is_success() => return Ok(r),
            Ok(r) => {
                let status = r.status();
                let retry_after = r
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, now()));
                let message = error_message(r).await;
                let failure = format!("HTTP {}: {message}", status.as_u16());
                if !(status.as_u16() == 429 || status.is_server_error()) {
                    return Err(err(failure));
                }
                (failure, retry_after)
            }
            Err(e) if e.is_connect() || e.is_timeout() => (error_chain(&e), None),
            Err(e) => return Err(err(error_chain(&e))),
        };
        if retry >= policy.max_retries {
            let tries = retry + 1;
            return Err(err(format!(
                "{failure} (after {tries} attempt{})",
                if tries == 1 { "" } else { "s" }
            )));
        }
        tokio::time::sleep(policy.backoff(retry, retry_after)).await;
        retry += 1;
    }
}

/// The wait a `Retry-After` value asks for (RFC 9110 §10.2.3): delay-seconds,
/// or an HTTP-date (IMF-fixdate, and the obsolete RFC 850 and asctime forms a
/// recipient must accept; `httpdate`) less `now`, the injected clock's time;
/// a date in the past is no wait. `None` (the backoff applies) when the
/// value is neither, or is a date and there is no clock to read it against.
/// The caller caps it ([`RetryPolicy::max_backoff`]).
fn retry_after(value: &str, now: Option<Timestamp>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let now = now?;
    let date_ms = date
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let wait_ms = date_ms.saturating_sub(now.unix_millis()).max(0);
    Some(Duration::from_millis(wait_ms.unsigned_abs()))
}

/// The provider's message from an error response (`error.message`), else its bounded text.
async fn error_message(mut r: reqwest::Response) -> String {
    let mut raw = Vec::new();
    while let Ok(Some(bytes)) = r.chunk().await {
        raw.extend_from_slice(&bytes);
        if raw.len() > ERROR_BODY_KEEP {
            raw.truncate(ERROR_BODY_KEEP);
            break;
        }
    }
    let text = String::from_utf8_lossy(&raw);
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| text.chars().take(300).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped_and_retry_after_wins_under_the_cap() {
        let p = RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
        };
        assert_eq!(p.backoff(0, None), Duration::from_millis(100));
        assert_eq!(p.backoff(2, None), Duration::from_millis(400));
        assert_eq!(p.backoff(9, None), Duration::from_secs(1));
        assert_eq!(
            p.backoff(0, Some(Duration::from_millis(300))),
            Duration::from_millis(300)
        );
        assert_eq!(
            p.backoff(0, Some(Duration::from_secs(60))),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates_against_the_given_clock() {
        let now = Timestamp::parse("1994-11-06T08:49:30.000Z").unwrap();
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(retry_after(date, Some(now)), Some(Duration::from_secs(7)));
        // The obsolete forms RFC 9110 asks recipients to accept.
        for obsolete in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            assert_eq!(
                retry_after(obsolete, Some(now)),
                Some(Duration::from_secs(7)),
                "{obsolete}"
            );
        }
        // A date in the past: no wait.
        let later = now.saturating_add_millis(60_000);
        assert_eq!(retry_after(date, Some(later)), Some(Duration::ZERO));
        // No clock, or no date: the backoff applies.
        assert_eq!(retry_after(date, None), None);
        assert_eq!(retry_after("soon", Some(now)), None);
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 25:49:37 GMT", Some(now)),
            None
        );
        // The seconds form as before.
        assert_eq!(retry_after(" 3 ", None), Some(Duration::from_secs(3)));
        // A far date is capped like a large number of seconds.
        let p = RetryPolicy::default();
        let far = retry_after("Fri, 31 Dec 9999 23:59:59 GMT", Some(now));
        assert_eq!(p.backoff(0, far), p.max_backoff);
    }
}
