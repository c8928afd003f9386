//! The local model server: a test's script, or a replay's recorded turns.
//!
//! [`ModelServer::start`] binds 127.0.0.1 on a free port and plays a [`Script`]: each
//! generation request, whatever API it speaks, gets the next [`Turn`] rendered in that API's
//! streaming (SSE) or non-streaming format, with the turn's [`Usage`] and unique ids
//! (`msg_testkit_0001`, `resp_testkit_0002`, …). It speaks:
//!
//! | API | endpoints | used by |
//! |---|---|---|
//! | Anthropic Messages | `POST /v1/messages` (any query, e.g. `?beta=true`), `POST /v1/messages/count_tokens` | Claude Code (`ANTHROPIC_BASE_URL`) |
//! | OpenAI Responses | `POST /v1/responses` | Codex (`model_providers.<x>.base_url`, `wire_api = "responses"`) |
//! | Gemini | `POST /v1beta/models/<m>:streamGenerateContent`, `:generateContent`, `:countTokens` | Gemini CLI (`GOOGLE_GEMINI_BASE_URL`) |
//! | OpenAI Chat Completions | `POST /v1/chat/completions` | our HTTP agent |
//!
//! plus `GET …/models` (one model, in every provider's listing shape). Any other endpoint is
//! answered 404 with the provider's error body; a generation request beyond the script gets a
//! readable HTTP 400 (or the script's [`Script::after_end`] fault). Every request is recorded
//! ([`ModelServer::requests`]) and the usage of every turn served in full is billed per
//! provider ([`ModelServer::billed`]): the independent truth a test compares receipts with.
//!
//! A turn may [expect](Turn::expect) the tool results its request sends back (a replay's
//! recorded results of the turn before); a request that does not carry them is a
//! [`Mismatch`], refused with HTTP 400 under [`Matching::Strict`] or kept as a warning under
//! [`Matching::Fifo`] ([`ModelServer::mismatches`]).
//!
//! ```
//! use serde_json::json;
//! use transcript_replay::server::{ModelServer, Provider, Script, Turn, Usage};
//!
//! let server = ModelServer::start(Script::new([
//!     Turn::tool_call("Read", json!({"file_path": "/tmp/notes.txt"})).with_usage(Usage::new(10, 5)),
//!     Turn::text("done").with_usage(Usage::new(20, 3)),
//! ]))?;
//! // Point an agent at server.url(), run it, then:
//! assert_eq!(server.billed(Provider::Anthropic), Usage::default());
//! assert!(server.requests().is_empty());
//! # Ok::<(), transcript_replay::server::ServerError>(())
//! ```

mod anthropic;
mod chat;
mod conversation;
mod gemini;
mod http;
mod mismatch;
mod pairing;
mod record;
mod render;
mod responses;
mod route;
mod script;
mod side;
pub mod sse;
mod state;

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::oneshot;

pub use mismatch::Mismatch;
pub(crate) use mismatch::same_text;
pub(crate) use record::text_of;
pub use record::{Bill, Handling, Provider, RecordedRequest};
pub use script::{Block, Expect, ExpectedResult, Fault, Matching, Script, Turn, Usage};

use state::State;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding 127.0.0.1 failed.
    #[error("cannot bind 127.0.0.1 for the model server: {0}")]
    Bind(#[source] std::io::Error),
    /// The runtime or its thread could not be created.
    #[error("cannot start the model server's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// A running scripted model server; stops when dropped.
#[derive(Debug)]
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ModelServer {
    /// Binds 127.0.0.1 on a free port and starts playing `script` on a thread of its own
    /// (callable from sync tests and from inside a tokio runtime alike).
    pub fn start(script: Script) -> Result<Self, ServerError> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(ServerError::Bind)?;
        listener.set_nonblocking(true).map_err(ServerError::Bind)?;
        let addr = listener.local_addr().map_err(ServerError::Bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(ServerError::Runtime)?;
        let state = Arc::new(Mutex::new(State::new(script)));
        let (shutdown, stop) = oneshot::channel();
        let served = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name(format!("model-server-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    // from_std needs the runtime's reactor: convert inside it.
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => http::run(listener, served, stop).await,
                        Err(e) => eprintln!("model server: cannot listen: {e}"),
                    }
                });
            })
            .map_err(ServerError::Runtime)?;
        Ok(ModelServer {
            addr,
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The bound address (127.0.0.1 and the port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL without a trailing slash, e.g. `http://127.0.0.1:40123`: what
    /// `ANTHROPIC_BASE_URL` and `GOOGLE_GEMINI_BASE_URL` take; OpenAI clients take
    /// [`ModelServer::openai_base_url`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The OpenAI-style base URL, `<url>/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state().requests().to_vec()
    }

    /// The generation requests received so far (side requests left out), in arrival order.
    pub fn generation_requests(&self) -> Vec<RecordedRequest> {
        self.state()
            .requests()
            .iter()
            .filter(|r| r.is_generation())
            .cloned()
            .collect()
    }

    /// Requests that found no script turn or no endpoint: a test usually asserts there are
    /// none, and prints them when there are.
    pub fn unexpected_requests(&self) -> Vec<RecordedRequest> {
        self.state()
            .requests()
            .iter()
            .filter(|r| matches!(r.handling, Handling::Unscripted | Handling::Unknown))
            .cloned()
            .collect()
    }

    /// Every request that did not carry what its turn expected, in arrival order (under
    /// [`Matching::Strict`] at most one: later requests are refused without a check).
    pub fn mismatches(&self) -> Vec<Mismatch> {
        self.state().mismatches().to_vec()
    }

    /// How many script turns have been consumed (faulted ones included).
    pub fn turns_served(&self) -> usize {
        self.state().turns_served()
    }

    /// The usage billed to `provider`: the sum over turns served in full.
    pub fn billed(&self, provider: Provider) -> Usage {
        self.state().billed(provider)
    }

    /// Every generation request answered in full so far, in arrival order, with the model it
    /// named and the usage billed for it (faulted and unscripted requests bill nothing).
    pub fn bills(&self) -> Vec<Bill> {
        self.state().bills().to_vec()
    }

    /// The usage billed over every provider.
    pub fn billed_total(&self) -> Usage {
        let state = self.state();
        Provider::ALL
            .iter()
            .fold(Usage::default(), |acc, p| acc + state.billed(*p))
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            // The thread may already be gone; nothing to stop then.
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panicked server thread has nothing left to clean up.
            let _ = thread.join();
        }
    }
}
