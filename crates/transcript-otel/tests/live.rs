//! Live exporter guarantees with in-memory sinks, `forward`, and OTLP/JSON output.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::*;
use transcript_domain::{ExchangeEvent, Subscription};
use transcript_otel::{
    Delivered, ExportError, LiveConfig, LiveExporter, MapOptions, SpanData, SpanSink, forward, ids,
    map_run, write_otlp_json,
};

/// Records every batch it is given.
struct Memory(Arc<Mutex<Vec<Vec<SpanData>>>>);

impl SpanSink for Memory {
    fn export(&mut self, batch: Vec<SpanData>) -> Result<Delivered, String> {
        self.0.lock().unwrap().push(batch);
        Ok(Delivered::all())
    }
}

/// Fails every other batch (every batch with `Flaky(0, true)`).
struct Flaky(u32, bool);

impl SpanSink for Flaky {
    fn export(&mut self, _batch: Vec<SpanData>) -> Result<Delivered, String> {
        self.0 += 1;
        if self.1 || self.0 % 2 == 1 {
            Err(format!("refused batch {}", self.0))
        } else {
            Ok(Delivered::all())
        }
    }
}

fn all_events() -> Vec<ExchangeEvent> {
    let (root, child) = demo();
    let mut events = child.events.clone();
    events.extend(root.events.clone());
    events
}

#[test]
fn live_spans_equal_offline_spans_batched() {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let sink = Memory(batches.clone());
    let live = LiveExporter::start_with_sink(
        move || Ok(Box::new(sink) as Box<dyn SpanSink>),
        LiveConfig {
            batch_size: 4,
            options: MapOptions::with_content(true),
            ..LiveConfig::default()
        },
    )
    .unwrap();
    for e in all_events() {
        assert!(live.push(Arc::new(e)));
    }
    let report = live.finish();
    assert_eq!(report.events_received, 23);
    assert_eq!(report.spans_sent, 12);
    assert!(report.is_complete());
    let batches = batches.lock().unwrap();
    assert!(batches.iter().all(|b| b.len() <= 4));
    let mut live_spans: Vec<SpanData> = batches.iter().flatten().cloned().collect();
    let (root, child) = demo();
    let mut offline = map_run(
        &root.decoded(),
        &mut lookup(&child),
        MapOptions::with_content(true),
    )
    .spans;
    let key = |s: &SpanData| s.span_context.span_id().to_bytes();
    live_spans.sort_by_key(key);
    offline.sort_by_key(key);
    assert_eq!(live_spans, offline);
}

#[test]
fn a_full_queue_drops_and_counts_instead_of_blocking() {
    // The sink is not built until released, so the worker reads nothing and
    // the queue fills deterministically.
    let (release, gate) = mpsc::channel::<()>();
    let batches = Arc::new(Mutex::new(Vec::new()));
    let sink = Memory(batches.clone());
    let live = LiveExporter::start_with_sink(
        move || {
            gate.recv().unwrap();
            Ok(Box::new(sink) as Box<dyn SpanSink>)
        },
        LiveConfig {
            queue_capacity: 4,
            ..LiveConfig::default()
        },
    )
    .unwrap();
    let sender = live.sender();
    let accepted: Vec<bool> = all_events()
        .into_iter()
        .take(10)
        .map(|e| sender.push(Arc::new(e)))
        .collect();
    assert_eq!(accepted.iter().filter(|a| **a).count(), 4);
    assert!(accepted[..4].iter().all(|a| *a));
    sender.note_dropped(2);
    release.send(()).unwrap();
    let report = live.finish();
    assert_eq!(report.events_received, 4);
    assert_eq!(report.events_dropped, 6 + 2);
    assert!(!report.is_complete());
    // Pushing after finish is refused and counted, never blocks or panics.
    assert!(!sender.push(Arc::new(all_events().remove(0))));
}

#[test]
fn sink_failures_are_counted_not_raised() {
    let live = LiveExporter::start_with_sink(
        || Ok(Box::new(Flaky(0, false)) as Box<dyn SpanSink>),
        LiveConfig {
            batch_size: 6,
            ..LiveConfig::default()
        },
    )
    .unwrap();
    for e in all_events() {
        live.push(Arc::new(e));
    }
    let report = live.finish();
    assert_eq!(report.requests, 2);
    assert_eq!(report.failures, 1);
    assert_eq!(report.spans_failed, 6);
    assert_eq!(report.spans_sent, 6);
    assert_eq!(report.last_error.as_deref(), Some("refused batch 1"));

    let live = LiveExporter::start_with_sink(
        || Err(ExportError::Build("no route".into())),
        LiveConfig::default(),
    )
    .unwrap();
    for e in all_events() {
        live.push(Arc::new(e));
    }
    let report = live.finish();
    assert_eq!(report.failures, 1);
    assert_eq!(report.spans_failed, 12);
    assert!(report.last_error.unwrap().contains("no route"));
}

#[test]
fn a_run_still_open_at_finish_is_sent_as_incomplete() {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let sink = Memory(batches.clone());
    let live = LiveExporter::start_with_sink(
        move || Ok(Box::new(sink) as Box<dyn SpanSink>),
        LiveConfig::default(),
    )
    .unwrap();
    let (root, _) = demo();
    for e in root.events.iter().take(3) {
        live.push(Arc::new(e.clone()));
    }
    let report = live.finish();
    assert_eq!(report.spans_sent, 2);
    let spans: Vec<SpanData> = batches.lock().unwrap().concat();
    assert!(
        spans
            .iter()
            .all(|s| s.status == opentelemetry::trace::Status::error("incomplete"))
    );
}

/// Replays a fixed list, then reports a lag.
struct Replay(std::vec::IntoIter<ExchangeEvent>);

#[async_trait]
impl Subscription for Replay {
    async fn next(&mut self) -> Option<Arc<ExchangeEvent>> {
        self.0.next().map(Arc::new)
    }
    fn close(&mut self) {}
    fn dropped(&self) -> u64 {
        1
    }
}

#[tokio::test(flavor = "current_thread")]
async fn forward_feeds_a_subscription_into_the_exporter() {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let sink = Memory(batches.clone());
    let live = LiveExporter::start_with_sink(
        move || Ok(Box::new(sink) as Box<dyn SpanSink>),
        LiveConfig::default(),
    )
    .unwrap();
    let (root, child) = demo();
    let n_root = forward(
        Box::new(Replay(root.events.clone().into_iter())),
        live.sender(),
    )
    .await;
    let n_child = forward(
        Box::new(Replay(child.events.clone().into_iter())),
        live.sender(),
    )
    .await;
    assert_eq!((n_root, n_child), (17, 6));
    let report = live.finish();
    assert_eq!(report.events_received, 23);
    assert_eq!(report.events_dropped, 2, "each subscription's lag");
    assert_eq!(report.spans_sent, 12);
}

#[test]
fn otlp_json_follows_the_json_protobuf_encoding() {
    let (root, child) = demo();
    let spans = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default()).spans;
    let mut out = Vec::new();
    write_otlp_json(spans, "svc", &mut out).unwrap();
    assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1, "one line");
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let rs = &json["resourceSpans"][0];
    assert_eq!(
        rs["resource"]["attributes"][0],
        serde_json::json!({"key": "service.name", "value": {"stringValue": "svc"}})
    );
    assert_eq!(rs["scopeSpans"][0]["scope"]["name"], "transcript-otel");
    let spans = rs["scopeSpans"][0]["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 12);
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let trace = hex(&ids::trace_id(ROOT).to_bytes());
    for span in spans {
        assert_eq!(span["traceId"], trace.as_str());
        assert_eq!(span["spanId"].as_str().unwrap().len(), 16);
        // int64 nanos are strings.
        assert!(
            span["startTimeUnixNano"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .is_ok()
        );
        assert!(span["endTimeUnixNano"].is_string());
    }
    let run = spans
        .iter()
        .find(|s| s["name"] == "invoke_workflow review")
        .unwrap();
    assert!(run.get("parentSpanId").is_none_or(|p| p == ""));
    let expected_start = (BASE_MS as u64 + 10) * 1_000_000;
    assert_eq!(run["startTimeUnixNano"], expected_start.to_string());
    assert_eq!(run["status"]["code"], 2);
    assert_eq!(run["status"]["message"], "step loop failed");
    let plan = spans
        .iter()
        .find(|s| s["name"] == "invoke_agent plan")
        .unwrap();
    let tokens = plan["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv["key"] == "transcript.usage.input_tokens")
        .unwrap();
    // 10 + 4: the agent span's sum is the transcript's count (cache reads apart).
    assert_eq!(tokens["value"], serde_json::json!({"intValue": "14"}));
    assert_eq!(
        plan["parentSpanId"],
        hex(&ids::run_span_id(ROOT).to_bytes()).as_str()
    );
}

/// Signals every batch it receives.
struct Notify(mpsc::Sender<usize>);

impl SpanSink for Notify {
    fn export(&mut self, batch: Vec<SpanData>) -> Result<Delivered, String> {
        let _ = self.0.send(batch.len());
        Ok(Delivered::all())
    }
}

#[test]
fn an_idle_queue_flushes_a_partial_batch_before_finish() {
    let (tx, batches) = mpsc::channel();
    let live = LiveExporter::start_with_sink(
        move || Ok(Box::new(Notify(tx)) as Box<dyn SpanSink>),
        LiveConfig {
            batch_size: 1_000,
            flush_interval: std::time::Duration::from_millis(1),
            ..LiveConfig::default()
        },
    )
    .unwrap();
    let (root, child) = demo();
    for e in root.events.iter().chain(&child.events) {
        live.push(Arc::new(e.clone()));
    }
    // Every span finished with the events above, so the idle flush sends
    // all of them while the exporter is still running.
    let mut sent = 0;
    while sent < 12 {
        sent += batches
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap();
    }
    let report = live.finish();
    assert_eq!(report.spans_sent, 12);
    assert!(batches.try_recv().is_err(), "nothing left for finish");
}

#[test]
fn the_live_exporter_gives_up_after_consecutive_failures() {
    let live = LiveExporter::start_with_sink(
        || Ok(Box::new(Flaky(0, true)) as Box<dyn SpanSink>),
        LiveConfig {
            batch_size: 1,
            ..LiveConfig::default()
        },
    )
    .unwrap();
    for e in all_events() {
        live.push(Arc::new(e));
    }
    let report = live.finish();
    let limit = u64::from(transcript_otel::MAX_CONSECUTIVE_FAILURES);
    assert_eq!(report.requests, limit);
    assert_eq!(report.failures, limit);
    assert_eq!(report.spans_failed, 12);
    assert!(report.gave_up);
    assert_eq!(
        report.last_error.as_deref(),
        Some("refused batch 3 (gave up after 3 failed requests in a row)")
    );
}

#[test]
fn decoded_events_replayed_from_a_file_feed_the_same_spans() {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let sink = Memory(batches.clone());
    let live = LiveExporter::start_with_sink(
        move || Ok(Box::new(sink) as Box<dyn SpanSink>),
        LiveConfig::default(),
    )
    .unwrap();
    let sender = live.sender();
    assert!(format!("{sender:?}").contains("dropped: 0"));
    let (root, child) = demo();
    for e in child.decoded().into_iter().chain(root.decoded()) {
        assert!(sender.push_decoded(e));
    }
    let report = live.finish();
    assert_eq!(report.events_received, 23);
    assert_eq!(report.spans_sent, 12);
    assert!(report.problems.is_empty());
}

/// Holds every export until released; says when the first one started.
struct Held {
    entered: Option<mpsc::Sender<()>>,
    gate: mpsc::Receiver<()>,
}

impl SpanSink for Held {
    fn export(&mut self, _batch: Vec<SpanData>) -> Result<Delivered, String> {
        if let Some(entered) = self.entered.take() {
            entered.send(()).unwrap();
            self.gate.recv().unwrap();
        }
        Ok(Delivered::all())
    }
}

#[test]
fn progress_says_what_is_still_unsent_while_a_request_hangs() {
    let (entered_tx, entered) = mpsc::channel();
    let (release, gate) = mpsc::channel();
    let live = LiveExporter::start_with_sink(
        move || {
            Ok(Box::new(Held {
                entered: Some(entered_tx),
                gate,
            }) as Box<dyn SpanSink>)
        },
        LiveConfig {
            batch_size: 4,
            ..LiveConfig::default()
        },
    )
    .unwrap();
    let progress = live.progress();
    for e in all_events() {
        assert!(live.push(Arc::new(e)));
    }
    // The first request is in flight and hangs: nothing sent, its spans pending.
    entered.recv().unwrap();
    let now = progress.snapshot();
    assert_eq!(now.events_queued, 23);
    assert_eq!((now.spans_sent, now.spans_failed), (0, 0));
    assert!(now.spans_pending() >= 4, "{now:?}");
    release.send(()).unwrap();
    let report = live.finish();
    let end = progress.snapshot();
    assert_eq!(
        (end.events_mapped, end.spans_produced, end.spans_sent),
        (23, 12, report.spans_sent)
    );
    assert_eq!((end.events_pending(), end.spans_pending()), (0, 0));
}

/// #30 item 11: an event a sender accepted (push returned true) is always mapped, even when the
/// push races `finish`; a refused one is counted as dropped. Real threads keep pushing while
/// `finish` runs; every accepted push must show up in `events_received`.
#[test]
fn an_event_accepted_while_finish_runs_is_mapped_never_lost() {
    for round in 0..20 {
        let live = LiveExporter::start_with_sink(
            || Ok(Box::new(Memory(Arc::new(Mutex::new(Vec::new())))) as Box<dyn SpanSink>),
            LiveConfig {
                queue_capacity: 1 << 20,
                ..LiveConfig::default()
            },
        )
        .unwrap();
        let event = Arc::new(all_events().remove(0));
        let start = Arc::new(std::sync::Barrier::new(5));
        let pushers: Vec<_> = (0..4)
            .map(|_| {
                let sender = live.sender();
                let event = event.clone();
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    let mut accepted = 0u64;
                    let mut refused = 0u64;
                    // Push until refused a while: finish has run by then.
                    while refused < 2000 {
                        if sender.push(event.clone()) {
                            accepted += 1;
                        } else {
                            refused += 1;
                        }
                    }
                    accepted
                })
            })
            .collect();
        start.wait();
        let report = live.finish();
        let accepted: u64 = pushers.into_iter().map(|p| p.join().unwrap()).sum();
        assert_eq!(
            report.events_received, accepted,
            "round {round}: {accepted} pushes were accepted, {} mapped",
            report.events_received
        );
    }
}
