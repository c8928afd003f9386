//! HTTP plumbing shared by the routes: the security headers every response gets (the
//! Content-Security-Policy allowing our one script by its hash), errors as status codes and
//! escaped pages, and the HTML and JSON responses.

use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::Digest as _;
use transcript_domain::run_store::StoreReadError;
use transcript_export::escape_html as esc;

use crate::ViewerError;

/// The Content-Security-Policy of every response: nothing from anywhere by default, our one
/// inline script by its hash (no other script, no inline handler, no `eval`), inline styles
/// (the export's and the diff's pages use them; a style runs no code), requests and forms to
/// this origin only, no framing, no `<base>`.
pub fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let hash = base64::engine::general_purpose::STANDARD
            .encode(sha2::Sha256::digest(crate::page::SCRIPT.as_bytes()));
        format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
             img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; \
             frame-ancestors 'none'"
        )
    })
}

/// Adds the security headers to every response.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(csp()) {
        headers.insert(header::CONTENT_SECURITY_POLICY, value);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// An HTML page, its control characters and bidi controls made visible
/// ([`crate::page::visible_controls`]).
pub fn html(body: String) -> Response {
    let body = crate::page::visible_controls(body);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// A JSON document.
pub fn json(body: String) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

/// The status an error answers with.
pub fn status_of(e: &ViewerError) -> StatusCode {
    match e {
        ViewerError::NotFound(_) | ViewerError::Store(StoreReadError::NotFound { .. }) => {
            StatusCode::NOT_FOUND
        }
        ViewerError::BadRequest(_) | ViewerError::Store(StoreReadError::Ambiguous { .. }) => {
            StatusCode::BAD_REQUEST
        }
        ViewerError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ViewerError {
    fn into_response(self) -> Response {
        let status = status_of(&self);
        let text = self.to_string();
        let body = crate::page::shell(
            &format!(
                "{} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ),
            &format!(
                "<h1>{}</h1><p class=\"error\">{}</p>",
                status.as_u16(),
                esc(&text)
            ),
            &crate::page::Live::None,
        );
        (status, html(body)).into_response()
    }
}

/// The fallback route.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    ViewerError::NotFound(uri.path().to_owned()).into_response()
}
