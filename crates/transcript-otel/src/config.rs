//! Where and how spans are sent: the OTLP settings, resolved from flags and the standard
//! `OTEL_*` environment with the OpenTelemetry specification's precedence, and the masking
//! of header values (secrets) in every message.
//!
//! Precedence, per setting: a flag, else the signal-specific variable
//! (`OTEL_EXPORTER_OTLP_TRACES_*`), else the general one (`OTEL_EXPORTER_OTLP_*`), else the
//! default. Headers are merged by name (case-insensitive) in that order, so a flag replaces
//! one header of the environment and keeps the others; within the environment the
//! signal-specific variable replaces the general one whole, as the specification reads.
//!
//! A bad flag is an error. A bad value in the environment is not: as the SDK specification
//! asks, it is reported (in [`OtlpHttpConfig::ignored`]) and ignored, the next source in
//! precedence applying, so a machine-wide variable never stops a run.

use std::path::PathBuf;
use std::time::Duration;

use percent_encoding::percent_decode_str;
use reqwest::Url;

use crate::outcome::ExportError;

mod protocol;
mod secrets;

pub use protocol::{GRPC_EXPORT_PATH, Protocol};
pub use secrets::{MASK, MIN_SECRET_LEN, Secrets, display_url};

/// `service.name` of the exported resource unless configured otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "transcript";

/// Spans per OTLP request.
pub const DEFAULT_BATCH_SIZE: usize = 512;

/// General OTLP endpoint: a base URL, `v1/traces` is appended to its path (over HTTP; a
/// gRPC endpoint is used as given).
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
/// General transport protocol: `http/protobuf` (the default), `http/json` or `grpc`.
pub const ENV_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// Traces transport protocol (wins over [`ENV_PROTOCOL`]).
pub const ENV_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `true`: the SDK (here: export) is disabled.
pub const ENV_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// `none`: no trace exporter.
pub const ENV_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";

/// What the user asked for on the command line; `None`/empty fields fall back to the
/// environment.
#[derive(Clone, Default)]
pub struct OtlpFlags {
    /// `--otlp-endpoint` / `--endpoint`: a base URL (`/v1/traces` appended when it has no
    /// path, over HTTP) or a full URL.
    pub endpoint: Option<String>,
    /// `--otlp-header k=v`, repeated, as given (parsed by [`OtlpHttpConfig::resolve`], which
    /// never echoes a value).
    pub headers: Vec<String>,
    /// `--otlp-certificate`: a PEM file of CA certificates to trust besides the platform's.
    pub certificate: Option<PathBuf>,
    /// A per-export timeout chosen by the caller (the CLI has no flag for it: it takes
    /// `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`).
    pub timeout: Option<Duration>,
    /// `--otlp-protocol`: wins over `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`.
    pub protocol: Option<Protocol>,
}

impl std::fmt::Debug for OtlpFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpFlags")
            .field("endpoint", &self.endpoint.as_deref().map(display_url))
            .field("headers", &format_args!("[{} masked]", self.headers.len()))
            .field("certificate", &self.certificate)
            .field("timeout", &self.timeout)
            .field("protocol", &self.protocol)
            .finish()
    }
}

/// Where the OTLP exporter sends, and how.
#[derive(Clone, PartialEq, Eq)]
pub struct OtlpHttpConfig {
    /// `http(s)://host:port` (then `/v1/traces` is appended over HTTP, as the OTLP spec
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
    /// 429, 502, 503, 504; gRPC `UNAVAILABLE`, `RESOURCE_EXHAUSTED`, ...), backing off
    /// within `timeout`.
    pub max_retries: usize,
    /// The wire protocol (`--otlp-protocol`, `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`).
    pub protocol: Protocol,
    /// Values of the environment that were invalid and ignored, each with its variable and
    /// why (never a header value): to be reported once, and in the export's summary.
    pub ignored: Vec<String>,
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
            .field("ignored", &self.ignored)
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
            ignored: Vec::new(),
        }
    }

    /// Resolves flags over the environment (`env` looks a variable up: `std::env::var(..).ok()`
    /// in a binary, a map in tests). `Ok(None)`: no endpoint anywhere, or export disabled by
    /// `OTEL_SDK_DISABLED=true` / `OTEL_TRACES_EXPORTER=none` without an endpoint flag.
    ///
    /// A bad flag is an error (an unreadable `--otlp-certificate` is
    /// [`ExportError::Unreadable`]); a bad environment value is ignored and reported in
    /// [`OtlpHttpConfig::ignored`]. An environment endpoint that is not a URL is kept as
    /// given (noted): [`OtlpHttpConfig::check`] refuses it, so nothing is exported and the
    /// caller says why. Errors name the setting and never contain a header value.
    pub fn resolve(
        flags: &OtlpFlags,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ExportError> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let disabled = get(ENV_SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || get(ENV_TRACES_EXPORTER).is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
        let mut notes = Vec::new();
        let protocol = match flags.protocol {
            Some(p) => p,
            None => Protocol::resolve(env, &mut notes),
        };
        let (endpoint, full) = match (&flags.endpoint, get(ENV_TRACES_ENDPOINT), get(ENV_ENDPOINT))
        {
            (Some(flag), _, _) => (flag.clone(), false),
            _ if disabled => return Ok(None),
            (None, Some(traces), _) => (traces.trim().to_owned(), true),
            (None, None, Some(base)) => base_endpoint(base.trim(), protocol, &mut notes),
            (None, None, None) => return Ok(None),
        };
        let mut config = Self::new(endpoint);
        config.endpoint_is_full = full;
        config.protocol = protocol;
        if let Err(e) = config.traces_url() {
            if flags.endpoint.is_some() {
                return Err(e);
            }
            let source = match get(ENV_TRACES_ENDPOINT) {
                Some(_) => ENV_TRACES_ENDPOINT,
                None => ENV_ENDPOINT,
            };
            if !notes.iter().any(|n| n.starts_with(source)) {
                notes.push(format!("{source}: {e}: nothing can be exported to it"));
            }
        }
        config.headers = resolve_headers(flags, &get, &mut notes)?;
        config.timeout = match flags.timeout {
            Some(t) => t,
            None => env_timeout(&get, &mut notes).unwrap_or(config.timeout),
        };
        config.certificate = match &flags.certificate {
            Some(path) => {
                read_certificates(path).map_err(|cause| ExportError::Unreadable {
                    path: path.clone(),
                    cause,
                })?;
                Some(path.clone())
            }
            None => env_certificate(&get, &mut notes),
        };
        let resource = ResourceSettings::resolve_noting(env, &mut notes);
        config.service_name = resource.service_name;
        config.resource_attributes = resource.attributes;
        config.ignored = notes;
        Ok(Some(config))
    }

    /// The URL requests go to: over HTTP the traces URL, over gRPC the endpoint's origin
    /// with the trace service's method path ([`GRPC_EXPORT_PATH`]).
    pub fn traces_url(&self) -> Result<String, ExportError> {
        let mut url = parse_url(&self.endpoint)?;
        if self.protocol == Protocol::Grpc {
            url.set_path(GRPC_EXPORT_PATH);
            url.set_query(None);
            return Ok(url.to_string());
        }
        if self.endpoint_is_full || !(url.path().is_empty() || url.path() == "/") {
            return Ok(self.endpoint.clone());
        }
        url.set_path("/v1/traces");
        Ok(url.to_string())
    }

    /// The endpoint for messages: any password in it masked.
    pub fn display_endpoint(&self) -> String {
        display_url(&self.endpoint)
    }

    /// The full URL requests are posted to, for messages (password masked); the endpoint
    /// as given when it is not a URL.
    pub fn display_traces_url(&self) -> String {
        match self.traces_url() {
            Ok(url) => display_url(&url),
            Err(_) => self.display_endpoint(),
        }
    }

    /// Checks everything that can be checked before sending: the URL, header names and
    /// values, the certificate file. Errors never contain a header value.
    pub fn check(&self) -> Result<(), ExportError> {
        self.traces_url()?;
        for (i, (name, value)) in self.headers.iter().enumerate() {
            check_header(name, value, &format!("header {}", i + 1))?;
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
        read_certificates(path)
            .map(|(_, certs)| certs)
            .map_err(|cause| ExportError::Unreadable {
                path: path.clone(),
                cause,
            })
    }

    /// The PEM bytes of [`OtlpHttpConfig::certificate`], checked to hold certificates.
    pub(crate) fn certificate_pem(&self) -> Result<Option<Vec<u8>>, ExportError> {
        let Some(path) = &self.certificate else {
            return Ok(None);
        };
        read_certificates(path)
            .map(|(pem, _)| Some(pem))
            .map_err(|cause| ExportError::Unreadable {
                path: path.clone(),
                cause,
            })
    }

    /// Masks every header value in `text` (see [`Secrets`]).
    pub fn mask(&self, text: &str) -> String {
        Secrets::of(self).mask(text)
    }
}

/// The general endpoint of the environment: over HTTP the traces path appended to its own
/// (the specification's rule: `http://h:4318/base` sends to `http://h:4318/base/v1/traces`),
/// over gRPC as given. Not a URL: kept as given, with a note (nothing will be exported).
fn base_endpoint(base: &str, protocol: Protocol, notes: &mut Vec<String>) -> (String, bool) {
    if protocol == Protocol::Grpc {
        return (base.to_owned(), true);
    }
    match signal_url(base) {
        Ok(url) => (url, true),
        Err(e) => {
            notes.push(format!(
                "{ENV_ENDPOINT}: {e}: nothing can be exported to it"
            ));
            (base.to_owned(), true)
        }
    }
}

/// Headers: the environment's (the traces variable replacing the general one whole; an
/// invalid value ignored whole, noted), then each flag replacing the header of its name.
fn resolve_headers(
    flags: &OtlpFlags,
    get: &dyn Fn(&str) -> Option<String>,
    notes: &mut Vec<String>,
) -> Result<Vec<(String, String)>, ExportError> {
    let mut headers = Vec::new();
    if let Some((variable, value)) = get(ENV_TRACES_HEADERS)
        .map(|v| (ENV_TRACES_HEADERS, v))
        .or_else(|| get(ENV_HEADERS).map(|v| (ENV_HEADERS, v)))
    {
        let parsed = parse_pairs(&value, variable).and_then(|pairs| {
            for (name, value) in &pairs {
                check_header(name, value, variable)?;
            }
            Ok(pairs)
        });
        match parsed {
            Ok(pairs) => headers = pairs,
            Err(e) => notes.push(format!(
                "{}: ignored whole, no header from it is sent",
                reason(&e)
            )),
        }
    }
    for (i, raw) in flags.headers.iter().enumerate() {
        let (k, v) = parse_flag_header(raw, i + 1)?;
        check_header(&k, &v, &format!("--otlp-header {}", i + 1))?;
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case(&k));
        headers.push((k, v));
    }
    Ok(headers)
}

/// An error's reason for a note that names its variable itself: a settings error without
/// its `OTLP settings:` prefix.
fn reason(error: &ExportError) -> String {
    match error {
        ExportError::Config(message) => message.clone(),
        other => other.to_string(),
    }
}

/// A header name and value that HTTP can carry; the error names `source`, never the value.
fn check_header(name: &str, value: &str, source: &str) -> Result<(), ExportError> {
    reqwest::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ExportError::Config(format!("{source} has an invalid name {name:?}")))?;
    reqwest::header::HeaderValue::from_str(value).map_err(|_| {
        ExportError::Config(format!(
            "{source}: header {name:?} has a value that is not valid in an HTTP header (value not shown)"
        ))
    })?;
    Ok(())
}

/// `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`; a value that is not milliseconds is noted and the
/// next variable or the default applies.
fn env_timeout(get: &dyn Fn(&str) -> Option<String>, notes: &mut Vec<String>) -> Option<Duration> {
    for name in [ENV_TRACES_TIMEOUT, ENV_TIMEOUT] {
        if let Some(v) = get(name) {
            match v.trim().parse() {
                Ok(ms) => return Some(Duration::from_millis(ms)),
                Err(_) => notes.push(format!(
                    "{name}={v:?} is not a number of milliseconds: ignored"
                )),
            }
        }
    }
    None
}

/// `OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE`; a file that cannot be read or holds no
/// certificate is noted and ignored (the platform's roots only).
fn env_certificate(
    get: &dyn Fn(&str) -> Option<String>,
    notes: &mut Vec<String>,
) -> Option<PathBuf> {
    for name in [ENV_TRACES_CERTIFICATE, ENV_CERTIFICATE] {
        if let Some(v) = get(name) {
            let path = PathBuf::from(v.trim());
            match read_certificates(&path) {
                Ok(_) => return Some(path),
                Err(cause) => notes.push(format!(
                    "{name}={}: {cause}: ignored, the platform's roots only",
                    path.display()
                )),
            }
        }
    }
    None
}

/// The PEM file's bytes and its certificates; `Err(why)` when it cannot be read or holds
/// none.
fn read_certificates(
    path: &std::path::Path,
) -> Result<(Vec<u8>, Vec<reqwest::Certificate>), String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read the OTLP certificate: {e}"))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
    if certs.is_empty() {
        return Err("holds no certificate".to_owned());
    }
    Ok((pem, certs))
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
    /// `service.name` in the attributes). Never fails today: an invalid
    /// `OTEL_RESOURCE_ATTRIBUTES` is ignored whole (see [`ResourceSettings::resolve_noting`]).
    pub fn resolve(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ExportError> {
        Ok(Self::resolve_noting(env, &mut Vec::new()))
    }

    /// [`ResourceSettings::resolve`], an invalid `OTEL_RESOURCE_ATTRIBUTES` discarded whole
    /// (the specification's rule for a decoding error) and reported in `notes`.
    pub fn resolve_noting(env: &dyn Fn(&str) -> Option<String>, notes: &mut Vec<String>) -> Self {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let mut attributes = match get(ENV_RESOURCE_ATTRIBUTES) {
            Some(v) => parse_pairs(&v, ENV_RESOURCE_ATTRIBUTES).unwrap_or_else(|e| {
                notes.push(format!("{}: ignored whole", reason(&e)));
                Vec::new()
            }),
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
        Self {
            service_name,
            attributes,
        }
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

/// The general endpoint with the traces path appended to its own path.
fn signal_url(base: &str) -> Result<String, ExportError> {
    let mut url = parse_url(base)?;
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
