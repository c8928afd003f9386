//! Where and how spans are sent: the OTLP/HTTP settings, resolved from flags and the
//! standard `OTEL_*` environment with the OpenTelemetry specification's precedence, and the
//! masking of header values (secrets) in every message.
//!
//! Precedence, per setting: a flag, else the signal-specific variable
//! (`OTEL_EXPORTER_OTLP_TRACES_*`), else the general one (`OTEL_EXPORTER_OTLP_*`), else the
//! default. Headers are merged by name (case-insensitive) in that order, so a flag replaces
//! one header of the environment and keeps the others; within the environment the
//! signal-specific variable replaces the general one whole, as the specification reads.

use std::path::PathBuf;
use std::time::Duration;

use percent_encoding::percent_decode_str;
use reqwest::Url;

use crate::outcome::ExportError;

/// `service.name` of the exported resource unless configured otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "transcript";

/// Spans per OTLP request.
pub const DEFAULT_BATCH_SIZE: usize = 512;

/// General OTLP endpoint: a base URL, `v1/traces` is appended to its path.
pub const ENV_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Traces endpoint: the full URL, used as given.
pub const ENV_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// General headers, `k=v,k2=v2` with percent-encoded values.
pub const ENV_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// Traces headers (replaces [`ENV_HEADERS`] whole).
pub const ENV_TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
/// General timeout in milliseconds.
pub const ENV_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// Traces timeout in milliseconds.
pub const ENV_TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// General trusted certificate(s) (PEM file) for the server's TLS credentials.
pub const ENV_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
/// Traces trusted certificate(s) (PEM file).
pub const ENV_TRACES_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE";
/// `service.name` of the resource (wins over the one in [`ENV_RESOURCE_ATTRIBUTES`]).
pub const ENV_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// Resource attributes, `k=v,k2=v2` with percent-encoded values (e.g.
/// `openinference.project.name=review` selects a Phoenix project).
pub const ENV_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// General transport protocol: `http/protobuf` (the default) or `http/json`; `grpc` is
/// refused with [`ExportError::UnsupportedProtocol`] naming the variable.
pub const ENV_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// Traces transport protocol (wins over [`ENV_PROTOCOL`]).
pub const ENV_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `true`: the SDK (here: export) is disabled.
pub const ENV_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// `none`: no trace exporter.
pub const ENV_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";

/// How spans are encoded on the wire (the specification's `OTEL_EXPORTER_OTLP_PROTOCOL`
/// values this exporter speaks; `grpc` is not one of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`: binary protobuf, `Content-Type: application/x-protobuf`.
    #[default]
    HttpProtobuf,
    /// `http/json`: the OTLP JSON encoding (hex ids, camelCase, 64-bit integers as
    /// strings), `Content-Type: application/json`.
    HttpJson,
}

impl Protocol {
    /// The specification's name of the protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        }
    }

    /// The request's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "application/x-protobuf",
            Protocol::HttpJson => "application/json",
        }
    }

    /// The protocol `value` of the variable `variable` names (surrounding whitespace and
    /// case ignored); `grpc` or anything else is [`ExportError::UnsupportedProtocol`].
    pub fn parse(value: &str, variable: &str) -> Result<Self, ExportError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Ok(Protocol::HttpJson),
            _ => Err(ExportError::UnsupportedProtocol {
                variable: variable.to_owned(),
                value: value.trim().to_owned(),
            }),
        }
    }

    /// From [`ENV_TRACES_PROTOCOL`], else [`ENV_PROTOCOL`], else `http/protobuf`.
    pub fn resolve(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ExportError> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        match get(ENV_TRACES_PROTOCOL)
            .map(|v| (ENV_TRACES_PROTOCOL, v))
            .or_else(|| get(ENV_PROTOCOL).map(|v| (ENV_PROTOCOL, v)))
        {
            Some((variable, value)) => Self::parse(&value, variable),
            None => Ok(Protocol::default()),
        }
    }
}

/// What the user asked for on the command line; `None`/empty fields fall back to the
/// environment.
#[derive(Clone, Default)]
pub struct OtlpFlags {
    /// `--otlp-endpoint` / `--endpoint`: a base URL (`/v1/traces` appended when it has no
    /// path) or a full URL.
    pub endpoint: Option<String>,
    /// `--otlp-header k=v`, repeated, as given (parsed by [`OtlpHttpConfig::resolve`], which
    /// never echoes a value).
    pub headers: Vec<String>,
    /// `--otlp-certificate`: a PEM file of CA certificates to trust besides the platform's.
    pub certificate: Option<PathBuf>,
    /// A per-export timeout chosen by the caller (the CLI has no flag for it: it takes
    /// `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`).
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for OtlpFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpFlags")
            .field("endpoint", &self.endpoint.as_deref().map(display_url))
            .field("headers", &format_args!("[{} masked]", self.headers.len()))
            .field("certificate", &self.certificate)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Where the OTLP/HTTP exporter sends, and how.
#[derive(Clone, PartialEq, Eq)]
pub struct OtlpHttpConfig {
    /// `http(s)://host:port` (then `/v1/traces` is appended, as the OTLP spec
    /// does for a base endpoint) or a full URL with a path, used as given.
    pub endpoint: String,
    /// The endpoint is the full traces URL even without a path (a signal-specific setting).
    pub endpoint_is_full: bool,
    /// Per-export timeout, retries included.
    pub timeout: Duration,
    /// Extra request headers (e.g. an API key for a backend). Secrets: their values are
    /// masked in `Debug` and in every error this crate produces.
    pub headers: Vec<(String, String)>,
    /// PEM file of CA certificates trusted besides the platform's roots (a private CA).
    pub certificate: Option<PathBuf>,
    /// `service.name` of the resource.
    pub service_name: String,
    /// Further resource attributes (`OTEL_RESOURCE_ATTRIBUTES`), in order.
    pub resource_attributes: Vec<(String, String)>,
    /// Spans per request.
    pub batch_size: usize,
    /// Retries of a failed request (0: one attempt) on a transient failure (connection,
    /// 429, 502, 503, 504), backing off within `timeout`.
    pub max_retries: usize,
    /// The wire encoding (`OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`).
    pub protocol: Protocol,
}

impl std::fmt::Debug for OtlpHttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OtlpHttpConfig")
            .field("endpoint", &display_url(&self.endpoint))
            .field("endpoint_is_full", &self.endpoint_is_full)
            .field("timeout", &self.timeout)
            .field("headers (values masked)", &names)
            .field("certificate", &self.certificate)
            .field("service_name", &self.service_name)
            .field("resource_attributes", &self.resource_attributes)
            .field("batch_size", &self.batch_size)
            .field("max_retries", &self.max_retries)
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl OtlpHttpConfig {
    /// Defaults: 10 s timeout, 2 retries, batches of [`DEFAULT_BATCH_SIZE`],
    /// service name [`DEFAULT_SERVICE_NAME`], no headers, platform roots only, `http/protobuf`.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            endpoint_is_full: false,
            timeout: Duration::from_secs(10),
            headers: Vec::new(),
            certificate: None,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            resource_attributes: Vec::new(),
            batch_size: DEFAULT_BATCH_SIZE,
            max_retries: 2,
            protocol: Protocol::HttpProtobuf,
        }
    }

    /// Resolves flags over the environment (`env` looks a variable up: `std::env::var(..).ok()`
    /// in a binary, a map in tests). `Ok(None)`: no endpoint anywhere, or export disabled by
    /// `OTEL_SDK_DISABLED=true` / `OTEL_TRACES_EXPORTER=none` without an endpoint flag.
    /// Errors name the setting and never contain a header value.
    pub fn resolve(
        flags: &OtlpFlags,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ExportError> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let disabled = get(ENV_SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || get(ENV_TRACES_EXPORTER).is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
        let (endpoint, full) = match (&flags.endpoint, get(ENV_TRACES_ENDPOINT), get(ENV_ENDPOINT))
        {
            (Some(flag), _, _) => (flag.clone(), false),
            _ if disabled => return Ok(None),
            (None, Some(traces), _) => (traces.trim().to_owned(), true),
            (None, None, Some(base)) => (signal_url(base.trim(), ENV_ENDPOINT)?, true),
            (None, None, None) => return Ok(None),
        };
        let mut config = Self::new(endpoint);
        config.endpoint_is_full = full;
        config.protocol = Protocol::resolve(env)?;

        let env_headers = match get(ENV_TRACES_HEADERS) {
            Some(v) => parse_pairs(&v, ENV_TRACES_HEADERS)?,
            None => match get(ENV_HEADERS) {
                Some(v) => parse_pairs(&v, ENV_HEADERS)?,
                None => Vec::new(),
            },
        };
        let mut headers = env_headers;
        for (i, raw) in flags.headers.iter().enumerate() {
            let (k, v) = parse_flag_header(raw, i + 1)?;
            headers.retain(|(name, _)| !name.eq_ignore_ascii_case(&k));
            headers.push((k, v));
        }
        config.headers = headers;

        config.timeout = match flags.timeout {
            Some(t) => t,
            None => match get(ENV_TRACES_TIMEOUT)
                .map(|v| (ENV_TRACES_TIMEOUT, v))
                .or_else(|| get(ENV_TIMEOUT).map(|v| (ENV_TIMEOUT, v)))
            {
                Some((name, v)) => Duration::from_millis(v.trim().parse().map_err(|_| {
                    ExportError::Config(format!("{name}={v:?} is not a number of milliseconds"))
                })?),
                None => config.timeout,
            },
        };
        config.certificate = flags.certificate.clone().or_else(|| {
            get(ENV_TRACES_CERTIFICATE)
                .or_else(|| get(ENV_CERTIFICATE))
                .map(PathBuf::from)
        });

        let resource = ResourceSettings::resolve(env)?;
        config.service_name = resource.service_name;
        config.resource_attributes = resource.attributes;
        config.check()?;
        Ok(Some(config))
    }

    /// The URL requests go to.
    pub fn traces_url(&self) -> Result<String, ExportError> {
        let url = parse_url(&self.endpoint)?;
        if self.endpoint_is_full || !(url.path().is_empty() || url.path() == "/") {
            return Ok(self.endpoint.clone());
        }
        let mut url = url;
        url.set_path("/v1/traces");
        Ok(url.to_string())
    }

    /// The endpoint for messages: any password in it masked.
    pub fn display_endpoint(&self) -> String {
        display_url(&self.endpoint)
    }

    /// Checks everything that can be checked before sending: the URL, header names and
    /// values, the certificate file. Errors never contain a header value.
    pub fn check(&self) -> Result<(), ExportError> {
        self.traces_url()?;
        for (i, (name, value)) in self.headers.iter().enumerate() {
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ExportError::Config(format!("header {} has an invalid name {name:?}", i + 1))
            })?;
            reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                ExportError::Config(format!(
                    "header {name:?} has a value that is not valid in an HTTP header (value not shown)"
                ))
            })?;
        }
        if self.certificate.is_some() {
            self.load_certificates()?;
        }
        Ok(())
    }

    /// The certificates of [`OtlpHttpConfig::certificate`], parsed.
    pub(crate) fn load_certificates(&self) -> Result<Vec<reqwest::Certificate>, ExportError> {
        let Some(path) = &self.certificate else {
            return Ok(Vec::new());
        };
        let pem = std::fs::read(path).map_err(|e| {
            ExportError::Config(format!(
                "cannot read the OTLP certificate {}: {e}",
                path.display()
            ))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            ExportError::Config(format!(
                "the OTLP certificate {} is not a PEM certificate bundle: {e}",
                path.display()
            ))
        })?;
        if certs.is_empty() {
            return Err(ExportError::Config(format!(
                "the OTLP certificate {} holds no certificate",
                path.display()
            )));
        }
        Ok(certs)
    }

    /// Masks every header value in `text` (see [`Secrets`]).
    pub fn mask(&self, text: &str) -> String {
        Secrets::of(self).mask(text)
    }
}

/// The resource the spans are exported under: `service.name` and further attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSettings {
    /// `service.name` ([`DEFAULT_SERVICE_NAME`] unless configured).
    pub service_name: String,
    /// Further attributes, in order (`service.name` excluded).
    pub attributes: Vec<(String, String)>,
}

impl Default for ResourceSettings {
    fn default() -> Self {
        Self {
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            attributes: Vec::new(),
        }
    }
}

impl ResourceSettings {
    /// From `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME` (which wins over a
    /// `service.name` in the attributes).
    pub fn resolve(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ExportError> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let mut attributes = match get(ENV_RESOURCE_ATTRIBUTES) {
            Some(v) => parse_pairs(&v, ENV_RESOURCE_ATTRIBUTES)?,
            None => Vec::new(),
        };
        let from_attributes = attributes
            .iter()
            .rposition(|(k, _)| k == "service.name")
            .map(|i| attributes.remove(i).1);
        attributes.retain(|(k, _)| k != "service.name");
        let service_name = get(ENV_SERVICE_NAME)
            .or(from_attributes)
            .map_or_else(|| DEFAULT_SERVICE_NAME.to_owned(), |n| n.trim().to_owned());
        Ok(Self {
            service_name,
            attributes,
        })
    }
}

/// The secrets of a configuration (header values, and a password in the endpoint URL), to
/// mask wherever a message could quote them: an error from the HTTP client, a response
/// body from the backend.
#[derive(Clone, Default)]
pub struct Secrets(Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} masked)", self.0.len())
    }
}

/// What a secret is replaced with.
pub const MASK: &str = "***";

/// Shortest value treated as a secret.
pub const MIN_SECRET_LEN: usize = 4;

impl Secrets {
    /// The header values of `config` and each of their whitespace-separated words
    /// (`Basic <token>`: the token alone is masked too), plus the endpoint's password, longest
    /// first; each of at least [`MIN_SECRET_LEN`] bytes.
    pub fn of(config: &OtlpHttpConfig) -> Self {
        let mut secrets: Vec<String> = Vec::new();
        for (_, value) in &config.headers {
            secrets.push(value.trim().to_owned());
            secrets.extend(value.split_whitespace().map(str::to_owned));
        }
        if let Ok(url) = Url::parse(&config.endpoint)
            && let Some(password) = url.password()
        {
            secrets.push(password.to_owned());
            if let Ok(decoded) = percent_decode_str(password).decode_utf8() {
                secrets.push(decoded.into_owned());
            }
        }
        // Shorter values (`x-langfuse-ingestion-version=4`) are not credentials, and masking
        // them would garble every message (`HTTP 401`).
        secrets.retain(|s| s.len() >= MIN_SECRET_LEN);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self(secrets)
    }

    /// `text` with every secret replaced by [`MASK`].
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.0 {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }
}

/// A URL for messages: its password (if any) masked.
pub fn display_url(endpoint: &str) -> String {
    match Url::parse(endpoint) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some(MASK));
            url.to_string()
        }
        _ => endpoint.to_owned(),
    }
}

fn parse_url(endpoint: &str) -> Result<Url, ExportError> {
    let invalid = |reason: String| ExportError::InvalidEndpoint {
        endpoint: display_url(endpoint),
        reason,
    };
    let url = Url::parse(endpoint).map_err(|e| invalid(format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("expected an http:// or https:// URL".into()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("missing host".into()));
    }
    Ok(url)
}

/// The general endpoint with the traces path appended to its own path (the specification's
/// rule: `http://h:4318/base` sends to `http://h:4318/base/v1/traces`).
fn signal_url(base: &str, var: &str) -> Result<String, ExportError> {
    let mut url = parse_url(base).map_err(|e| match e {
        ExportError::InvalidEndpoint { endpoint, reason } => ExportError::InvalidEndpoint {
            endpoint,
            reason: format!("{var}: {reason}"),
        },
        other => other,
    })?;
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(&format!("{path}/v1/traces"));
    Ok(url.to_string())
}

/// `k=v,k2=v2` (W3C-baggage-like): entries split on `,`, each at its first `=`, key and value
/// trimmed, the value percent-decoded. Empty entries are skipped. An entry without `=` or
/// with an empty key is an error that names the variable and the entry's position, never
/// its text (it may be a secret).
pub fn parse_pairs(text: &str, source: &str) -> Result<Vec<(String, String)>, ExportError> {
    let mut pairs = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = entry.split_once('=') else {
            return Err(ExportError::Config(format!(
                "{source}: entry {} is not key=value (entry not shown)",
                i + 1
            )));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(ExportError::Config(format!(
                "{source}: entry {} has an empty key",
                i + 1
            )));
        }
        let value = percent_decode_str(value.trim())
            .decode_utf8()
            .map_err(|_| {
                ExportError::Config(format!(
                    "{source}: the value of {key:?} is not UTF-8 once percent-decoded (value not shown)"
                ))
            })?
            .into_owned();
        pairs.push((key.to_owned(), value));
    }
    Ok(pairs)
}

/// One `--otlp-header k=v` (taken as given: no percent-decoding on the command line).
fn parse_flag_header(raw: &str, position: usize) -> Result<(String, String), ExportError> {
    match raw.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(ExportError::Config(format!(
            "--otlp-header {position} is not NAME=VALUE (value not shown)"
        ))),
    }
}
