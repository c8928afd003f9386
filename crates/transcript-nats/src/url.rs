//! `nats://host:4222[,host2:4222…][/STREAM][?creds=PATH]`: the storage URL of the CLI and of
//! `TRANSCRIPT_STORAGE`, parsed without credentials (a credentials *file* may be named, never a
//! secret), and [`RunLocation`], a run's location as commands print it.

use std::fmt;
use std::path::PathBuf;

use crate::NatsError;

/// The stream transcripts go to when the URL names none.
pub const DEFAULT_STREAM: &str = "TRANSCRIPTS";

/// The subject prefix of every run: `transcript.run.<run_id>`.
pub const SUBJECT_PREFIX: &str = "transcript.run.";

/// The subject a run's events are published to.
pub fn run_subject(run_id: &transcript_domain::RunId) -> String {
    format!("{SUBJECT_PREFIX}{run_id}")
}

/// The runs-index bucket's name for `stream` (`<STREAM>_RUNS`).
pub fn bucket_name(stream: &str) -> String {
    format!("{stream}_RUNS")
}

/// A parsed NATS storage URL: the servers (as NATS clients take them) and the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageUrl {
    /// `nats://host:port` (or `tls://host:port`), one per server.
    pub servers: Vec<String>,
    /// The JetStream stream name.
    pub stream: String,
    /// The credentials file `?creds=PATH` names (a `.creds` file, or a token or user and
    /// password: [`crate::CREDS_FILE_ENV`]); never shown by `Display`.
    pub creds: Option<PathBuf>,
}

impl StorageUrl {
    /// Whether `text` names NATS storage (`nats://` or `tls://`) rather than a directory.
    pub fn is_nats(text: &str) -> bool {
        text.starts_with("nats://") || text.starts_with("tls://")
    }

    /// Parses `nats://h1:4222,h2:4222/STREAM[?creds=PATH]`. Each server may repeat the scheme
    /// (`nats://a:1,nats://b:2`). A user, password or token in the URL is refused: it would
    /// show in argv and process listings (name a file holding them with `?creds=PATH` or
    /// `TRANSCRIPT_NATS_CREDS_FILE`); the only query is `creds`.
    pub fn parse(text: &str) -> Result<Self, NatsError> {
        let bad = |reason: &str| NatsError::Url {
            url: redact(text),
            reason: reason.to_owned(),
        };
        let (text, creds) = match text.split_once('?') {
            None => (text, None),
            Some((main, query)) => match query.strip_prefix("creds=") {
                Some(path) if !path.is_empty() && !path.contains(['&', '#']) => {
                    (main, Some(PathBuf::from(path)))
                }
                _ => {
                    return Err(bad(
                        "the only query a storage URL takes is ?creds=PATH (a file holding the \
                         credentials); secrets in the URL would show in argv and process listings",
                    ));
                }
            },
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
                    "credentials in the URL would show in argv and process listings: name a \
                     file holding them with ?creds=PATH or TRANSCRIPT_NATS_CREDS_FILE (or set \
                     NATS_USER and NATS_PASSWORD, NATS_TOKEN or NATS_CREDS)",
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
            creds,
        })
    }

    /// Where run `run` of this store is, as commands print it: `nats://…/STREAM#<run>` (the
    /// one form printed; [`RunLocation::parse`] also takes `nats://…/STREAM/<run>.jsonl`).
    pub fn run_location(&self, run: impl fmt::Display) -> String {
        format!("{self}#{run}")
    }

    /// Whether `other` names the same servers and stream (whatever credentials file).
    pub fn same_store(&self, other: &StorageUrl) -> bool {
        self.servers == other.servers && self.stream == other.stream
    }
}

/// A run's location as a command prints it: `nats://…/STREAM#<run>` (`run`, `tail`, `show`),
/// or `nats://…/STREAM/<run>.jsonl` (a file name under the store, as an import into a
/// directory prints it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLocation {
    /// The store.
    pub url: StorageUrl,
    /// The run argument: a run id or a prefix of one, as the store resolves it.
    pub run: String,
}

impl RunLocation {
    /// `Ok(None)` when `text` is no NATS location (a path, a run id, a bare storage URL);
    /// [`NatsError::Url`] when it looks like one but its URL is not usable.
    pub fn parse(text: &str) -> Result<Option<Self>, NatsError> {
        if !StorageUrl::is_nats(text) {
            return Ok(None);
        }
        let (url, run) = if let Some((url, run)) = text.split_once('#') {
            (url.to_owned(), run)
        } else if let Some((url, file)) = text.rsplit_once('/')
            && let Some(run) = file.strip_suffix(".jsonl")
            && !url.ends_with('/')
        {
            (url.to_owned(), run)
        } else {
            return Ok(None);
        };
        let run_like =
            |run: &str| !run.is_empty() && run.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if !run_like(run) {
            return Err(NatsError::Url {
                url: redact(text),
                reason: "a run's location is nats://…/STREAM#<run-id> or \
                         nats://…/STREAM/<run-id>.jsonl"
                    .to_owned(),
            });
        }
        Ok(Some(Self {
            url: StorageUrl::parse(&url)?,
            run: run.to_owned(),
        }))
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
        let u = StorageUrl::parse("nats://a:1/S?creds=/etc/transcript/fleet.creds").unwrap();
        assert_eq!(u.creds, Some(PathBuf::from("/etc/transcript/fleet.creds")));
        assert_eq!(
            (u.stream.as_str(), u.to_string()),
            ("S", "nats://a:1/S".into())
        );
        assert_eq!(
            StorageUrl::parse("nats://a:1?creds=rel/f").unwrap().stream,
            DEFAULT_STREAM
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
            "nats://a:1/S?creds=/x&token=hunter2",
            "nats://a:1/S?creds=",
            "nats://a:1,,b:2",
            "http://a:1",
        ] {
            let e = StorageUrl::parse(bad).unwrap_err().to_string();
            assert!(!e.contains("hunter2") && !e.contains("tok3n"), "{e}");
        }
    }

    #[test]
    fn run_locations_in_both_printed_forms_name_the_store_and_the_run() {
        let id = "00000000-0000-4000-8000-000000000001";
        for text in [
            format!("nats://a:1,nats://b:2/TRANSCRIPTS#{id}"),
            format!("nats://a:1,nats://b:2/TRANSCRIPTS/{id}.jsonl"),
        ] {
            let loc = RunLocation::parse(&text).unwrap().unwrap();
            assert_eq!(loc.url.to_string(), "nats://a:1,nats://b:2/TRANSCRIPTS");
            assert_eq!(loc.run, id);
            assert_eq!(
                loc.url.run_location(id),
                format!("nats://a:1,nats://b:2/TRANSCRIPTS#{id}")
            );
        }
        assert_eq!(RunLocation::parse("nats://a:1/S").unwrap(), None);
        assert_eq!(RunLocation::parse("storage/x.jsonl").unwrap(), None);
        assert!(RunLocation::parse("nats://a:1/S#../../etc").is_err());
    }
}
