//! OTLP/gRPC: the trace service's `Export` over tonic (HTTP/2, `http://` or `https://` with
//! rustls: Mozilla's roots plus an optional private CA), with the configured headers as gRPC
//! metadata, a deadline per export and retries of the codes the OTLP specification calls
//! retryable. A current-thread tokio runtime of its own drives it on the export thread of
//! this crate, so callers stay synchronous (and may themselves run inside a runtime: the
//! export threads are plain threads).

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;
use tonic::Code;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::config::{OtlpHttpConfig, Secrets, display_url};
use crate::outcome::{Delivered, ExportError, SpanSink};
use crate::request::{resource, to_otlp_request_for};

/// The OTLP/gRPC exporter.
pub(crate) struct OtlpGrpcSink {
    runtime: tokio::runtime::Runtime,
    client: TraceServiceClient<Channel>,
    metadata: MetadataMap,
    shown_url: String,
    resource: Resource,
    timeout: Duration,
    max_retries: usize,
    secrets: Secrets,
}

impl OtlpGrpcSink {
    pub(crate) fn new(config: &OtlpHttpConfig) -> Result<Self, ExportError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        config.check()?;
        let secrets = Secrets::of(config);
        let build = |e: &dyn std::fmt::Display| ExportError::Build(secrets.mask(&e.to_string()));
        let url = config.traces_url()?;
        let origin = reqwest::Url::parse(&url).map_err(|e| build(&e))?;
        let origin = origin.origin().ascii_serialization();
        let mut endpoint = Endpoint::from_shared(origin.clone())
            .map_err(|e| build(&e))?
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .user_agent(concat!("transcript-otel/", env!("CARGO_PKG_VERSION")))
            .map_err(|e| build(&e))?;
        if origin.starts_with("https://") {
            let mut tls = ClientTlsConfig::new().with_webpki_roots();
            if let Some(pem) = config.certificate_pem()? {
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            endpoint = endpoint.tls_config(tls).map_err(|e| build(&e))?;
        }
        let mut metadata = MetadataMap::new();
        for (name, value) in &config.headers {
            let key = MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
                .map_err(|_| ExportError::Config(format!("invalid gRPC header name {name:?}")))?;
            let value = MetadataValue::try_from(value.as_str()).map_err(|_| {
                ExportError::Config(format!(
                    "header {name:?} has a value gRPC metadata cannot carry (value not shown)"
                ))
            })?;
            metadata.insert(key, value);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ExportError::Build(format!("the gRPC runtime: {e}")))?;
        let channel = {
            let _entered = runtime.enter();
            endpoint.connect_lazy()
        };
        Ok(Self {
            runtime,
            client: TraceServiceClient::new(channel),
            metadata,
            shown_url: config.mask(&display_url(&url)),
            resource: resource(config),
            timeout: config.timeout,
            max_retries: config.max_retries,
            secrets,
        })
    }

    /// One call: what the receiver accepted, or `Err((message, retryable))`.
    fn attempt(
        &mut self,
        request: &opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        left: Duration,
    ) -> Result<Delivered, (String, bool)> {
        let mut call = tonic::Request::new(request.clone());
        *call.metadata_mut() = self.metadata.clone();
        call.set_timeout(left);
        let client = &mut self.client;
        let answer = self.runtime.block_on(async {
            tokio::time::timeout(left, client.export(call))
                .await
                .map_err(|_| tonic::Status::deadline_exceeded("no answer within the timeout"))?
        });
        match answer {
            // A partial success is an answer (not retried): its rejected spans are counted.
            Ok(response) => Ok(match response.into_inner().partial_success {
                Some(p) => Delivered::partial(&self.shown_url, p.rejected_spans, &p.error_message)
                    .masked(|m| self.secrets.mask(m)),
                None => Delivered::all(),
            }),
            Err(status) => Err(describe_status(&status)),
        }
    }
}

/// A gRPC status said plainly, and whether the OTLP specification says to retry it.
fn describe_status(status: &tonic::Status) -> (String, bool) {
    let retryable = matches!(
        status.code(),
        Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unavailable
            | Code::DataLoss
            | Code::ResourceExhausted
    );
    let mut cause = transcript_domain::text::error_chain(status);
    if matches!(
        status.code(),
        Code::Unauthenticated | Code::PermissionDenied
    ) {
        cause.push_str(" (check the OTLP headers: --otlp-header or OTEL_EXPORTER_OTLP_HEADERS)");
    }
    let tls = cause.contains("certificate") || cause.contains("InvalidCertificate");
    if tls {
        cause.push_str(
            " (a private CA goes in --otlp-certificate or OTEL_EXPORTER_OTLP_CERTIFICATE)",
        );
    }
    (
        format!("gRPC {:?}: {cause}", status.code()),
        retryable && !tls,
    )
}

impl SpanSink for OtlpGrpcSink {
    fn export(&mut self, batch: Vec<SpanData>) -> Result<Delivered, String> {
        let request = to_otlp_request_for(batch, &self.resource);
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_millis(100);
        let mut tries = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = if left.is_zero() {
                Err(("timed out".to_owned(), false))
            } else {
                self.attempt(&request, left)
            };
            match outcome {
                Ok(delivered) => return Ok(delivered),
                Err((message, retryable)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if !retryable || tries >= self.max_retries || backoff >= left {
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
                    std::thread::sleep(backoff);
                    backoff = backoff.saturating_mul(2);
                }
            }
        }
    }
}

/// The sink of `config`'s protocol: OTLP/gRPC or OTLP/HTTP.
pub(crate) fn sink_for(config: &OtlpHttpConfig) -> Result<Box<dyn SpanSink>, ExportError> {
    Ok(match config.protocol {
        crate::config::Protocol::Grpc => Box::new(OtlpGrpcSink::new(config)?),
        _ => Box::new(crate::transport::OtlpHttpSink::new(config)?),
    })
}
