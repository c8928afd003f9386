//! What an export reports: its error, its counts, and the contract of the sinks spans are
//! delivered to (whose failures are counted, never propagated to the run).

use opentelemetry_sdk::trace::SpanData;

use crate::mapping::MapProblem;

/// Why an export could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given (a password in it masked).
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting (flag or `OTEL_*` variable) is invalid; the message names it and never
    /// quotes a header value.
    #[error("OTLP settings: {0}")]
    Config(String),
    /// `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` or `--otlp-protocol` names a value outside the
    /// specification's (`grpc`, `http/protobuf`, `http/json`).
    #[error(
        "{variable}={value:?} is not an OTLP protocol: set it to grpc, http/protobuf or http/json"
    )]
    UnsupportedProtocol {
        /// The variable that named it.
        variable: String,
        /// Its value.
        value: String,
    },
    /// A file named by a flag (the `--otlp-certificate` PEM) cannot be read or holds no
    /// certificate: invalid input, not a usage error.
    #[error("{}: {cause}", path.display())]
    Unreadable {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        cause: String,
    },
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Build(String),
    /// The export thread could not be started or died.
    #[error("export thread: {0}")]
    Thread(String),
    /// Some spans were not accepted by the endpoint.
    #[error("{failed} of {total} spans were not exported: {cause}")]
    Incomplete {
        /// Spans not accepted.
        failed: u64,
        /// Spans attempted.
        total: u64,
        /// The last failure.
        cause: String,
        /// Counts of the attempt.
        report: Box<ExportReport>,
    },
    /// Writing OTLP/JSON failed.
    #[error("writing OTLP/JSON: {0}")]
    Io(#[from] std::io::Error),
    /// Encoding OTLP/JSON failed.
    #[error("encoding OTLP/JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// What an export did. Live export never fails the run: its problems end up
/// here, to be reported when the run is over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Spans the endpoint accepted.
    pub spans_sent: u64,
    /// Spans in requests that failed, and spans the receiver rejected (OTLP partial success).
    pub spans_failed: u64,
    /// Requests sent (successful or not).
    pub requests: u64,
    /// Failed requests, plus one if the exporter could not be set up.
    pub failures: u64,
    /// Events the live exporter received.
    pub events_received: u64,
    /// Events the live exporter never saw: its queue was full, or the
    /// subscription feeding it lagged. Spans around them may end
    /// "incomplete".
    pub events_dropped: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// The live exporter stopped sending after
    /// [`crate::MAX_CONSECUTIVE_FAILURES`] failed requests in a row; later
    /// spans are counted in `spans_failed` without being sent.
    pub gave_up: bool,
    /// Mapping inconsistencies (the spans were produced regardless).
    pub problems: Vec<MapProblem>,
}

impl ExportReport {
    /// Whether every span was delivered and no event was dropped.
    pub fn is_complete(&self) -> bool {
        self.failures == 0 && self.spans_failed == 0 && self.events_dropped == 0
    }

    /// Counts one request of `spans` spans and its outcome: a failed request's spans as
    /// failed, and of an answered one those the receiver rejected (counted in `spans_failed`,
    /// its message kept as the last error; the request itself did not fail).
    pub(crate) fn record(&mut self, spans: usize, outcome: Result<Delivered, String>) {
        self.requests += 1;
        match outcome {
            Ok(delivered) => {
                let rejected = delivered.rejected_spans.min(spans as u64);
                self.spans_sent += spans as u64 - rejected;
                self.spans_failed += rejected;
                if let Some(why) = delivered.rejection {
                    self.last_error = Some(why);
                }
            }
            Err(error) => {
                self.failures += 1;
                self.spans_failed += spans as u64;
                self.last_error = Some(error);
            }
        }
    }
}

/// A batch the receiver answered: OTLP's partial success says how many of its spans it
/// rejected, and why (a receiver MUST answer a partly accepted request with success and
/// `partial_success`; the rejected spans are not to be sent again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Spans of the batch the receiver rejected (`partial_success.rejected_spans`; 0: all
    /// accepted).
    pub rejected_spans: u64,
    /// The receiver's reason, said plainly with where it was sent (`None` when all were
    /// accepted and it gave none).
    pub rejection: Option<String>,
}

impl Delivered {
    /// Every span accepted.
    pub fn all() -> Self {
        Self::default()
    }

    /// What a receiver's `partial_success` (`rejected_spans`, `error_message`) says for a
    /// batch sent to `url`: a message when it rejected spans or gave a warning.
    pub(crate) fn partial(url: &str, rejected_spans: i64, error_message: &str) -> Self {
        let rejected_spans = u64::try_from(rejected_spans).unwrap_or(0);
        let message = error_message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let rejection = match (rejected_spans, message.is_empty()) {
            (0, true) => None,
            (0, false) => Some(format!("{url}: the receiver warned: {message}")),
            (n, true) => Some(format!("{url}: the receiver rejected {n} spans")),
            (n, false) => Some(format!("{url}: the receiver rejected {n} spans: {message}")),
        };
        Self {
            rejected_spans,
            rejection,
        }
    }

    /// The same, its message passed through `mask` (a receiver may quote a header back).
    pub(crate) fn masked(mut self, mask: impl Fn(&str) -> String) -> Self {
        self.rejection = self.rejection.map(|m| mask(&m));
        self
    }
}

/// Receives batches of finished spans on the export thread.
///
/// Implemented by the OTLP/HTTP exporter; tests and other transports can
/// supply their own through [`crate::LiveExporter::start_with_sink`].
pub trait SpanSink {
    /// Delivers one batch: what the receiver accepted of it, or why the request failed; an
    /// error is counted, never propagated to the run.
    fn export(&mut self, batch: Vec<SpanData>) -> Result<Delivered, String>;
}
