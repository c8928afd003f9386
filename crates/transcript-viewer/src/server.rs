//! The server: [`ViewerConfig`] in, [`Viewer::bind`] (the address rule: loopback, or a
//! token), [`Viewer::serve`] until the caller's shutdown future resolves, then live streams
//! end and the server returns within a bound.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::ViewerError;
use crate::config::{ViewerConfig, is_loopback};
use crate::state::{AppState, Inner};

/// A bound, not yet serving viewer.
pub struct Viewer {
    listener: tokio::net::TcpListener,
    state: AppState,
}

impl Viewer {
    /// Binds `addr` (port 0 picks one). A non-loopback address without a token is
    /// [`ViewerError::TokenRequired`]; a token that cannot travel in a header is
    /// [`ViewerError::BadToken`].
    pub async fn bind(addr: SocketAddr, config: ViewerConfig) -> Result<Viewer, ViewerError> {
        match &config.token {
            None if !is_loopback(&addr) => return Err(ViewerError::TokenRequired { addr }),
            Some(t) if !crate::auth::valid_token(t) => return Err(ViewerError::BadToken),
            _ => {}
        }
        let listener =
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| ViewerError::Bind {
                    addr,
                    message: e.to_string(),
                })?;
        let state = AppState::new(Inner {
            store: config.store,
            token: config.token,
            price: config.price,
            price_table: config.price_table,
            definitions: config.definitions,
            origins: config.origins,
            summaries: Default::default(),
            snapshot: Default::default(),
            cancel: CancellationToken::new(),
            poll: config.poll,
            clock: config.clock,
        });
        Ok(Viewer { listener, state })
    }

    /// The address it listens on (the port chosen for port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, ViewerError> {
        self.listener
            .local_addr()
            .map_err(|e| ViewerError::Serve(e.to_string()))
    }

    /// Serves until `shutdown` resolves; then live streams end, open connections get a
    /// moment to finish, and it returns.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ViewerError> {
        let cancel = self.state.cancel.clone();
        let poller = tokio::spawn(crate::live::poll(self.state.clone()));
        let app = router(self.state);
        let stop = cancel.clone();
        let graceful = async move {
            shutdown.await;
            stop.cancel();
        };
        let server = axum::serve(self.listener, app).with_graceful_shutdown(graceful);
        let result = tokio::select! {
            r = server => r.map_err(|e| ViewerError::Serve(e.to_string())),
            () = async {
                cancel.cancelled().await;
                tokio::time::sleep(Duration::from_secs(3)).await;
            } => Ok(()),
        };
        poller.abort();
        result
    }
}

/// Every route, behind the token check and the security headers.
fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(crate::list::page))
        .route("/runs/{id}", get(crate::run_page::page))
        .route("/runs/{id}/at/{seq}", get(crate::run_page::at))
        .route("/diff", get(crate::run_page::diff))
        .route("/search", get(crate::search_page::page))
        .route("/receipts", get(crate::receipts::page))
        .route("/api/runs", get(crate::list::api))
        .route("/api/runs/live", get(crate::live::list_events))
        .route("/api/runs/{id}", get(crate::run_page::api))
        .route("/api/runs/{id}/events", get(crate::live::run_events))
        .fallback(crate::http::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::require_token,
        ))
        .layer(axum::middleware::from_fn(crate::http::security_headers))
        .with_state(state)
}
