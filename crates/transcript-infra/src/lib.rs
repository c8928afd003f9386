//! Storage adapters for canonical agent exchange transcripts: the durable
//! JSONL recorder, its live fan-out, and the tolerant streaming reader.
//!
//! # Run a workflow into a transcript and watch it live
//!
//! Give `transcript_exec::ExecutionService` a [`JsonlRecorderFactory`] (one
//! `<run_id>.jsonl` per run, child runs included) wrapped in a
//! [`TapFactory`], which hands every run the service opens (the root run and
//! each `call_workflow` child run) to your consumer from seq 1. After the
//! run, [`TapFactory::drain`] waits until each consumer has read to the end,
//! [`load_run_tree`] rebuilds the step tree (with usage per step, see
//! `transcript_domain::tree`) and [`verify_run`] checks the files.
//! `examples/custom-runner` in the repository is the whole runner.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use transcript_infra::{JsonlRecorderFactory, TapFactory, load_run_tree, verify_run};
//!
//! let storage = std::path::Path::new("storage/transcripts");
//! let tap = Arc::new(TapFactory::new(
//!     Arc::new(JsonlRecorderFactory::new(storage)),
//!     Box::new(|mut run| {
//!         Some(tokio::spawn(async move {
//!             while let Some(e) = run.next().await {
//!                 println!("{} #{} {} {}", e.run_id, e.seq, e.event_type().as_str(), e.path);
//!             }
//!         }))
//!     }),
//! ));
//! // let service = ExecutionService::builder(workspace).recorder_factory(tap.clone()).build()?;
//! // let outcome = service.run(&workflows, inputs, cancel).await?;
//! # let run_id = transcript_domain::RunId::from_bytes([1; 16]);
//! tap.drain("the live view").await?;
//! let tree = load_run_tree(storage, run_id)?;
//! let report = verify_run(storage, run_id);
//! # let _ = (tree, report);
//! # Ok(()) }
//! ```
//!
//! The domain's ports are re-exported here ([`Recorder`], [`RecorderFactory`],
//! [`Subscription`], [`RunIdGenerator`]): `recorder.subscribe(..)`,
//! `recorder.close()`, `subscription.next()` and
//! `RandomRunIds.next_run_id()` need `use transcript_infra::{..}` only.
//!
//! This crate implements the `transcript_domain::Recorder` port
//! ([`JsonlRecorder`], created per run by [`JsonlRecorderFactory`]), reads
//! transcripts back ([`TranscriptReader`], [`verify_file`], [`verify_run`],
//! [`load_run_tree`]), and provides the production [`SystemClock`] and
//! [`RandomRunIds`]. It depends on `transcript-domain` only; everything
//! about the wire format (field order, vocabularies, decoding) lives there.
//!
//! ```no_run
//! # async fn demo() -> Result<(), transcript_domain::RecordError> {
//! use transcript_domain::{EventDraft, Payload, StepPayload};
//! use transcript_infra::{Durability, JsonlRecorder, RandomRunIds, Recorder, RunIdGenerator};
//!
//! let run = RandomRunIds.next_run_id();
//! let recorder = JsonlRecorder::builder("storage/transcripts", run)
//!     .durability(Durability::Always)
//!     .open()?;
//! let seq = recorder
//!     .record(EventDraft::run_level(Payload::RunStarted(StepPayload::new("deploy", "workflow"))))
//!     .await?;
//! assert_eq!(seq, 1);
//! recorder.close().await?;
//! # Ok(()) }
//! ```
//!
//! # File properties
//!
//! * One file per run: `<storage>/<run_id>.jsonl`; a `call_workflow` child
//!   run gets its own file next to its parent's, with its own seq series
//!   (decision 7). [`RunId`](transcript_domain::RunId) only admits a
//!   hyphenated UUID, so no path separator, `..` or NUL can reach a file name.
//! * UTF-8, one compact JSON object per line, `\n` line endings, fields in
//!   the wire contract's order; lines are produced by
//!   [`PreEncoded`](transcript_domain::PreEncoded) and are byte-identical to
//!   `ExchangeEvent::encode_line`.
//! * `seq` starts at 1 and increases by exactly 1 per line in file order: it
//!   is assigned together with the timestamp inside the writer's critical
//!   section (decision 15), so lines never land out of order and timestamps
//!   never go backwards in file order (the writer keeps the later of the
//!   clock and the previous timestamp). A record that was not written
//!   consumes no seq.
//! * Storage directories are created with mode 0o700; the file is opened
//!   `O_APPEND | O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW` and forced to
//!   0o600 with `fchmod`, whatever the umask.
//!
//! # Writing: a writer thread with group commit
//!
//! Every recorder owns one writer thread; async tasks never run file I/O:
//! the writer thread also opens the run (directory, file, lock, mode,
//! resume scan, directory sync) for [`JsonlRecorderBuilder::open_async`]
//! and the factory's `create`, and a replaying subscription reads the file
//! on Tokio's blocking pool. `record` masks, validates ([`EventDraft::validate`](transcript_domain::EventDraft::validate))
//! and encodes the draft on the caller's task, refuses a line that could
//! exceed [`MAX_LINE_BYTES`](transcript_domain::MAX_LINE_BYTES) (the cap the
//! reader enforces too, so the writer never writes a line its reader
//! refuses), queues it with a one-shot acknowledgement and awaits that: the
//! task is suspended, not blocked, however slow the disk is, so even a
//! current-thread runtime keeps running its other tasks. An invalid draft
//! fails with `RecordError::Invalid`, an oversized one with
//! `RecordError::TooLarge`, before it gets a seq. Every
//! `RecordError::Storage` carries the `io::Error` behind it as its source,
//! so its message ends with the OS cause (`write failed: No space left on
//! device (os error 28)`).
//!
//! The queue is bounded ([`JsonlRecorderBuilder::max_queued_bytes`],
//! default [`DEFAULT_MAX_QUEUED_BYTES`] of encoded lines queued or being
//! written). Backpressure rule: a `record` whose line does not fit waits,
//! suspended, in arrival order, until the writer thread has written
//! enough; a line longer than the bound waits for an empty queue; a record
//! whose future is dropped while it waits was never queued (no line, no
//! seq), so callers that time out during a disk stall cannot grow it.
//!
//! The thread takes everything queued as one batch (group commit): one
//! clock read, seqs and that timestamp assigned in file order, one
//! `write(2)`, one `fdatasync` under [`Durability::Always`], then the
//! broadcast, then the acknowledgements. Concurrent producers therefore
//! share writes and syncs without any coordination of their own: whatever
//! arrives while a batch is written or synced is the next batch (under
//! `Always` a batch briefly waits for the producers the previous one
//! acknowledged, so they keep sharing one sync).
//! [`JsonlRecorder::write_stats`] shows the batching. The design, with its
//! close and drop protocol, is documented once, in `src/recorder/mod.rs`.
//! [`JsonlRecorder::record`] is also an inherent method, so callers holding
//! the concrete type skip the trait's boxed future.
//!
//! Cancellation: a record whose future was polled once and found room in
//! the queue is queued and is written even if its caller drops the
//! future. `close` writes what was queued before it, syncs, ends the
//! subscriptions and releases the file and lock before it returns; it
//! awaits the writer thread instead of blocking. Dropping the last handle
//! without `close` never waits (the dropping thread may be an async worker,
//! the writer may be inside a sync): the writer thread writes what was
//! queued, releases the file without a sync (as dropping a `File` does) and
//! ends on its own; an open of the same run in this process waits for that
//! release instead of failing as locked. Only `close` tells that the file
//! is released (and lets a queued but unacknowledged record finish before
//! the process exits).
//!
//! A panic on the writer thread (a user `Clock`, a bug) is caught: every
//! record in flight, every later `record`, `subscribe` and `close` fails
//! with `RecordError::Storage` "the writer thread panicked; events in
//! flight may or may not be on disk: `<panic message>`", and subscriptions
//! end after what they were given.
//!
//! # Writing whole runs: the bulk writer
//!
//! An import produces a run at once, with no watcher and no concurrent producer. For it,
//! [`JsonlRecorderFactory::open_bulk`] / [`JsonlRecorderFactory::resume_bulk`] give a
//! [`BulkWriter`]: the same opening (hardened open, lock, mode, resume scan), masking,
//! validation, encoding, seqs and timestamps as the recorder, so the file is byte-identical
//! to the recorder's for the same drafts and clock, but written from the calling thread
//! through one buffer, without a writer thread or an acknowledgement per event.
//! [`BulkWriter::finish`] leaves an [`Unsynced`] file; a [`DurableBatch`] syncs many of them
//! on a few threads (concurrent `fdatasync`s share journal commits) and then each directory
//! that gained a name. A bulk file dropped before its sync succeeded is cut back to what it
//! held (removed when it was new). [`replace_file_durably`] replaces a small file (an index)
//! whole and durably.
//!
//! # Durability
//!
//! `record` returns only after the whole line was handed to the kernel, so
//! under every policy **every acknowledged event survives a process kill**
//! (`SIGKILL`, panic, OOM kill). What survives a power loss or kernel crash
//! depends on the policy:
//!
//! | policy | acknowledged after | survives power loss |
//! |---|---|---|
//! | [`Durability::None`] | `write(2)` | what the kernel wrote back (usually up to ~30 s old) |
//! | [`Durability::Interval`]`(d)` | `write(2)`; the writer thread syncs data once it is `d` old | events acknowledged more than about `d` before the loss |
//! | [`Durability::Always`] | `write(2)` + `fdatasync` | every acknowledged event |
//!
//! `close` always syncs. For a new file under `Interval` or `Always` the
//! directory is synced once too, so the file name survives a power loss.
//! A failed background sync under `Interval` is never only logged: the whole
//! next batch (every record the writer thread takes with its next write) fails
//! with a storage error naming it (nothing of that batch is written), `close`
//! reports it if no record came, and
//! [`WriteStats::sync_failures`] counts it; after an I/O error Linux may
//! report later syncs as successful although the data is gone.
//!
//! # Failure and resume
//!
//! * A failed or short write (disk full, I/O error) returns
//!   [`RecordError::Storage`](transcript_domain::RecordError) to the records
//!   of that batch that are not whole on disk; whole lines written before the
//!   failure are acknowledged. The file is cut back to the last acknowledged
//!   offset before anything else is appended (if the cut itself fails, the
//!   next batch retries it first and fails until it succeeds), seq stays
//!   gapless and the recorder stays usable. A failed `fdatasync` under
//!   `Always` un-writes the whole batch the same way: nothing unsynced is
//!   acknowledged.
//! * [`JsonlRecorderBuilder::open`] (and the factory's `create`) starts a
//!   new run and refuses a run id whose file already holds anything
//!   (`RecordError::Storage`, "run already exists (resume it explicitly)"),
//!   leaving the file untouched: reusing a finished run's id must not
//!   append a second run to it. Continuing a run is explicit:
//!   [`JsonlRecorderBuilder::resume`] / [`JsonlRecorderFactory::resume`].
//! * Resuming an existing file continues at the highest seq + 1 (also for
//!   foreign files whose lines are out of order). A seq is never handed out
//!   twice: a line that is not a readable event (oversized, damaged, from a
//!   newer writer) but starts with our `{"seq":N,` prefix still counts with
//!   `N` ([`ResumeWarning::SeqFromUnreadableLine`]), and a file whose
//!   highest seq is `u64::MAX` is refused with an error naming the line. Bytes after the last
//!   newline were never acknowledged (decision 13): they are appended to
//!   `<run_id>.jsonl.torn` (0o600, never lost), the transcript is truncated
//!   to its last newline, and a [`ResumeWarning::TornTail`] is returned in
//!   [`JsonlRecorder::resume_info`] and logged. Malformed lines in the middle
//!   are left in place and reported. Acknowledged bytes are never rewritten.
//!
//! # Live fan-out
//!
//! * Write-then-broadcast: a subscriber receives an event only after it is on
//!   disk (after the sync under `Always`), in seq order, from the writer
//!   thread that performed the write. Subscribing registers at the seq the
//!   writer last published, so `subscribe(None)` receives exactly the events
//!   written after it.
//! * Each subscription has a bounded buffer (default
//!   [`DEFAULT_SUBSCRIBER_BUFFER`] = 256, see
//!   [`JsonlRecorderBuilder::subscriber_buffer`]). When it is full the newest
//!   event is dropped *for that subscriber only*; the disk write never waits
//!   for a subscriber. Drops are visible: `Subscription::dropped`,
//!   [`JsonlRecorder::fanout_stats`] (subscriber count, drops per subscriber
//!   and in total), and a `tracing` warning at most once per second per
//!   dropping subscriber.
//! * Wake-ups are coalesced: a subscriber parked waiting for events is woken
//!   when its buffer is a quarter full, otherwise by a per-recorder linger
//!   thread about 1 ms after the first undelivered event. This keeps the
//!   writer's cost per subscriber to a buffer push instead of a cross-thread
//!   wake-up per event; live delivery latency is at most about 1 ms.
//! * Replay then live: `subscribe(Some(seq))` first reads the stored events
//!   from `seq` out of the file (of this and earlier sessions), then continues
//!   with live events, with no gap and no duplicate at the seam. The file is
//!   opened and read on Tokio's blocking pool (inline only when polled
//!   outside a Tokio runtime), never under the lock recording takes; a file
//!   it cannot open or read shows as dropped events. A replaying
//!   subscriber never drops for lack of room: when it falls behind, it reads
//!   the file again (only the acknowledged part, which is never rewritten).
//!   A stored line it cannot rebuild as an event (an unknown type from a
//!   newer writer, a damaged or oversized line) or cannot read is counted
//!   in its `dropped()`: never a silent gap.
//! * What a subscriber receives re-encodes (`ExchangeEvent::to_line`) to
//!   exactly the bytes of the stored line: the live stream and the file are
//!   the same stream (masking, if configured, happens before both).
//! * Closing a subscription and closing the recorder are idempotent. Closing
//!   the recorder ends every subscription after its buffered events; `record`
//!   and `subscribe` after close return `RecordError::Closed`.
//!
//! # Reading
//!
//! [`TranscriptReader`] streams any `BufRead` in constant memory (bounded by
//! the per-line cap, default 16 MiB, plus a 64 KiB buffer). It yields each
//! event with its decode warnings, reader warnings (unterminated final line,
//! empty line), and malformed lines as errors carrying path, line number,
//! byte offset and cause, then continues. Lines over the cap are measured
//! and skipped without being buffered. [`verify_file`] / [`verify_run`] turn
//! this into a serializable report; [`load_run_tree`] rebuilds the step tree
//! of a run and its child runs, reading each child file once however often
//! it is linked. Both follow child links no deeper than the tree builder
//! (`transcript_domain::tree::MAX_DEPTH`).
//!
//! A transcript file describes exactly one run: `verify` reports a file
//! without any event (empty, or nothing but bad lines) and a file holding
//! two runs (a second `run.started`, events after `run.completed`) as
//! errors, and [`load_run_tree`] refuses a run without events
//! ([`LoadError::NoEvents`]) rather than make up a run id. Seq faults are
//! reported at their root: a single out-of-place line is one finding, not
//! one per later line. Unpaired `tool.call` / `tool.result` events (by
//! `call_id`) are warnings.
//!
//! # Threat model
//!
//! * **Content is verbatim.** Prompts, system prompts, tool inputs and
//!   outputs are recorded as given; nothing is masked unless an
//!   `EventMask` is installed with [`JsonlRecorderBuilder::mask`]. Treat
//!   transcripts as secrets.
//! * **Permissions.** Files 0o600 and directories 0o700 regardless of umask;
//!   an existing file's mode is tightened to 0o600 on open.
//! * **Symlinks and special files.** A symlink at the transcript path or as
//!   the storage directory is refused (`O_NOFOLLOW`, `lstat`), as is anything
//!   that is not a regular file (a FIFO cannot block the open:
//!   `O_NONBLOCK`). Parent directories above the storage directory are
//!   trusted.
//! * **Locking.** An exclusive `flock` is held for the recorder's lifetime:
//!   a second recorder, in this or another process, fails with
//!   `RecordError::Locked` before writing or repairing anything. The lock is
//!   advisory: it keeps cooperating writers apart, not a hostile process of
//!   the same user. Beside it the recorder holds the run's lease, an open file
//!   description lock that readers test with [`writer_holds`] without taking
//!   it (running or abandoned); both are unlocked on the open file description
//!   before `close` returns, so the run is free then even while a child forked
//!   at that instant still holds a copy of the descriptor.
//! * **Readers** never trust the file: malformed input yields typed errors,
//!   never a panic, and memory stays bounded.
//!
//! # Versioning
//!
//! The on-disk format is the wire contract of `transcript-domain` (seed 000
//! plus the numbered wire decisions); this crate adds no fields. The reader
//! is tolerant (unknown event and block types are kept and reported as
//! warnings), the writer strict. This crate follows semver for its Rust API;
//! the file format changes only with the domain's schema version.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod bulk;
mod chan;
mod clock;
mod ends;
mod factory;
mod fanout;
mod file_tail;
mod follow_file;
mod fs;
mod iohook;
mod lease;
mod lines;
mod loader;
mod reader;
mod recorder;
mod release;
mod resume;
mod run_dir;
mod sink;
mod subscription;
mod tap;
mod verify;

pub use bulk::{BulkWriter, DurableBatch, Synced, Unsynced, replace_file_durably};
pub use clock::{RandomRunIds, SystemClock};
pub use ends::{first_event, last_event};
pub use factory::JsonlRecorderFactory;
pub use fanout::{DEFAULT_SUBSCRIBER_BUFFER, FanOutStats, SubscriberStats};
pub use follow_file::{follow_file, read_lines};
pub use lease::{WriterLease, writer_holds};
pub use loader::{LoadError, LoadedRun, load_run_tree};
pub use reader::{
    DEFAULT_MAX_LINE_BYTES, MalformedCause, MalformedLine, ReadError, ReadEvent, ReadItem,
    ReadWarning, ReadWarningKind, TranscriptReader,
};
pub use recorder::{
    DEFAULT_MAX_QUEUED_BYTES, Durability, JsonlRecorder, JsonlRecorderBuilder, WriteStats,
};
pub use resume::{ResumeInfo, ResumeWarning};
pub use run_dir::{DirRunStore, run_files};
pub use subscription::JsonlSubscription;
pub use tap::{StartTap, TapError, TapFactory, joined};
/// The domain's ports, re-exported so that everyday calls (`subscribe`, `close`, `next()` on a
/// subscription, `next_run_id`) need one import from this crate only.
pub use transcript_domain::{Recorder, RecorderFactory, RunIdGenerator, Subscription};
pub use verify::{
    FileReport, Finding, FindingCode, RunReport, verify_file, verify_reader, verify_run,
    verify_run_in,
};
