//! The downstream endpoint: rmcp's streamable HTTP server on `127.0.0.1`, one path per
//! upstream server (`/mcp/<name>`), behind a per-run secret header; and [`McpProxy`], the
//! handle whose lifetime is the proxy's.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{Allowlist, McpServer, ProxyLimits, validate_servers};
use crate::error::ProxyError;
use crate::preset::{Endpoint, ProxyEndpoints};
use crate::proxy::{ServerProxy, Shared};
use crate::record::{RecordTarget, Recording};
use crate::upstream::Upstream;

/// The header every downstream request must carry, with the run's secret as its value.
pub const SECRET_HEADER: &str = "x-transcript-mcp-secret";

type Service = StreamableHttpService<ServerProxy, LocalSessionManager>;

/// A running proxy: upstream servers started, the endpoint listening.
///
/// Its lifetime is the agent step's: [`McpProxy::shutdown`] (or cancelling the token given to
/// [`McpProxy::start`], or dropping the handle) stops the endpoint, ends every MCP session and
/// kills every upstream server's process group. Nothing it started survives it.
pub struct McpProxy {
    endpoints: ProxyEndpoints,
    shared: Arc<Shared>,
    upstreams: Vec<Arc<Upstream>>,
    tasks: JoinSet<()>,
    /// Stops the endpoint and its sessions (shutdown, drop); the run's cancellation only
    /// ends calls, so that the agent still gets their error answers.
    serving: CancellationToken,
}

impl std::fmt::Debug for McpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpProxy")
            .field("endpoints", &self.endpoints.endpoints)
            .finish_non_exhaustive()
    }
}

impl McpProxy {
    /// Starts every server of `servers` (all or none: a server that fails to start stops the
    /// ones already started), then listens on `127.0.0.1` on a free port.
    ///
    /// `cancel` is the run's (or step's) cancellation: when it fires, calls in flight and
    /// later calls are answered with an error and recorded, never forwarded; the endpoint
    /// stays up (so the agent gets those answers) until [`McpProxy::shutdown`] or drop.
    pub async fn start(
        servers: &[McpServer],
        allowlist: Allowlist,
        target: RecordTarget,
        limits: ProxyLimits,
        cancel: CancellationToken,
    ) -> Result<Self, ProxyError> {
        Self::start_launching(servers, allowlist, target, limits, None, cancel).await
    }

    /// [`McpProxy::start`] whose stdio servers are started by `launch` when given (the
    /// composition root confines them with the kernel, #56) instead of a plain spawn.
    pub async fn start_launching(
        servers: &[McpServer],
        allowlist: Allowlist,
        target: RecordTarget,
        limits: ProxyLimits,
        launch: Option<crate::Launch>,
        cancel: CancellationToken,
    ) -> Result<Self, ProxyError> {
        validate_servers(servers)?;
        limits.check()?;
        let mut upstreams = Vec::new();
        for server in servers {
            match Upstream::connect(server, limits.start_deadline, launch.as_ref()).await {
                Ok(u) => upstreams.push(Arc::new(u)),
                Err(e) => {
                    stop_all(upstreams, limits).await;
                    return Err(e);
                }
            }
        }
        let listener = match TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await {
            Ok(l) => l,
            Err(e) => {
                stop_all(upstreams, limits).await;
                return Err(ProxyError::Bind(e));
            }
        };
        let port = listener.local_addr().map_err(ProxyError::Bind)?.port();
        let secret = new_secret()?;
        let shared = Arc::new(Shared {
            allowlist,
            limits,
            recording: Recording::new(target),
            cancel: cancel.child_token(),
        });
        let serving = CancellationToken::new();
        let mut routes = BTreeMap::new();
        let mut endpoints = Vec::new();
        for upstream in &upstreams {
            let path = format!("/mcp/{}", upstream.name);
            let handler = ServerProxy {
                upstream: upstream.clone(),
                shared: shared.clone(),
            };
            // No SSE priming events: their empty `data:` breaks the MCP client Gemini CLI
            // 0.61 bundles ("Unexpected end of JSON input", and no tools); nothing here
            // resumes streams anyway.
            let mut config = StreamableHttpServerConfig::default().with_sse_retry(None);
            config.cancellation_token = serving.child_token();
            let mut sessions = LocalSessionManager::default();
            sessions.session_config.sse_retry = None;
            // Sessions live as long as the proxy (an agent may think for long between calls).
            sessions.session_config.keep_alive = None;
            let service: Service =
                StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(sessions), config);
            routes.insert(path.clone(), service);
            endpoints.push(Endpoint {
                server: upstream.name.clone(),
                url: format!("http://127.0.0.1:{port}{path}"),
            });
        }
        let mut tasks = JoinSet::new();
        tasks.spawn(accept_loop(
            listener,
            Arc::new(routes),
            secret.clone(),
            serving.clone(),
        ));
        Ok(Self {
            endpoints: ProxyEndpoints {
                endpoints,
                secret_header: SECRET_HEADER.to_owned(),
                secret,
            },
            shared,
            upstreams,
            tasks,
            serving,
        })
    }

    /// The URLs and the secret the agent CLI's MCP configuration points at (see
    /// [`crate::preset`]).
    pub fn endpoints(&self) -> &ProxyEndpoints {
        &self.endpoints
    }

    /// The process group ids of the stdio servers (each is its leader's pid), for checks that
    /// nothing survives the proxy.
    pub fn process_groups(&self) -> Vec<u32> {
        self.upstreams
            .iter()
            .filter_map(|u| u.process_group())
            .collect()
    }

    /// Stops serving, ends every MCP session, kills and reaps every upstream server's process
    /// group. Returns [`ProxyError::Record`] when an observation could not be written while the
    /// proxy ran: the step lost data and must not report success.
    pub async fn shutdown(mut self) -> Result<(), ProxyError> {
        self.shared.cancel.cancel();
        self.serving.cancel();
        while self.tasks.join_next().await.is_some() {}
        let upstreams = std::mem::take(&mut self.upstreams);
        stop_all(upstreams, self.shared.limits).await;
        match self.shared.recording.first_failure() {
            Some(e) => Err(ProxyError::Record(e)),
            None => Ok(()),
        }
    }
}

impl Drop for McpProxy {
    fn drop(&mut self) {
        self.shared.cancel.cancel();
        self.serving.cancel();
        for upstream in &self.upstreams {
            kill_group(upstream.process_group());
        }
    }
}

/// 256 bits from the OS, as hex.
fn new_secret() -> Result<String, ProxyError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| ProxyError::Randomness(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

async fn stop_all(upstreams: Vec<Arc<Upstream>>, limits: ProxyLimits) {
    for upstream in upstreams {
        upstream.stop(limits.kill_grace).await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    routes: Arc<BTreeMap<String, Service>>,
    secret: String,
    cancel: CancellationToken,
) {
    let secret: Arc<str> = secret.into();
    let mut connections = JoinSet::new();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "MCP proxy accept failed");
                    continue;
                }
            },
            () = cancel.cancelled() => break,
        };
        let routes = routes.clone();
        let secret = secret.clone();
        let cancel = cancel.clone();
        connections.spawn(async move {
            let service =
                hyper::service::service_fn(move |req| route(req, routes.clone(), secret.clone()));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                () = cancel.cancelled() => {}
            }
        });
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

async fn route(
    req: Request<Incoming>,
    routes: Arc<BTreeMap<String, Service>>,
    secret: Arc<str>,
) -> Result<Response<BoxBody<Bytes, Infallible>>, Infallible> {
    let authorized = req
        .headers()
        .get(SECRET_HEADER)
        .is_some_and(|v| constant_time_eq(v.as_bytes(), secret.as_bytes()));
    if !authorized {
        tracing::debug!(method = %req.method(), path = %req.uri().path(), "MCP proxy request without the secret");
        return Ok(plain(
            StatusCode::UNAUTHORIZED,
            "missing or wrong proxy secret",
        ));
    }
    let Some(service) = routes.get(req.uri().path()) else {
        return Ok(plain(StatusCode::NOT_FOUND, "no such MCP server"));
    };
    let mut service = service.clone();
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let response = tower_service::Service::call(&mut service, req).await?;
    tracing::debug!(%method, %path, status = %response.status(), headers = ?response.headers(), "MCP proxy request");
    Ok(response)
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
