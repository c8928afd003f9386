//! The transport: hyper HTTP/1.1 on a tokio current-thread runtime in its own thread, so the
//! server keeps answering while the test thread blocks on a child process.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming as HyperIncoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::state::{Incoming, Reply, State};

/// The error that ends a cut body: hyper then aborts the connection mid-body.
#[derive(Debug)]
pub(crate) struct StreamCut;

impl fmt::Display for StreamCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stream cut by the script")
    }
}

impl std::error::Error for StreamCut {}

/// A reply body: its chunks one frame each, then either the end or a [`StreamCut`].
pub(crate) struct ScriptedBody {
    chunks: VecDeque<Bytes>,
    cut: bool,
    /// Whether hyper has been given the chance to flush before the cut.
    yielded: bool,
}

impl Body for ScriptedBody {
    type Data = Bytes;
    type Error = StreamCut;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StreamCut>>> {
        let this = self.get_mut();
        if let Some(chunk) = this.chunks.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if this.cut && !this.yielded {
            // hyper drops its write buffer when a body fails: pause once so it flushes the
            // head and the events before the cut, which is what a client sees of a real cut.
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if this.cut {
            this.cut = false;
            return Poll::Ready(Some(Err(StreamCut)));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && !self.cut
    }
}

fn to_response(reply: Reply) -> Response<ScriptedBody> {
    let body = ScriptedBody {
        chunks: reply.chunks.into_iter().map(Bytes::from).collect(),
        cut: reply.cut,
        yielded: false,
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        hyper::StatusCode::from_u16(reply.status).unwrap_or(hyper::StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.content_type),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    for (name, value) in reply.headers {
        if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

async fn serve_one(
    request: Request<HyperIncoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<ScriptedBody>, Infallible> {
    let (parts, body) = request.into_parts();
    // A body that fails to arrive is recorded as empty: the reply then says what is missing.
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let incoming = Incoming {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let reply = state
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .handle(incoming);
    Ok(to_response(reply))
}

/// Accepts connections until `shutdown` fires; each connection is served on its own task.
pub(crate) async fn run(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    mut shutdown: oneshot::Receiver<()>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut shutdown => return,
        };
        // A failed accept (e.g. the client gave up) concerns that client only.
        let Ok((stream, _)) = accepted else { continue };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |req| serve_one(req, Arc::clone(&state)));
            // Connection errors (client hang-ups, scripted cuts) end that connection only.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
