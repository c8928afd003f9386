//! OTLP/HTTP (protobuf, or JSON with `http/json`) over `http://` or `https://` (rustls: the platform's roots plus an
//! optional private CA), with the configured headers, a deadline per export and retries of
//! transient failures. Runs on the export threads of this crate only: reqwest's blocking
//! client must not be created, used or dropped inside a tokio runtime.

use std::io::Read;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;
use prost::Message;
use reqwest::StatusCode;
use reqwest::blocking::Client;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::config::{OtlpHttpConfig, Protocol, Secrets};
use crate::outcome::{Delivered, ExportError, SpanSink};
use crate::request::{resource, to_otlp_request_for};

/// Longest part of a response body quoted in an error.
const BODY_QUOTE: usize = 200;
/// Most of an answer's body read: for a success's partial success, or an error to quote.
const ANSWER_LIMIT: u64 = 64 * 1024;

/// The OTLP/HTTP protobuf exporter.
pub(crate) struct OtlpHttpSink {
    client: Client,
    url: String,
    shown_url: String,
    headers: HeaderMap,
    resource: Resource,
    timeout: Duration,
    max_retries: usize,
    secrets: Secrets,
    protocol: Protocol,
}

impl OtlpHttpSink {
    pub(crate) fn new(config: &OtlpHttpConfig) -> Result<Self, ExportError> {
        // reqwest is built with rustls and no default crypto provider (the exec crate's
        // HTTP agent shares it): install the ring one (idempotent; an installed one stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        config.check()?;
        let url = config.traces_url()?;
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let (Ok(name), Ok(mut value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) else {
                // `check` accepted them; unreachable, but never quote a value.
                return Err(ExportError::Config(format!("invalid header {name:?}")));
            };
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(config.protocol.content_type()),
        );
        let mut builder = Client::builder()
            .redirect(redirect_policy())
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .user_agent(concat!("transcript-otel/", env!("CARGO_PKG_VERSION")));
        for cert in config.load_certificates()? {
            builder = builder.add_root_certificate(cert);
        }
        let secrets = Secrets::of(config);
        let client = builder
            .build()
            .map_err(|e| ExportError::Build(secrets.mask(&error_chain(&e))))?;
        Ok(Self {
            client,
            shown_url: config.mask(&crate::config::display_url(&url)),
            url,
            headers,
            resource: resource(config),
            timeout: config.timeout,
            max_retries: config.max_retries,
            secrets,
            protocol: config.protocol,
        })
    }

    /// One POST: what the receiver accepted, or `Err((message, retryable, retry_after))`.
    fn attempt(
        &self,
        body: &[u8],
        left: Duration,
    ) -> Result<Delivered, (String, bool, Option<Duration>)> {
        let response = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .timeout(left)
            .body(body.to_vec())
            .send()
            .map_err(|e| (describe_send_error(&e), !is_tls_error(&e), None))?;
        let status = response.status();
        if status.is_success() {
            return Ok(self.partial_success(response));
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let retryable = matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS
                | StatusCode::BAD_GATEWAY
                | StatusCode::SERVICE_UNAVAILABLE
                | StatusCode::GATEWAY_TIMEOUT
        );
        let hint = error_hint(&response);
        // Only what can be quoted is read: a body that never ends costs no memory.
        let mut body = Vec::new();
        let _ = response.take(ANSWER_LIMIT).read_to_end(&mut body);
        let body = String::from_utf8_lossy(&body);
        let mut quote: String = body.chars().take(BODY_QUOTE).collect();
        if quote.len() < body.len() {
            quote.push('…');
        }
        let quote = quote.split_whitespace().collect::<Vec<_>>().join(" ");
        let message = if quote.is_empty() {
            format!("HTTP {status}{hint}")
        } else {
            format!("HTTP {status}{hint}: {quote}")
        };
        Err((message, retryable, retry_after))
    }
}

impl OtlpHttpSink {
    /// What a success answer's body (an `ExportTraceServiceResponse`, protobuf or JSON as
    /// sent; its first [`ANSWER_LIMIT`] bytes) says was rejected. An empty or unreadable
    /// body accepted everything (receivers answer `{}` or nothing).
    fn partial_success(&self, response: reqwest::blocking::Response) -> Delivered {
        let mut body = Vec::new();
        let _ = response.take(ANSWER_LIMIT).read_to_end(&mut body);
        let (rejected, message) = match self.protocol {
            Protocol::HttpJson => {
                let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let partial = &answer["partialSuccess"];
                // int64 is a string in OTLP/JSON; a number is read too.
                let rejected = match &partial["rejectedSpans"] {
                    serde_json::Value::String(n) => n.parse().unwrap_or(0),
                    n => n.as_i64().unwrap_or(0),
                };
                let message = partial["errorMessage"].as_str().unwrap_or("").to_owned();
                (rejected, message)
            }
            Protocol::HttpProtobuf | Protocol::Grpc => {
                match ExportTraceServiceResponse::decode(body.as_slice()) {
                    Ok(ExportTraceServiceResponse {
                        partial_success: Some(p),
                    }) => (p.rejected_spans, p.error_message),
                    _ => (0, String::new()),
                }
            }
        };
        Delivered::partial(&self.shown_url, rejected, &message).masked(|m| self.secrets.mask(m))
    }
}

impl SpanSink for OtlpHttpSink {
    fn export(&mut self, batch: Vec<SpanData>) -> Result<Delivered, String> {
        let request = to_otlp_request_for(batch, &self.resource);
        let body = match self.protocol {
            Protocol::HttpProtobuf | Protocol::Grpc => request.encode_to_vec(),
            Protocol::HttpJson => serde_json::to_vec(&request)
                .map_err(|e| format!("{}: encoding OTLP/JSON: {e}", self.shown_url))?,
        };
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_millis(100);
        let mut tries = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = if left.is_zero() {
                Err(("timed out".to_owned(), false, None))
            } else {
                self.attempt(&body, left)
            };
            match outcome {
                Ok(delivered) => return Ok(delivered),
                Err((message, retryable, retry_after)) => {
                    let wait = retry_after.unwrap_or(backoff);
                    let left = deadline.saturating_duration_since(Instant::now());
                    if !retryable || tries >= self.max_retries || wait >= left {
                        let tried = if tries > 0 {
                            format!(" (after {} attempts)", tries + 1)
                        } else {
                            String::new()
                        };
                        return Err(self
                            .secrets
                            .mask(&format!("{}: {message}{tried}", self.shown_url)));
                    }
                    tries += 1;
                    // The export thread's own back-off: nothing else waits on it.
                    std::thread::sleep(wait);
                    backoff = backoff.saturating_mul(2);
                }
            }
        }
    }
}

/// What to say after an error status: where to look for a refused header, or where an
/// endpoint that redirects moved (see [`redirect_policy`]).
fn error_hint(response: &reqwest::blocking::Response) -> String {
    let status = response.status();
    let moved = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|to| response.url().join(to).ok());
    match (status, moved) {
        (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, _) => {
            " (check the OTLP headers: --otlp-header or OTEL_EXPORTER_OTLP_HEADERS)".to_owned()
        }
        (s, Some(to)) if s.is_redirection() => format!(
            " (the endpoint redirects to {}, a redirect that would drop the spans: set that URL as the endpoint)",
            crate::config::display_url(to.as_str())
        ),
        _ => String::new(),
    }
}

/// Redirects that keep the method and the body (`307`, `308`) are followed (at most 10);
/// `301`, `302` and `303` are not: an HTTP client repeats a POST as a GET without its body,
/// which delivers nothing and may still be answered `200` (a web page), so they are answered
/// as errors naming where the endpoint moved.
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
        );
        if !keeps_body {
            attempt.stop()
        } else if attempt.previous().len() >= 10 {
            attempt.error("more than 10 redirects")
        } else {
            attempt.follow()
        }
    })
}

/// An error with its causes, `a: b: c` (reqwest's own message hides the cause).
use transcript_domain::text::error_chain;

fn is_tls_error(error: &reqwest::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(cause) = source {
        if cause.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        source = cause.source();
    }
    let text = error_chain(error);
    text.contains("certificate") || text.contains("InvalidCertificate")
}

/// A send failure said plainly: the TLS failure (with where to put a private CA) or the
/// connection failure, with its cause.
fn describe_send_error(error: &reqwest::Error) -> String {
    let chain = error_chain(error);
    // reqwest's first line repeats the URL, which the caller already names.
    let cause = match chain.split_once(": ") {
        Some((first, rest)) if first.starts_with("error sending request") => rest.to_owned(),
        _ => chain,
    };
    if is_tls_error(error) {
        format!(
            "TLS handshake failed: {cause} (a private CA goes in --otlp-certificate or OTEL_EXPORTER_OTLP_CERTIFICATE)"
        )
    } else if error.is_timeout() {
        format!("timed out: {cause}")
    } else if error.is_connect() {
        format!("cannot connect: {cause}")
    } else {
        cause
    }
}
