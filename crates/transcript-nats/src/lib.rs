//! The `Recorder` port on NATS JetStream: a fleet of runners, one durable store.
//!
//! # Model
//!
//! Every run is one subject, `transcript.run.<run_id>`, of one stream (default
//! [`DEFAULT_STREAM`], created by the first writer, [`NatsStore::connect`], with the
//! [`StreamOptions`] given: replicas, max age, max bytes; readers open it with
//! [`NatsStore::connect_existing`], which never creates and names the stream holding the
//! runs when the URL names another). Each message is one transcript line, byte for byte the line the file
//! recorder of `transcript-infra` writes for the same draft, seq and timestamp (the domain's
//! [`transcript_domain::PreEncoded`] encodes both). A key-value bucket `<STREAM>_RUNS` holds
//! one [`RunEntry`] per run (workflow, status, parent, start, end, usage per model), written
//! as the run goes, so listing the fleet's runs never reads the stream.
//!
//! [`NatsRecorderFactory`] opens a [`NatsRecorder`] per run (root and child runs);
//! [`NatsStore`] reads runs back ([`NatsStore::run_lines`], [`NatsStore::follow`],
//! [`NatsStore::runs`]); [`mirror`] copies the stream into the file layout with a durable
//! consumer. Imports publish through a [`PipelinedPublisher`] (a bounded window of acks in
//! flight instead of one ack per event), staged by [`ImportStaging`]: the file importer runs
//! on a private directory filled from the store, and what it wrote is published back.
//!
//! # Invariants
//!
//! - `record` returns only after JetStream's publish ack: an acknowledged event is stored on
//!   the stream's replicas ("ack = durable", across machines): it survives the runner's
//!   death, a server process killed, and in a cluster the loss of a minority of the nodes.
//!   When it reaches the servers' disks is theirs to decide (`jetstream { sync_interval }`,
//!   default two minutes; `always` syncs before each ack): a power loss of every replica
//!   inside that window can lose acknowledged events. The client can neither ask for a sync
//!   nor see the setting, so it promises no more than the ack.
//! - `Nats-Msg-Id = <run_id>:<seq>`: a publish retried after a lost ack is stored once.
//! - A runner's step events fit the servers' `max_payload` (1 MiB by default):
//!   [`NatsStore::value_cap`] gives the per-value cap (`(max_payload − 4 KiB) / 12`: two
//!   values per event, each grown up to 6× by JSON escaping; see [`payload`]) that the runner
//!   hands exec, and refuses a `max_payload` below [`payload::MIN_MAX_PAYLOAD`] before
//!   anything runs. The cap is read from the server the client is connected to: the setting
//!   bounds what a client publishes on its own connection, not routes, replication or reads.
//! - A line larger than `max_payload` anyway (a message of many large blocks from a runner
//!   that did not give exec `max_payload` as its line budget, a step name of kilobytes, a
//!   server reconnected to with a smaller setting) is never sent: `record` fails at once
//!   naming both sizes (the run cannot go on), rather than retrying.
//! - `Nats-Expected-Last-Subject-Sequence`: a run's events are gapless and in seq order, and a
//!   second writer of a run is refused with `RecordError::Locked`.
//! - An import ([`PipelinedPublisher`]) is gapless and in seq order per run too: each
//!   message carries `Nats-Msg-Id`, a run's first carries
//!   `Nats-Expected-Last-Subject-Sequence`, a failed ack is retried under the same id against
//!   the run's previous stream sequence, every ack must follow the run's order, and
//!   [`PipelinedPublisher::finish`] returns only once every ack arrived.
//! - A publish whose outcome stays unknown after `publish_attempts` (quorum lost, servers
//!   gone) fails `record` within about `ack_timeout × publish_attempts`, and every later
//!   `record` of that run fails too: a run never reports success past a lost event.
//! - A reader cannot hang: [`NatsStore::run_lines`] ends naming the run when the message it
//!   reads up to is removed mid-read, within `ack_timeout × publish_attempts` at most.
//! - [`mirror`] writes each run's lines in seq order, acknowledges them only once they are
//!   synced, and skips lines a file already holds: killed at any point and restarted, it
//!   produces the same files.
//!
//! # Threat model
//!
//! The stream is trusted storage, as the storage directory is for the file recorder: anyone
//! who may publish to `transcript.run.>` can write transcripts. Credentials never travel in
//! argv: a storage URL with a user, password or token is refused, and the connection takes
//! them from the environment (`NATS_CREDS`, `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN`,
//! `NATS_CA`, `NATS_CERT`/`NATS_KEY`). Lines read back are decoded by the tolerant domain
//! decoder; the mirror names files after run ids parsed from subjects (never a path taken from
//! the data).
//!
//! # Versioning
//!
//! Subject layout, message id format and the index entry's JSON are part of the storage
//! contract: a change is a breaking change of this crate. Tested against nats-server 2.15.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use transcript_domain::{EventDraft, ManualClock, Payload, RecorderFactory, StepPayload, Timestamp};
//! use transcript_nats::{NatsRecorderFactory, NatsStore, StorageUrl, StreamOptions};
//!
//! let url = StorageUrl::parse("nats://127.0.0.1:4222/TRANSCRIPTS")?;
//! let store = NatsStore::connect(&url, StreamOptions::default()).await?;
//! let factory = NatsRecorderFactory::new(store, Arc::new(ManualClock::new(Timestamp::UNIX_EPOCH)));
//! let run = transcript_domain::RunId::from_bytes([7; 16]);
//! let recorder = factory.create(run, None).await?;
//! recorder.record(EventDraft::run_level(Payload::RunStarted(StepPayload::new("demo", "workflow")))).await?;
//! recorder.close().await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod credentials;
mod encode;
mod error;
mod index;
mod lease;
mod live_entry;
mod mirror;
pub mod payload;
mod pending;
mod provision;
mod publish;
mod read;
mod recorder;
mod run_store;
mod staging;
mod store;
mod subscription;
mod url;

pub use credentials::{CREDENTIAL_ENV, CREDS_FILE_ENV};
pub use error::NatsError;
pub use index::{BilledTurnEntry, IndexStatus, RunEntry};
pub use lease::lease_key;
pub use mirror::{MirrorOptions, MirrorReport, mirror};
pub use pending::{PENDING_PREFIX, recover as recover_pending};
pub use publish::{DEFAULT_WINDOW, MAX_WINDOW, PipelinedPublisher, Published};
pub use read::RunFollower;
pub use recorder::{NatsRecorder, NatsRecorderFactory};
pub use run_store::{NatsRunStore, stored_run};
pub use staging::{
    BlockingStaging, IMPORT_INDEX_FILE, IMPORT_INDEX_KEY, ImportStaging, StagedImport, import_index,
};
pub use store::{NatsStore, StreamOptions};
pub use subscription::NatsSubscription;
pub use url::{DEFAULT_STREAM, RunLocation, SUBJECT_PREFIX, StorageUrl, run_subject};
#[cfg(feature = "testing")]
pub mod testing;
