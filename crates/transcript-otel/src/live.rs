//! Live export: events in as they are recorded, spans out in batches, on a
//! thread of its own that the recorder never waits for.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use transcript_domain::{DecodedEvent, ExchangeEvent, Subscription};

use crate::config::DEFAULT_BATCH_SIZE;
use crate::config::OtlpHttpConfig;
use crate::mapping::{MapOptions, SpanMapper};
use crate::outcome::{ExportError, ExportReport, SpanSink};

/// Tuning of a [`LiveExporter`].
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Mapping options (content capture).
    pub options: MapOptions,
    /// Events buffered between the recorder and the export thread; when
    /// full, further events are dropped and counted, never waited for.
    pub queue_capacity: usize,
    /// Finished spans per request.
    pub batch_size: usize,
    /// A partial batch is sent after the queue has been idle this long.
    pub flush_interval: Duration,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            options: MapOptions::default(),
            queue_capacity: 65_536,
            batch_size: DEFAULT_BATCH_SIZE,
            flush_interval: Duration::from_secs(2),
        }
    }
}

enum Message {
    Event(Arc<ExchangeEvent>),
    Decoded(Box<DecodedEvent>),
    Finish,
}

/// A cloneable, non-blocking handle that feeds a [`LiveExporter`]; give one
/// to each subscription (the root run's and each child run's).
#[derive(Clone)]
pub struct LiveSender {
    tx: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
    counters: Arc<Counters>,
}

/// The live export's running counts, shared by the senders, the export thread and
/// [`LiveProgressHandle`]s.
#[derive(Debug, Default)]
struct Counters {
    /// Set by `finish` (under the write lock) before its message is queued: later pushes are
    /// refused and counted as dropped. A push checks it and sends under the read lock, so no
    /// push accepted before the flag can land in the queue after `Finish` (#30 item 11: one
    /// that did was neither mapped nor counted).
    finished: std::sync::RwLock<bool>,
    queued: AtomicU64,
    mapped: AtomicU64,
    /// Finished spans handed to delivery.
    handed: AtomicU64,
    /// Finished spans still held by the mapper, waiting for a full batch or the idle flush.
    buffered: AtomicU64,
    sent: AtomicU64,
    failed: AtomicU64,
}

/// What a live export has done so far (a snapshot; see [`LiveExporter::progress`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveProgress {
    /// Events accepted into the queue.
    pub events_queued: u64,
    /// Events the export thread has mapped to spans.
    pub events_mapped: u64,
    /// Spans the mapping has finished so far, delivered or not (spans still open are not
    /// counted: `finish` closes them as incomplete).
    pub spans_produced: u64,
    /// Spans the endpoint accepted.
    pub spans_sent: u64,
    /// Spans in requests that failed, or never sent after the exporter gave up.
    pub spans_failed: u64,
}

impl LiveProgress {
    /// Events queued but not mapped yet.
    pub fn events_pending(&self) -> u64 {
        self.events_queued.saturating_sub(self.events_mapped)
    }

    /// Spans produced but neither accepted nor failed yet (waiting for their batch, or in a
    /// request).
    pub fn spans_pending(&self) -> u64 {
        self.spans_produced
            .saturating_sub(self.spans_sent)
            .saturating_sub(self.spans_failed)
    }
}

/// Reads a live export's progress while it runs, and after [`LiveExporter::finish`] was
/// called or abandoned (a command that stops waiting can still say what was not sent).
#[derive(Debug, Clone)]
pub struct LiveProgressHandle(Arc<Counters>);

impl LiveProgressHandle {
    /// The counts now.
    pub fn snapshot(&self) -> LiveProgress {
        let c = &self.0;
        // Read the later stages first so a concurrent update never shows more sent than
        // produced.
        let spans_sent = c.sent.load(Ordering::Acquire);
        let spans_failed = c.failed.load(Ordering::Acquire);
        let spans_produced = c.handed.load(Ordering::Acquire) + c.buffered.load(Ordering::Acquire);
        let events_mapped = c.mapped.load(Ordering::Acquire);
        let events_queued = c.queued.load(Ordering::Acquire);
        LiveProgress {
            events_queued,
            events_mapped,
            spans_produced,
            spans_sent,
            spans_failed,
        }
    }
}

impl std::fmt::Debug for LiveSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSender")
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish()
    }
}

impl LiveSender {
    /// Queues an event without blocking. Returns `false` (and counts the
    /// event as dropped) when the queue is full or the exporter finished.
    pub fn push(&self, event: Arc<ExchangeEvent>) -> bool {
        self.offer(Message::Event(event))
    }

    /// Queues a decoded event (e.g. replayed from a file) without blocking.
    pub fn push_decoded(&self, event: DecodedEvent) -> bool {
        self.offer(Message::Decoded(Box::new(event)))
    }

    /// Counts events lost upstream (a lagging subscription's
    /// [`Subscription::dropped`]).
    pub fn note_dropped(&self, events: u64) {
        self.dropped.fetch_add(events, Ordering::Relaxed);
    }

    fn offer(&self, message: Message) -> bool {
        // A poisoned lock only means a pusher panicked while holding it: the flag is still
        // right.
        let finished = self
            .counters
            .finished
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *finished {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // Counted before the send so the export thread never maps more than was queued.
        self.counters.queued.fetch_add(1, Ordering::AcqRel);
        match self.tx.try_send(message) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.queued.fetch_sub(1, Ordering::AcqRel);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }
}

/// Forwards every event of `subscription` to `sender` until the
/// subscription ends (the recorder closed), then records its lag. Returns
/// the number of events forwarded. Runtime-agnostic: spawn it on the
/// runtime that drives the recorder.
pub async fn forward(mut subscription: Box<dyn Subscription>, sender: LiveSender) -> u64 {
    let mut forwarded = 0;
    while let Some(event) = subscription.next().await {
        sender.push(event);
        forwarded += 1;
    }
    sender.note_dropped(subscription.dropped());
    forwarded
}

/// Maps events to spans and exports them while a run is recorded.
///
/// Guarantees: [`LiveSender::push`] never blocks and never fails the run
/// (a full queue drops and counts the event); mapping and export happen on
/// a dedicated thread, where the OTLP exporter and its blocking HTTP client
/// are created, used and dropped (never inside a tokio runtime); export
/// failures are counted in the [`ExportReport`] returned by
/// [`LiveExporter::finish`], which also closes whatever the run left open
/// as "incomplete" and sends it.
#[derive(Debug)]
pub struct LiveExporter {
    sender: LiveSender,
    worker: JoinHandle<ExportReport>,
}

impl LiveExporter {
    /// Starts exporting to an OTLP endpoint (HTTP or gRPC, by `http.protocol`) (batch size from
    /// `config`; `http.batch_size` applies to [`crate::export_otlp_http`]
    /// only). Fails only on an endpoint
    /// this build cannot use or if the thread cannot start; an unreachable
    /// endpoint shows up in the final report.
    pub fn start(http: OtlpHttpConfig, config: LiveConfig) -> Result<Self, ExportError> {
        http.check()?;
        Self::start_with_sink(move || crate::grpc::sink_for(&http), config)
    }

    /// Starts exporting to the sink built by `make_sink`, which runs on the
    /// export thread (so a sink that must not live in an async runtime is
    /// safe). A sink that fails to build is reported, not returned.
    pub fn start_with_sink<F>(make_sink: F, config: LiveConfig) -> Result<Self, ExportError>
    where
        F: FnOnce() -> Result<Box<dyn SpanSink>, ExportError> + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(config.queue_capacity.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let counters = Arc::new(Counters::default());
        let (dropped_w, counters_w) = (dropped.clone(), counters.clone());
        let worker = thread::Builder::new()
            .name("transcript-otlp-live".into())
            .spawn(move || run_worker(rx, make_sink, config, dropped_w, &counters_w))
            .map_err(|e| ExportError::Thread(e.to_string()))?;
        Ok(Self {
            sender: LiveSender {
                tx,
                dropped,
                counters,
            },
            worker,
        })
    }

    /// A handle on this export's running counts, usable after `finish` was called from
    /// another thread (to report what was not sent when a command stops waiting).
    pub fn progress(&self) -> LiveProgressHandle {
        LiveProgressHandle(self.sender.counters.clone())
    }

    /// A handle for feeding events (cheap to clone).
    pub fn sender(&self) -> LiveSender {
        self.sender.clone()
    }

    /// Queues an event without blocking (see [`LiveSender::push`]).
    pub fn push(&self, event: Arc<ExchangeEvent>) -> bool {
        self.sender.push(event)
    }

    /// Stops accepting events, maps what is queued, closes open spans as
    /// incomplete, sends the rest and returns the report. Waits for the
    /// export thread (at most the configured request timeouts).
    pub fn finish(self) -> ExportReport {
        // Blocking here is fine: the run is over. Events pushed through
        // other senders after this point are refused and counted as dropped
        // (those that raced past the flag are drained and counted by the worker).
        // Taking the write lock waits for every push in progress: each one either sent its
        // event before `Finish` below, or will see the flag and count itself as dropped.
        *self
            .sender
            .counters
            .finished
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        let _ = self.sender.tx.send(Message::Finish);
        let dropped = self.sender.dropped.clone();
        drop(self.sender);
        let mut report = match self.worker.join() {
            Ok(report) => report,
            Err(_) => ExportReport {
                failures: 1,
                last_error: Some("the live export thread panicked".into()),
                ..ExportReport::default()
            },
        };
        report.events_dropped = dropped.load(Ordering::Relaxed);
        report
    }
}

fn run_worker<F>(
    rx: Receiver<Message>,
    make_sink: F,
    config: LiveConfig,
    dropped: Arc<AtomicU64>,
    counters: &Counters,
) -> ExportReport
where
    F: FnOnce() -> Result<Box<dyn SpanSink>, ExportError>,
{
    let mut report = ExportReport::default();
    let mut delivery = open_delivery(make_sink, &mut report);
    let mut mapper = SpanMapper::new(config.options);
    let batch_size = config.batch_size.max(1);
    loop {
        match rx.recv_timeout(config.flush_interval) {
            Ok(Message::Event(event)) => {
                let event = DecodedEvent::from(ExchangeEvent::clone(&event));
                map_one(&mut mapper, &event, &mut report, counters);
            }
            Ok(Message::Decoded(event)) => map_one(&mut mapper, &event, &mut report, counters),
            Ok(Message::Finish) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                if mapper.ready() > 0 {
                    deliver(
                        &mut delivery,
                        mapper.take_spans(),
                        batch_size,
                        &mut report,
                        counters,
                    );
                }
                continue;
            }
        }
        if mapper.ready() >= batch_size {
            deliver(
                &mut delivery,
                mapper.take_spans(),
                batch_size,
                &mut report,
                counters,
            );
        }
    }
    drop_late_messages(&rx, &dropped, counters);
    let trace = mapper.finish();
    deliver(
        &mut delivery,
        trace.spans,
        batch_size,
        &mut report,
        counters,
    );
    report.problems = trace.problems;
    report.events_dropped = dropped.load(Ordering::Relaxed);
    // The sink (and its HTTP client) is dropped here, on this thread.
    drop(delivery);
    report
}

/// The worker's delivery state; a sink that cannot be built counts as one failure and leaves
/// nothing to send to.
fn open_delivery<F>(make_sink: F, report: &mut ExportReport) -> Delivery
where
    F: FnOnce() -> Result<Box<dyn SpanSink>, ExportError>,
{
    let sink = match make_sink() {
        Ok(sink) => Some(sink),
        Err(e) => {
            report.failures += 1;
            report.last_error = Some(e.to_string());
            None
        }
    };
    Delivery {
        sink,
        failure_streak: 0,
    }
}

/// Maps one received event and publishes the counters.
fn map_one(
    mapper: &mut SpanMapper,
    event: &DecodedEvent,
    report: &mut ExportReport,
    counters: &Counters,
) {
    report.events_received += 1;
    mapper.ingest(event);
    counters.mapped.fetch_add(1, Ordering::AcqRel);
    counters
        .buffered
        .store(mapper.ready() as u64, Ordering::Release);
}

/// Whatever raced past the finished flag is not exported: counted as dropped, not left
/// looking queued.
fn drop_late_messages(rx: &Receiver<Message>, dropped: &AtomicU64, counters: &Counters) {
    for message in rx.try_iter() {
        if !matches!(message, Message::Finish) {
            dropped.fetch_add(1, Ordering::Relaxed);
            counters.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Consecutive failed requests after which the live exporter, and an export of a stored run
/// ([`crate::export_otlp_http`]), stop sending (the rest of the spans are counted as
/// failed), so an endpoint that hangs costs at most this many timeouts.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// Where the worker sends, and whether it still tries.
struct Delivery {
    sink: Option<Box<dyn SpanSink>>,
    failure_streak: u32,
}

fn deliver(
    delivery: &mut Delivery,
    mut spans: Vec<opentelemetry_sdk::trace::SpanData>,
    batch_size: usize,
    report: &mut ExportReport,
    counters: &Counters,
) {
    // Handed over before the mapper's count drops, so a snapshot never loses them.
    counters
        .handed
        .fetch_add(spans.len() as u64, Ordering::AcqRel);
    counters.buffered.store(0, Ordering::Release);
    while !spans.is_empty() {
        let rest = spans.split_off(spans.len().min(batch_size));
        let batch = std::mem::replace(&mut spans, rest);
        let n = batch.len() as u64;
        let Some(sink) = delivery.sink.as_mut() else {
            // Never built, or given up on: count, do not send.
            report.spans_failed += n;
            counters.failed.fetch_add(n, Ordering::AcqRel);
            continue;
        };
        report.requests += 1;
        match sink.export(batch) {
            Ok(delivered) => {
                // Spans the receiver rejected are failed, never retried; the endpoint works.
                let rejected = delivered.rejected_spans.min(n);
                report.spans_sent += n - rejected;
                report.spans_failed += rejected;
                counters.sent.fetch_add(n - rejected, Ordering::AcqRel);
                counters.failed.fetch_add(rejected, Ordering::AcqRel);
                if let Some(why) = delivered.rejection {
                    report.last_error = Some(why);
                }
                delivery.failure_streak = 0;
            }
            Err(error) => {
                report.failures += 1;
                report.spans_failed += n;
                counters.failed.fetch_add(n, Ordering::AcqRel);
                report.last_error = Some(error);
                delivery.failure_streak += 1;
                if delivery.failure_streak >= MAX_CONSECUTIVE_FAILURES {
                    report.gave_up = true;
                    delivery.sink = None;
                    report.last_error = report.last_error.take().map(|e| {
                        format!(
                            "{e} (gave up after {MAX_CONSECUTIVE_FAILURES} failed requests in a row)"
                        )
                    });
                }
            }
        }
    }
}
