//! An OTLP/HTTP receiver for the export tests: a wiremock server on 127.0.0.1 (on its own
//! thread) that accepts every `POST /v1/traces` and keeps the requests; the runtime is only for
//! its async API.

use prost::Message;
use transcript_otel::otlp_proto::collector::trace::v1::ExportTraceServiceRequest;
use transcript_otel::otlp_proto::trace::v1::Span;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The receiver (see the module docs).
pub struct Receiver {
    server: MockServer,
    rt: tokio::runtime::Runtime,
}

impl Receiver {
    /// Starts one on a free loopback port.
    pub fn start() -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(async {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .and(path("/v1/traces"))
                .respond_with(ResponseTemplate::new(200))
                .mount(&server)
                .await;
            server
        });
        Self { server, rt }
    }

    /// Its base URL (`http://127.0.0.1:<port>`).
    pub fn endpoint(&self) -> String {
        self.server.uri()
    }

    /// The requests received, decoded; each was binary protobuf (`http/protobuf`).
    pub fn requests(&self) -> Vec<ExportTraceServiceRequest> {
        let requests = self.rt.block_on(self.server.received_requests()).unwrap();
        requests
            .iter()
            .map(|r| {
                let kind = r.headers.get("content-type").map(|v| v.to_str().unwrap());
                assert_eq!(kind, Some("application/x-protobuf"));
                ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap()
            })
            .collect()
    }

    /// Every span received (the CLI has exited: everything it sent has arrived).
    pub fn spans(&self) -> Vec<Span> {
        self.requests()
            .into_iter()
            .flat_map(|r| r.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .collect()
    }

    /// How many spans arrived.
    pub fn span_count(&self) -> usize {
        self.spans().len()
    }
}
