//! An OTLP/HTTPS receiver for tests: a private CA made at test time (rcgen), TLS by rustls
//! (tokio-rustls), HTTP by hyper, bodies decoded by prost. It requires one header: a
//! request without it, or with another value, gets 401 and is not recorded (the 401 body
//! quotes the value it got, as careless backends do, so callers can prove they mask it).
#![allow(dead_code, clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prost::Message;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use transcript_otel::otlp_proto::collector::trace::v1::ExportTraceServiceRequest;

/// A certificate authority made for one test.
pub struct TestCa {
    pub pem: String,
    params: CertificateParams,
    key: KeyPair,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let pem = params.self_signed(&key).unwrap().pem();
        Self { pem, params, key }
    }

    /// A server certificate for 127.0.0.1 and localhost, and its key.
    fn server_cert(&self) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params
            .distinguished_name
            .push(DnType::CommonName, "otlp test receiver");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (
            cert.der().clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
    }

    /// A server certificate for 127.0.0.1 and localhost and its key, as PEM (for a receiver
    /// in another process).
    #[allow(dead_code)] // not every test binary uses it
    pub fn server_pem(&self) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes the CA certificate to `dir/name` and returns the path.
    pub fn write(&self, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, &self.pem).unwrap();
        path
    }
}

/// One accepted request.
#[derive(Debug, Clone)]
pub struct Received {
    pub body: ExportTraceServiceRequest,
    pub content_type: Option<String>,
}

#[derive(Default)]
struct Seen {
    accepted: Mutex<Vec<Received>>,
    rejected: AtomicUsize,
    handshakes_failed: AtomicUsize,
}

/// The receiver; stops with its runtime when dropped.
pub struct TlsReceiver {
    /// `https://127.0.0.1:<port>` (base endpoint: `/v1/traces` is appended).
    pub endpoint: String,
    seen: Arc<Seen>,
    _rt: tokio::runtime::Runtime,
}

impl TlsReceiver {
    /// Serves TLS with a certificate signed by `ca`, accepting only requests whose header
    /// `name` has `value`.
    pub fn start(ca: &TestCa, name: &'static str, value: &str) -> Self {
        let (cert, key) = ca.server_cert();
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![cert], key)
                .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let endpoint = format!("https://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Seen::default());
        let (seen2, expected) = (seen.clone(), value.to_owned());
        rt.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, seen, expected) = (acceptor.clone(), seen2.clone(), expected.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        seen.handshakes_failed.fetch_add(1, Ordering::SeqCst);
                        return;
                    };
                    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let (seen, expected) = (seen.clone(), expected.clone());
                        async move { Ok::<_, hyper::Error>(handle(req, name, &expected, &seen).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Self {
            endpoint,
            seen,
            _rt: rt,
        }
    }

    pub fn accepted(&self) -> Vec<Received> {
        self.seen.accepted.lock().unwrap().clone()
    }

    pub fn rejected(&self) -> usize {
        self.seen.rejected.load(Ordering::SeqCst)
    }

    pub fn handshakes_failed(&self) -> usize {
        self.seen.handshakes_failed.load(Ordering::SeqCst)
    }
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    name: &str,
    expected: &str,
    seen: &Seen,
) -> Response<Full<Bytes>> {
    let got = req
        .headers()
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let content_type = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = req.into_body().collect().await.map(|b| b.to_bytes());
    if got.as_deref() != Some(expected) {
        seen.rejected.fetch_add(1, Ordering::SeqCst);
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .body(Full::new(Bytes::from(format!(
                "invalid credentials: {}",
                got.unwrap_or_default()
            ))))
            .unwrap();
    }
    let Ok(body) = body else {
        return Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Full::new(Bytes::new()))
            .unwrap();
    };
    match ExportTraceServiceRequest::decode(body) {
        Ok(body) => {
            seen.accepted
                .lock()
                .unwrap()
                .push(Received { body, content_type });
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/x-protobuf")
                .body(Full::new(Bytes::new()))
                .unwrap()
        }
        Err(_) => Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Full::new(Bytes::new()))
            .unwrap(),
    }
}
