//! A writer's store, created idempotently and patiently: the stream, the runs-index bucket and
//! its per-message TTLs.
//!
//! Runners started together on a fresh cluster all find no stream and all create it. A
//! creation answered "already exists" or "in use" (another runner's, or a configuration that
//! differs only by what a runner set since, such as the bucket's TTLs) is looked up again and
//! used; a step that fails otherwise (a JetStream request timed out or unanswered while the
//! cluster elects its meta leader, a stream without a leader yet, a cluster not yet
//! available) is retried with a backoff until [`crate::StreamOptions::create_timeout`] (30 s)
//! has passed since the connection, and only then is the store refused, naming the step and
//! the last cause. Definite answers (JetStream not enabled, the runs' subjects held by another
//! stream, replicas a single server cannot keep) are not retried.
//!
//! When the runner creates the stream and `TRANSCRIPT_NATS_REPLICAS` is not set, the replicas
//! are the cluster's it reached: 3 on a cluster of 3 or more servers, else its size, 1 on a
//! server outside a cluster. The size is read from what any user sees, the server's INFO: its
//! `cluster` name and `connect_urls` (each server's client address, gossiped by the cluster),
//! and the storage URL's servers when it names more; no `$SYS` request.

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream::context::{CreateStreamErrorKind, GetStreamErrorKind};
use async_nats::jetstream::{self, ErrorCode, kv, stream};
use tokio::time::Instant;

use crate::url::{SUBJECT_PREFIX, bucket_name};
use crate::{NatsError, StorageUrl, StreamOptions};

/// What [`provision`] opened or made.
pub(crate) struct Provisioned {
    pub(crate) stream: stream::Stream,
    pub(crate) index: kv::Store,
    /// Said when this runner created the stream: its replicas and why.
    pub(crate) created: Option<String>,
}

/// The replicas a stream created here gets, and why (for the runner's note).
pub(crate) fn replicas_for(
    client: &async_nats::Client,
    url: &StorageUrl,
    options: &StreamOptions,
) -> (usize, String) {
    if let Some(replicas) = options.replicas {
        return (replicas, "TRANSCRIPT_NATS_REPLICAS".to_owned());
    }
    let info = client.server_info();
    let Some(cluster) = info.cluster.as_deref().filter(|c| !c.is_empty()) else {
        return (
            1,
            format!("server {} is not in a cluster", info.server_name),
        );
    };
    let advertised: BTreeSet<&str> = info.connect_urls.iter().map(String::as_str).collect();
    let size = advertised.len().max(url.servers.len()).max(1);
    (
        size.min(3),
        format!(
            "cluster {cluster} of {size} server{}; TRANSCRIPT_NATS_REPLICAS sets another number",
            if size == 1 { "" } else { "s" }
        ),
    )
}

/// One attempt's outcome.
enum Attempt<T> {
    Done(T),
    /// Worth another try within the deadline: what failed.
    Again(String),
}

/// Waits before the next attempt, or fails with `what` and the last cause once `deadline` has
/// passed.
async fn pause_or_fail(
    url: &StorageUrl,
    (what, cause): (&str, String),
    deadline: Instant,
    pause: &mut Duration,
) -> Result<(), NatsError> {
    let now = Instant::now();
    if now >= deadline {
        return Err(NatsError::JetStream {
            url: url.to_string(),
            message: format!(
                "{what}: {cause} (tried until the store-creation bound passed: \
                 TRANSCRIPT_NATS_CREATE_TIMEOUT_SECS)"
            ),
        });
    }
    tokio::time::sleep((*pause).min(deadline - now)).await;
    *pause = (*pause * 2).min(Duration::from_secs(2));
    Ok(())
}

/// Whether a JetStream error code is a definite answer rather than a cluster still forming.
fn definite(code: ErrorCode) -> bool {
    [
        ErrorCode::JETSTREAM_NOT_ENABLED,
        ErrorCode::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT,
        ErrorCode::STREAM_SUBJECT_OVERLAP,
        ErrorCode::STREAM_INVALID_CONFIG,
        ErrorCode::STREAM_REPLICAS_NOT_SUPPORTED,
    ]
    .contains(&code)
}

/// Opens or creates `url`'s stream, its runs-index bucket and the bucket's TTLs, each step
/// retried until `options.create_timeout` has passed (see the module docs).
pub(crate) async fn provision(
    client: &async_nats::Client,
    js: &jetstream::Context,
    url: &StorageUrl,
    options: &StreamOptions,
) -> Result<Provisioned, NatsError> {
    let deadline = Instant::now() + options.create_timeout;
    let mut pause = Duration::from_millis(100);
    let (stream, created) = loop {
        match stream_attempt(client, js, url, options).await? {
            Attempt::Done(done) => break done,
            Attempt::Again(cause) => {
                let what = format!("opening stream {}", url.stream);
                pause_or_fail(url, (&what, cause), deadline, &mut pause).await?;
            }
        }
    };
    let replicas = stream.cached_info().config.num_replicas;
    let bucket = bucket_name(&url.stream);
    let mut pause = Duration::from_millis(100);
    let mut index = loop {
        match bucket_attempt(js, &bucket, replicas).await {
            Attempt::Done(index) => break index,
            Attempt::Again(cause) => {
                let what = format!("opening key-value bucket {bucket}");
                pause_or_fail(url, (&what, cause), deadline, &mut pause).await?;
            }
        }
    };
    // Leases expire by per-message TTL (crate::lease).
    let mut pause = Duration::from_millis(100);
    while let Err(cause) = crate::lease::allow_ttl(js, &mut index).await {
        let what = format!("allowing message TTLs in bucket {bucket}");
        pause_or_fail(url, (&what, cause), deadline, &mut pause).await?;
    }
    Ok(Provisioned {
        stream,
        index,
        created,
    })
}

/// The stream's configuration when this runner creates it.
fn stream_config(url: &StorageUrl, options: &StreamOptions, replicas: usize) -> stream::Config {
    stream::Config {
        name: url.stream.clone(),
        subjects: vec![format!("{SUBJECT_PREFIX}>")],
        num_replicas: replicas,
        max_age: options.max_age,
        max_bytes: options.max_bytes,
        storage: stream::StorageType::File,
        allow_direct: true,
        ..Default::default()
    }
}

/// One look for the stream (with a leader), creating it when there is none.
async fn stream_attempt(
    client: &async_nats::Client,
    js: &jetstream::Context,
    url: &StorageUrl,
    options: &StreamOptions,
) -> Result<Attempt<(stream::Stream, Option<String>)>, NatsError> {
    let found = match js.get_stream(&url.stream).await {
        Ok(stream) => return Ok(led(stream, None)),
        Err(e) => match e.kind() {
            GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND => {
                None
            }
            GetStreamErrorKind::JetStream(j) if definite(j.error_code()) => {
                return Err(opening(url, &e));
            }
            _ => Some(e.to_string()),
        },
    };
    if let Some(cause) = found {
        return Ok(Attempt::Again(cause));
    }
    let (replicas, why) = replicas_for(client, url, options);
    match js
        .create_stream(stream_config(url, options, replicas))
        .await
    {
        Ok(stream) => {
            let note = format!(
                "created stream {} at {url} keeping {replicas} {} of each event ({why})",
                url.stream,
                if replicas == 1 { "copy" } else { "copies" },
            );
            Ok(led(stream, Some(note)))
        }
        Err(e) => match e.kind() {
            // Another runner made it first: look it up again.
            CreateStreamErrorKind::JetStream(j)
                if j.error_code() == ErrorCode::STREAM_NAME_EXIST =>
            {
                Ok(Attempt::Again(e.to_string()))
            }
            CreateStreamErrorKind::JetStream(j) if definite(j.error_code()) => {
                Err(open_error(js, url, e).await)
            }
            CreateStreamErrorKind::EmptyStreamName | CreateStreamErrorKind::InvalidStreamName => {
                Err(open_error(js, url, e).await)
            }
            _ => Ok(Attempt::Again(e.to_string())),
        },
    }
}

/// The stream once it has a leader (a replicated stream just created has none for a moment).
fn led(stream: stream::Stream, note: Option<String>) -> Attempt<(stream::Stream, Option<String>)> {
    let info = stream.cached_info();
    match &info.cluster {
        Some(cluster) if cluster.leader.is_none() => {
            Attempt::Again(format!("stream {} has no leader yet", info.config.name))
        }
        _ => Attempt::Done((stream, note)),
    }
}

fn opening(url: &StorageUrl, e: &dyn std::fmt::Display) -> NatsError {
    NatsError::JetStream {
        url: url.to_string(),
        message: format!("opening stream {}: {e}", url.stream),
    }
}

/// One look for the runs-index bucket, creating it when its stream does not exist.
async fn bucket_attempt(
    js: &jetstream::Context,
    bucket: &str,
    replicas: usize,
) -> Attempt<kv::Store> {
    match js.get_stream(format!("KV_{bucket}")).await {
        Ok(stream)
            if stream
                .cached_info()
                .cluster
                .as_ref()
                .is_some_and(|c| c.leader.is_none()) =>
        {
            return Attempt::Again(format!("bucket {bucket} has no leader yet"));
        }
        Ok(_) => {
            return match js.get_key_value(bucket).await {
                Ok(store) => Attempt::Done(store),
                Err(e) => Attempt::Again(e.to_string()),
            };
        }
        Err(e) => match e.kind() {
            GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND => {}
            _ => return Attempt::Again(e.to_string()),
        },
    }
    let config = kv::Config {
        bucket: bucket.to_owned(),
        description: "transcript runs index (run id -> summary, runs' leases)".to_owned(),
        history: 1,
        num_replicas: replicas,
        storage: stream::StorageType::File,
        ..Default::default()
    };
    match js.create_key_value(config).await {
        Ok(store) => Attempt::Done(store),
        // Made by another runner meanwhile (perhaps with TTLs allowed since), or the cluster
        // still forming: the next attempt looks again.
        Err(e) => Attempt::Again(e.to_string()),
    }
}

/// Why the stream of `url` could not be opened: when another stream already takes the runs'
/// subjects (JetStream gives a subject to one stream), that stream and the URL that reads it.
async fn open_error(
    js: &jetstream::Context,
    url: &StorageUrl,
    e: jetstream::context::CreateStreamError,
) -> NatsError {
    use jetstream::context::CreateStreamErrorKind;
    let message = format!("opening stream {}: {e}", url.stream);
    let overlap = matches!(
        e.kind(),
        CreateStreamErrorKind::JetStream(j)
            if j.error_code() == jetstream::ErrorCode::STREAM_SUBJECT_OVERLAP
    );
    let holder = if overlap {
        js.stream_by_subject(format!("{SUBJECT_PREFIX}>"))
            .await
            .ok()
    } else {
        None
    };
    let message = match holder {
        Some(holder) => {
            let other = StorageUrl {
                stream: holder.clone(),
                ..url.clone()
            };
            format!(
                "{message}: stream {holder} already holds the runs' subjects \
                 ({SUBJECT_PREFIX}>) on these servers, and a subject belongs to one stream; \
                 read and record with --storage {other}"
            )
        }
        None => message,
    };
    NatsError::JetStream {
        url: url.to_string(),
        message,
    }
}
