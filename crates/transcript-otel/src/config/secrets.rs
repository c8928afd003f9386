//! Secrets of a configuration (header values, an endpoint's password) and their masking.

use percent_encoding::percent_decode_str;
use reqwest::Url;

use crate::config::OtlpHttpConfig;

/// The secrets of a configuration (header values, and a password in the endpoint URL), to
/// mask wherever a message could quote them: an error from the HTTP client, a response
/// body from the backend.
#[derive(Clone, Default)]
pub struct Secrets(Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} masked)", self.0.len())
    }
}

/// What a secret is replaced with.
pub const MASK: &str = "***";

/// Shortest value treated as a secret.
pub const MIN_SECRET_LEN: usize = 4;

impl Secrets {
    /// The header values of `config` and each of their whitespace-separated words
    /// (`Basic <token>`: the token alone is masked too), plus the endpoint's password, longest
    /// first; each of at least [`MIN_SECRET_LEN`] bytes.
    pub fn of(config: &OtlpHttpConfig) -> Self {
        let mut secrets: Vec<String> = Vec::new();
        for (_, value) in &config.headers {
            secrets.push(value.trim().to_owned());
            secrets.extend(value.split_whitespace().map(str::to_owned));
        }
        if let Ok(url) = Url::parse(&config.endpoint)
            && let Some(password) = url.password()
        {
            secrets.push(password.to_owned());
            if let Ok(decoded) = percent_decode_str(password).decode_utf8() {
                secrets.push(decoded.into_owned());
            }
        }
        // Shorter values (`x-langfuse-ingestion-version=4`) are not credentials, and masking
        // them would garble every message (`HTTP 401`).
        secrets.retain(|s| s.len() >= MIN_SECRET_LEN);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self(secrets)
    }

    /// `text` with every secret replaced by [`MASK`].
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.0 {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }
}

/// A URL for messages: its password (if any) masked.
pub fn display_url(endpoint: &str) -> String {
    match Url::parse(endpoint) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some(MASK));
            url.to_string()
        }
        _ => endpoint.to_owned(),
    }
}
