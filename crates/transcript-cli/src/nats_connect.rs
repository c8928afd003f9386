//! Connecting to NATS storage (#44): the `--storage` URL, the stream options and credentials
//! from the environment, and the connection error naming the URL (exit 4). Shared by
//! `nats_storage` (the commands on NATS storage) and `cmd::mirror`.

use std::path::Path;
use std::time::Duration;

use transcript_nats::{NatsStore, StorageUrl, StreamOptions};

use crate::CliError;

/// The NATS URL `storage` names, if it names one.
pub fn url_of(storage: &Path) -> Result<Option<StorageUrl>, CliError> {
    let text = storage.to_string_lossy();
    if !StorageUrl::is_nats(&text) {
        return Ok(None);
    }
    StorageUrl::parse(&text)
        .map(Some)
        .map_err(|e| CliError::Usage(e.to_string()))
}

/// Stream options from the environment: `TRANSCRIPT_NATS_REPLICAS`,
/// `TRANSCRIPT_NATS_MAX_AGE_SECS`, `TRANSCRIPT_NATS_MAX_BYTES` (used when the stream is created),
/// `TRANSCRIPT_NATS_ACK_TIMEOUT_MS` and `TRANSCRIPT_NATS_PUBLISH_ATTEMPTS` (how long `record`
/// may wait before the run fails).
pub fn options_from_env() -> Result<StreamOptions, CliError> {
    fn var<T: std::str::FromStr>(name: &str) -> Result<Option<T>, CliError> {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => v
                .parse()
                .map(Some)
                .map_err(|_| CliError::Usage(format!("{name}={v:?} is not a number"))),
            _ => Ok(None),
        }
    }
    let mut options = StreamOptions::default();
    if let Some(r) = var("TRANSCRIPT_NATS_REPLICAS")? {
        options.replicas = r;
    }
    if let Some(s) = var("TRANSCRIPT_NATS_MAX_AGE_SECS")? {
        options.max_age = Duration::from_secs(s);
    }
    if let Some(b) = var("TRANSCRIPT_NATS_MAX_BYTES")? {
        options.max_bytes = b;
    }
    if let Some(ms) = var("TRANSCRIPT_NATS_ACK_TIMEOUT_MS")? {
        options.ack_timeout = Duration::from_millis(ms);
        options.connect_timeout = options
            .connect_timeout
            .min(options.ack_timeout.max(Duration::from_millis(500)));
    }
    if let Some(n) = var("TRANSCRIPT_NATS_PUBLISH_ATTEMPTS")? {
        options.publish_attempts = n;
    }
    Ok(options)
}

/// Connects, or fails with the URL and the cause (exit 4: the storage is unreachable).
pub async fn connect(url: &StorageUrl) -> Result<NatsStore, CliError> {
    NatsStore::connect(url, options_from_env()?)
        .await
        .map_err(|e| CliError::Storage(e.to_string()))
}
