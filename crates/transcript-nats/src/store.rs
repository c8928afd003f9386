//! The connection to a NATS deployment, the transcripts stream and the runs-index bucket.
//!
//! Credentials never come from the URL or argv: from a file (`TRANSCRIPT_NATS_CREDS_FILE` or
//! `?creds=PATH`), or the environment the NATS way (`crate::credentials`).

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};

use crate::{NatsError, StorageUrl};

pub use crate::url::{SUBJECT_PREFIX, bucket_name, run_subject};

/// How the stream (and the runs-index bucket beside it) is created when it does not exist
/// yet. An existing stream is used as it is.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Copies of each message in a cluster (1, 3 or 5; at most the cluster's size). `None`:
    /// the cluster's, when this writer creates the stream (3 on a cluster of 3 or more, else
    /// its size; `crate::provision`), and whatever an existing stream keeps.
    pub replicas: Option<usize>,
    /// How long events are kept; `Duration::ZERO` keeps them until `max_bytes` is reached.
    pub max_age: Duration,
    /// The stream's size cap in bytes; `-1` is unlimited.
    pub max_bytes: i64,
    /// How long a publish waits for its ack before it is retried.
    pub ack_timeout: Duration,
    /// Publish attempts (the first and its retries, same `Nats-Msg-Id`) before `record` fails:
    /// `record` fails within about `ack_timeout × publish_attempts`.
    pub publish_attempts: u32,
    /// How long connecting may take before it fails (NATS down at start).
    pub connect_timeout: Duration,
    /// A run's lease (whole seconds, at least 1): a runner renews it every third of this, and
    /// a run without `run.completed` whose lease lapsed reads as abandoned.
    pub lease: Duration,
    /// How long a writer may keep trying to open or create the stream and the runs index
    /// (a fresh cluster electing its meta leader) before it is refused.
    pub create_timeout: Duration,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            replicas: None,
            max_age: Duration::ZERO,
            max_bytes: -1,
            ack_timeout: Duration::from_secs(5),
            publish_attempts: 3,
            connect_timeout: Duration::from_secs(5),
            lease: Duration::from_secs(30),
            create_timeout: Duration::from_secs(30),
        }
    }
}

impl StreamOptions {
    /// The defaults, overridden from the environment: `TRANSCRIPT_NATS_REPLICAS`,
    /// `TRANSCRIPT_NATS_MAX_AGE_SECS`, `TRANSCRIPT_NATS_MAX_BYTES` (used when the stream is
    /// created), `TRANSCRIPT_NATS_CREATE_TIMEOUT_SECS` (how long a writer tries to open or
    /// create them), `TRANSCRIPT_NATS_LEASE_SECS` (a run's lease), `TRANSCRIPT_NATS_ACK_TIMEOUT_MS`
    /// and `TRANSCRIPT_NATS_PUBLISH_ATTEMPTS` (how long `record` may wait before the run fails; a short ack timeout shortens the connect
    /// timeout too, to no less than 500 ms). An empty variable is unset; a value that is not a
    /// number is [`NatsError::Setting`].
    pub fn from_env() -> Result<Self, NatsError> {
        fn var<T: std::str::FromStr>(name: &str) -> Result<Option<T>, NatsError> {
            match std::env::var(name) {
                Ok(v) if !v.is_empty() => v.parse().map(Some).map_err(|_| NatsError::Setting {
                    name: name.to_owned(),
                    value: v,
                }),
                _ => Ok(None),
            }
        }
        let mut options = Self::default();
        if let Some(r) = var("TRANSCRIPT_NATS_REPLICAS")? {
            options.replicas = Some(r);
        }
        if let Some(s) = var("TRANSCRIPT_NATS_CREATE_TIMEOUT_SECS")? {
            options.create_timeout = Duration::from_secs(s);
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
        if let Some(s) = var::<u64>("TRANSCRIPT_NATS_LEASE_SECS")? {
            options.lease = Duration::from_secs(s.max(1));
        }
        Ok(options)
    }
}

/// A connected NATS storage: the client, its JetStream context, the stream and the runs index.
#[derive(Clone)]
pub struct NatsStore {
    pub(crate) url: StorageUrl,
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) stream: stream::Stream,
    /// The runs index; `None` when a reader found no bucket (readers never create one: the
    /// runs are then all read from the stream).
    pub(crate) index: Option<kv::Store>,
    pub(crate) options: StreamOptions,
    /// Counts the client's (re)connections: a follower's consumer may be gone with a server.
    pub(crate) connections: tokio::sync::watch::Receiver<u64>,
    /// Said when this writer created the stream (its replicas, and why).
    pub(crate) created: Option<String>,
}

impl std::fmt::Debug for NatsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsStore").field("url", &self.url).finish()
    }
}

/// The servers of `url` had no stream of its name: [`NatsError::NoStore`], naming the stream
/// that holds the runs' subjects if one does; `None` when that is the URL's stream itself
/// (created since it was looked for).
async fn no_store(js: &jetstream::Context, url: &StorageUrl) -> Option<NatsError> {
    let holder = js
        .stream_by_subject(format!("{SUBJECT_PREFIX}>"))
        .await
        .ok();
    if holder.as_deref() == Some(url.stream.as_str()) {
        return None;
    }
    let reason = match &holder {
        Some(holder) => {
            let other = StorageUrl {
                stream: holder.clone(),
                ..url.clone()
            };
            format!(
                "the servers have no stream {}; stream {holder} holds the runs \
                 ({SUBJECT_PREFIX}>): read with --storage {other}",
                url.stream
            )
        }
        None => format!(
            "the servers have no stream {} and none holds the runs ({SUBJECT_PREFIX}>); \
             `transcript run` or `transcript import` with this storage creates it",
            url.stream
        ),
    };
    Some(match holder {
        Some(holder) => NatsError::WrongStream {
            url: url.to_string(),
            holder,
            reason,
        },
        None => NatsError::NoStore {
            url: url.to_string(),
            reason,
        },
    })
}

/// Connects a client to `url`'s servers (credentials from the environment); the receiver
/// counts its (re)connections.
async fn connect_client(
    url: &StorageUrl,
    options: &StreamOptions,
) -> Result<(async_nats::Client, tokio::sync::watch::Receiver<u64>), NatsError> {
    let (connected, connections) = tokio::sync::watch::channel(0);
    let connected = std::sync::Arc::new(connected);
    let client = crate::credentials::connect_options(url, options.connect_timeout)?
        .event_callback(move |event| {
            let connected = connected.clone();
            async move {
                if matches!(event, async_nats::Event::Connected) {
                    connected.send_modify(|n| *n += 1);
                }
            }
        })
        .connect(url.servers.clone())
        .await
        .map_err(|e| NatsError::Connect {
            url: url.to_string(),
            message: e.to_string(),
        })?;
    Ok((client, connections))
}

/// The JetStream context every store uses.
fn context(client: &async_nats::Client, options: &StreamOptions) -> jetstream::Context {
    jetstream::ContextBuilder::new()
        .timeout(options.ack_timeout)
        .max_ack_inflight(4096)
        .backpressure_on_inflight(true)
        .build(client.clone())
}

impl NatsStore {
    /// Connects to `url`'s servers and opens (or creates) its stream and the runs-index bucket
    /// `<STREAM>_RUNS`: for writers (`run`, `import`); readers use
    /// [`Self::connect_existing`], which never creates. Fails with an error naming the URL
    /// when no server answers within `options.connect_timeout`. Concurrent writers converge on
    /// one stream and bucket, and a cluster still electing its meta leader is waited out
    /// within `options.create_timeout` (`crate::provision`); [`Self::created`] says when this
    /// writer made the stream, with how many replicas.
    pub async fn connect(url: &StorageUrl, options: StreamOptions) -> Result<Self, NatsError> {
        let (client, connections) = connect_client(url, &options).await?;
        let js = context(&client, &options);
        let crate::provision::Provisioned {
            stream,
            index,
            created,
        } = crate::provision::provision(&client, &js, url, &options).await?;
        Ok(Self {
            url: url.clone(),
            client,
            js,
            stream,
            index: Some(index),
            options,
            connections,
            created,
        })
    }

    /// Connects to `url`'s servers and opens its stream and runs index as they are, for
    /// readers: nothing is created. Servers without the stream are
    /// [`NatsError::NoStore`], naming the stream that holds the runs' subjects when another
    /// one does (a mistyped stream name); a stream without its bucket is read from the stream
    /// alone.
    pub async fn connect_existing(
        url: &StorageUrl,
        options: StreamOptions,
    ) -> Result<Self, NatsError> {
        use jetstream::context::GetStreamErrorKind;
        let (client, connections) = connect_client(url, &options).await?;
        let js = context(&client, &options);
        let not_found = |e: &jetstream::context::GetStreamError| {
            matches!(
                e.kind(),
                GetStreamErrorKind::JetStream(j)
                    if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
            )
        };
        let opening = |e: jetstream::context::GetStreamError| NatsError::JetStream {
            url: url.to_string(),
            message: format!("opening stream {}: {e}", url.stream),
        };
        let stream = match js.get_stream(&url.stream).await {
            Ok(stream) => stream,
            Err(e) if not_found(&e) => match no_store(&js, url).await {
                // A runner created it in between: open it.
                None => js.get_stream(&url.stream).await.map_err(opening)?,
                Some(e) => return Err(e),
            },
            Err(e) => return Err(opening(e)),
        };
        let index = js.get_key_value(bucket_name(&url.stream)).await.ok();
        Ok(Self {
            url: url.clone(),
            client,
            js,
            stream,
            index,
            options,
            connections,
            created: None,
        })
    }

    /// [`Self::connect_existing`] for a follower: on servers without the stream, calls
    /// `waiting` once and connects again each second until a writer creates it. A mistyped
    /// stream name (another stream holds the runs: [`NatsError::WrongStream`]) is not waited
    /// for: it ends at once naming the stream that does.
    pub async fn connect_existing_waiting(
        url: &StorageUrl,
        options: StreamOptions,
        waiting: impl FnOnce(),
    ) -> Result<Self, NatsError> {
        let mut waiting = Some(waiting);
        loop {
            match Self::connect_existing(url, options.clone()).await {
                Err(NatsError::NoStore { .. }) => {
                    if let Some(say) = waiting.take() {
                        say();
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                result => return result,
            }
        }
    }

    /// The largest message, headers included, the server this client is connected to accepts
    /// (its `max_payload`, from its INFO). That is the limit that matters: `max_payload`
    /// bounds what a client publishes on its own connection, while routes, stream replication
    /// and delivery to readers do not enforce it (a line above a 64 KB server's setting,
    /// published through a 1 MiB one, is replicated to it and read back from it:
    /// `transcript-cli/tests/nats_payload.rs`). After a reconnect to a server with a smaller
    /// setting, a line above it is refused by the client with an error naming both sizes.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// The per-value cap, at most `wanted`, for a run recording here ([`crate::payload`]):
    /// `Ok((cap, None))` when `wanted` fits, `Ok((cap, Some(note)))` when it was lowered (the
    /// note says why, naming `max_payload`, for the user), or
    /// [`NatsError::MaxPayloadTooSmall`] when no useful cap fits.
    pub fn value_cap(&self, wanted: usize) -> Result<(usize, Option<String>), NatsError> {
        let max_payload = self.max_payload();
        let Some(cap) = crate::payload::value_cap(max_payload, wanted) else {
            return Err(NatsError::MaxPayloadTooSmall {
                url: self.url.to_string(),
                max_payload,
                minimum: crate::payload::MIN_MAX_PAYLOAD,
                wanted,
                keeps: crate::payload::max_payload_for(wanted),
            });
        };
        let note = (cap < wanted).then(|| {
            format!(
                "recorded values are cut at {cap} bytes instead of {wanted}: the NATS servers' \
                 max_payload at {} is {max_payload} bytes, and an event's line (up to two \
                 values, JSON escaping growing them up to 6x) must fit one message; \
                 `max_payload: {}` on the servers keeps {wanted}",
                self.url,
                crate::payload::max_payload_for(wanted)
            )
        });
        Ok((cap, note))
    }

    /// [`Self::value_cap`] for a run whose connection was checked with it: the smallest
    /// accepted cap if the client has since reconnected to a server refusing every cap.
    pub fn run_value_cap(&self, wanted: usize) -> usize {
        let smallest = crate::payload::value_cap(crate::payload::MIN_MAX_PAYLOAD, wanted);
        self.value_cap(wanted)
            .map_or(smallest.unwrap_or(0), |(cap, _)| cap)
    }

    /// The storage URL (servers and stream), for messages.
    pub fn url(&self) -> &StorageUrl {
        &self.url
    }

    /// When this writer created the stream: a note naming its replicas and where they came
    /// from (`TRANSCRIPT_NATS_REPLICAS`, or the cluster reached), for the runner to say.
    pub fn created(&self) -> Option<&str> {
        self.created.as_deref()
    }

    /// The stream options this store was opened with.
    pub fn options(&self) -> &StreamOptions {
        &self.options
    }

    /// The JetStream context (for tools and benchmarks that publish raw messages).
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// The underlying client.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    pub(crate) fn js_error(
        &self,
        what: impl std::fmt::Display,
        e: impl std::fmt::Display,
    ) -> NatsError {
        NatsError::JetStream {
            url: self.url.to_string(),
            message: format!("{what}: {e}"),
        }
    }
}
