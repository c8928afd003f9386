//! The OTLP transport protocols (`OTEL_EXPORTER_OTLP_PROTOCOL` values) this exporter speaks.

use crate::config::{ENV_PROTOCOL, ENV_TRACES_PROTOCOL};
use crate::outcome::ExportError;

/// The gRPC method an OTLP/gRPC export calls (the path of its HTTP/2 request).
pub const GRPC_EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// How spans are encoded and carried (the specification's `OTEL_EXPORTER_OTLP_PROTOCOL`
/// values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`: binary protobuf, `Content-Type: application/x-protobuf`.
    #[default]
    HttpProtobuf,
    /// `http/json`: the OTLP JSON encoding (hex ids, camelCase, 64-bit integers as
    /// strings), `Content-Type: application/json`.
    HttpJson,
    /// `grpc`: the OTLP trace service over gRPC (HTTP/2, usually port 4317). The endpoint is
    /// the server's origin; no `/v1/traces` is appended.
    Grpc,
}

impl Protocol {
    /// The specification's name of the protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
            Protocol::Grpc => "grpc",
        }
    }

    /// The request's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "application/x-protobuf",
            Protocol::HttpJson => "application/json",
            Protocol::Grpc => "application/grpc",
        }
    }

    /// The protocol `value` of `source` (a variable or a flag) names (surrounding whitespace
    /// and case ignored); anything else is [`ExportError::UnsupportedProtocol`].
    pub fn parse(value: &str, source: &str) -> Result<Self, ExportError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Ok(Protocol::HttpJson),
            "grpc" => Ok(Protocol::Grpc),
            _ => Err(ExportError::UnsupportedProtocol {
                variable: source.to_owned(),
                value: value.trim().to_owned(),
            }),
        }
    }

    /// From [`ENV_TRACES_PROTOCOL`], else [`ENV_PROTOCOL`], else `http/protobuf`. A value
    /// this exporter does not speak is ignored (the next variable or the default applies)
    /// and reported in `notes`, as the SDK specification asks of an invalid value.
    pub fn resolve(env: &dyn Fn(&str) -> Option<String>, notes: &mut Vec<String>) -> Self {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        for variable in [ENV_TRACES_PROTOCOL, ENV_PROTOCOL] {
            if let Some(value) = get(variable) {
                match Self::parse(&value, variable) {
                    Ok(protocol) => return protocol,
                    Err(e) => notes.push(format!("{e}: ignored")),
                }
            }
        }
        Protocol::default()
    }
}
