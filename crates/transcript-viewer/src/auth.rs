//! The shared secret of a viewer on a non-loopback address: every request carries the token
//! (`Authorization: Bearer T`, the `transcript_token` cookie, or `?token=T`, which sets the
//! cookie so the pages' own links and the live script need nothing more), compared in
//! constant time ([`subtle`]); anything else is 401.

use std::io::Read as _;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq as _;

use crate::ViewerError;
use crate::state::AppState;

/// The cookie the token travels in after a `?token=` visit.
pub const COOKIE: &str = "transcript_token";

/// A fresh random token: 32 hex digits from the kernel's random source (`/dev/urandom`).
pub fn generate_token() -> Result<String, ViewerError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| ViewerError::Serve(format!("cannot read /dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `token` may be used: 16 to 256 characters that need no quoting in a header, a
/// cookie or a query string.
pub fn valid_token(token: &str) -> bool {
    (16..=256).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Constant-time equality of two tokens (the length is not secret).
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len() && bool::from(given.as_bytes().ct_eq(token.as_bytes()))
}

/// The token a request carries, wherever it carries it; `from_query` says it came in the URL.
fn carried(headers: &HeaderMap, query: Option<&str>) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(t) = v.strip_prefix("Bearer ")
    {
        found.push((t.trim().to_owned(), false));
    }
    for cookie in headers.get_all(header::COOKIE) {
        let Ok(text) = cookie.to_str() else { continue };
        for pair in text.split(';') {
            if let Some((name, value)) = pair.trim().split_once('=')
                && name == COOKIE
            {
                found.push((value.to_owned(), false));
            }
        }
    }
    if let Some(query) = query {
        for (name, value) in form_pairs(query) {
            if name == "token" {
                found.push((value, true));
            }
        }
    }
    found
}

/// `a=b&c=d` pairs, percent-decoded (a token needs no decoding; anything else is compared
/// as given).
fn form_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        Some((name.to_owned(), value.to_owned()))
    })
}

/// The middleware: with a token configured, a request without it is 401; one that brought it
/// in the URL gets it back as an `HttpOnly`, `SameSite=Strict` cookie.
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = state.token.as_deref() else {
        return next.run(request).await;
    };
    let found = carried(request.headers(), request.uri().query());
    let Some((_, from_query)) = found.iter().find(|(t, _)| same(t, token)) else {
        return unauthorized();
    };
    let set_cookie = *from_query;
    let mut response = next.run(request).await;
    if set_cookie
        && let Ok(value) = HeaderValue::from_str(&format!(
            "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
        ))
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Bearer"),
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
        ],
        "401: this viewer needs its token (open the URL `transcript serve` printed, or send \
         Authorization: Bearer TOKEN)\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole_and_travel_three_ways() {
        assert!(same("abcdefabcdefabcd", "abcdefabcdefabcd"));
        assert!(!same("abcdefabcdefabce", "abcdefabcdefabcd"));
        assert!(!same("abcdefabcdefabc", "abcdefabcdefabcd"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer aaa"),
        );
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("x=1; transcript_token=bbb"),
        );
        let found = carried(&headers, Some("q=1&token=ccc"));
        assert_eq!(
            found,
            vec![
                ("aaa".to_owned(), false),
                ("bbb".to_owned(), false),
                ("ccc".to_owned(), true)
            ]
        );
        assert!(valid_token("0123456789abcdef"));
        assert!(!valid_token("short"));
        assert!(!valid_token("0123456789abcdef;"));
        assert!(generate_token().is_ok_and(|t| valid_token(&t) && t.len() == 32));
    }
}
