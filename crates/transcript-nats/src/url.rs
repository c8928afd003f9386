//! `nats://host:4222[,host2:4222…][/STREAM]`: the storage URL of the CLI and of
//! `TRANSCRIPT_STORAGE`, parsed without credentials (they come from the environment).

use std::fmt;

use crate::NatsError;

/// The stream transcripts go to when the URL names none.
pub const DEFAULT_STREAM: &str = "TRANSCRIPTS";

/// A parsed NATS storage URL: the servers (as NATS clients take them) and the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageUrl {
    /// `nats://host:port` (or `tls://host:port`), one per server.
    pub servers: Vec<String>,
    /// The JetStream stream name.
    pub stream: String,
}

impl StorageUrl {
    /// Whether `text` names NATS storage (`nats://` or `tls://`) rather than a directory.
    pub fn is_nats(text: &str) -> bool {
        text.starts_with("nats://") || text.starts_with("tls://")
    }

    /// Parses `nats://h1:4222,h2:4222/STREAM`. Each server may repeat the scheme
    /// (`nats://a:1,nats://b:2`). A user, password or token in the URL is refused: it would
    /// show in argv and process listings (use `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN` or
    /// `NATS_CREDS`).
    pub fn parse(text: &str) -> Result<Self, NatsError> {
        let bad = |reason: &str| NatsError::Url {
            url: redact(text),
            reason: reason.to_owned(),
        };
        let scheme = if text.starts_with("tls://") {
            "tls://"
        } else if text.starts_with("nats://") {
            "nats://"
        } else {
            return Err(bad("expected nats://host:port[,host:port…][/STREAM]"));
        };
        // The stream is the path after the last server: the last '/' not part of a scheme.
        let (hosts, stream) = match text.rfind('/') {
            Some(i) if !text[..=i].ends_with("://") => (&text[..i], &text[i + 1..]),
            _ => (text, DEFAULT_STREAM),
        };
        let stream = if stream.is_empty() {
            DEFAULT_STREAM
        } else {
            stream
        };
        if !stream
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad(
                "the stream name may hold letters, digits, '_' and '-' only",
            ));
        }
        let mut servers = Vec::new();
        for part in hosts.split(',') {
            let part = part.trim();
            let host = part
                .strip_prefix("nats://")
                .or_else(|| part.strip_prefix("tls://"))
                .unwrap_or(part);
            if host.contains('@') {
                return Err(bad(
                    "credentials in the URL would show in argv and process listings: \
                     set NATS_USER and NATS_PASSWORD, NATS_TOKEN or NATS_CREDS instead",
                ));
            }
            if host.is_empty() || host.contains(['/', '?', '#']) {
                return Err(bad("each server is host or host:port"));
            }
            let scheme = if part.starts_with("tls://") {
                "tls://"
            } else {
                scheme
            };
            servers.push(format!("{scheme}{host}"));
        }
        Ok(Self {
            servers,
            stream: stream.to_owned(),
        })
    }
}

/// The URL with anything before an `@`, and any query or fragment (`?…`, `#…`: never part of
/// a storage URL, and where a token would go), replaced, for error messages.
fn redact(text: &str) -> String {
    let (text, tail) = match text.find(['?', '#']) {
        Some(i) => (&text[..i], "?***"),
        None => (text, ""),
    };
    let mut out = text
        .split(',')
        .map(|part| match part.rfind('@') {
            Some(i) => {
                let scheme_end = part.find("://").map_or(0, |s| s + 3);
                format!("{}***{}", &part[..scheme_end.min(i)], &part[i..])
            }
            None => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",");
    out.push_str(tail);
    out
}

impl fmt::Display for StorageUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.servers.join(","), self.stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_servers_and_stream() {
        let u = StorageUrl::parse("nats://a:4222,b:4223/RUNS").unwrap();
        assert_eq!(u.servers, vec!["nats://a:4222", "nats://b:4223"]);
        assert_eq!(u.stream, "RUNS");
        assert_eq!(u.to_string(), "nats://a:4222,nats://b:4223/RUNS");
        let u = StorageUrl::parse("nats://a:1,nats://b:2").unwrap();
        assert_eq!(u.servers, vec!["nats://a:1", "nats://b:2"]);
        assert_eq!(u.stream, DEFAULT_STREAM);
        assert_eq!(
            StorageUrl::parse("nats://a:1/").unwrap().stream,
            DEFAULT_STREAM
        );
        assert_eq!(
            StorageUrl::parse("tls://a:1").unwrap().servers,
            vec!["tls://a:1"]
        );
        assert!(StorageUrl::is_nats("nats://x") && !StorageUrl::is_nats("storage/nats"));
    }

    #[test]
    fn refuses_credentials_and_bad_shapes_without_echoing_secrets() {
        for bad in [
            "nats://user:hunter2@a:4222",
            "nats://a:1,nats://tok3n@b:2/S",
            "nats://a:1?token=hunter2",
            "nats://a:1/S?pass=hunter2",
            "nats://a:1,b:2?auth_token=tok3n/S",
            "nats://a:1#hunter2",
            "nats://a:1/bad.stream",
            "nats://a:1,,b:2",
            "http://a:1",
        ] {
            let e = StorageUrl::parse(bad).unwrap_err().to_string();
            assert!(!e.contains("hunter2") && !e.contains("tok3n"), "{e}");
        }
    }
}
