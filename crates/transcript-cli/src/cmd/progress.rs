//! Live progress of `transcript run` on stderr, fed by fan-out subscriptions to every run the
//! workflow opens (the root run and each child run of a `call_workflow` step).
//!
//! On a terminal: the event lines scroll above an indicatif status line that shows the elapsed
//! time, steps done / failed / running, and the step running most recently started, with its
//! iteration. Otherwise: plain event lines only (child runs' lines are marked with their short
//! run id). Recording never waits for this view: a subscription that falls behind drops and
//! counts (the transcript keeps everything).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;
use transcript_domain::{
    DecodedEvent, EventKind, EventType, ExchangeEvent, RecordError, Recorder, RecorderFactory,
    RunId, Subscription,
};
use transcript_infra::{TapError, TapFactory};

use crate::cmd::tail::summary;
use crate::style::{Style, one_line};

/// What the view receives: an event of some run, or the count a subscription dropped.
enum Feed {
    Event(Arc<ExchangeEvent>),
    Dropped(u64),
}

/// What watches the run: the forwarding taps (one per run) and the view's task that prints.
const FORWARDING: &str = "a live progress subscription";
const VIEW: &str = "the live progress view";

/// The progress view's tap on every run the factory opens, and the view's task, which
/// [`Self::finish`] ends and joins.
pub struct ProgressFactory {
    tap: TapFactory,
    sender: Arc<Mutex<Option<mpsc::Sender<Feed>>>>,
    view: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ProgressFactory {
    /// Wraps `inner`, with the view printing on stderr in `style`.
    pub fn new(inner: Arc<dyn RecorderFactory>, style: Style) -> Arc<Self> {
        Self::with_view(inner, move |rx| tokio::spawn(show(rx, style)))
    }

    /// Wraps `inner`; `spawn_view` starts the task that consumes every run's feed.
    fn with_view(
        inner: Arc<dyn RecorderFactory>,
        spawn_view: impl FnOnce(mpsc::Receiver<Feed>) -> tokio::task::JoinHandle<()>,
    ) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(4096);
        let sender = Arc::new(Mutex::new(Some(tx)));
        let taps = sender.clone();
        let tap = TapFactory::new(
            inner,
            Box::new(move |subscription| {
                let tx = taps.lock().ok().and_then(|s| s.clone())?;
                Some(tokio::spawn(forward(subscription, tx)))
            }),
        );
        let view = Mutex::new(Some(spawn_view(rx)));
        Arc::new(Self { tap, sender, view })
    }

    /// No more runs will open: waits for the subscriptions of the runs opened so far (they
    /// end when their recorders close), then for the view to print what they fed it. A
    /// forwarding task or a view that panicked (or was cancelled) is an error, each named;
    /// empty when both ended cleanly. The view is joined once: a second call finds it joined.
    pub async fn finish(&self) -> Vec<TapError> {
        drop(self.sender.lock().ok().and_then(|mut s| s.take()));
        let mut errors: Vec<TapError> =
            self.tap.drain(FORWARDING).await.err().into_iter().collect();
        let view = self.view.lock().ok().and_then(|mut v| v.take());
        if let Some(view) = view {
            errors.extend(transcript_infra::joined(VIEW, view.await).err());
        }
        errors
    }
}

#[async_trait]
impl RecorderFactory for ProgressFactory {
    async fn create(
        &self,
        run_id: RunId,
        parent_run_id: Option<RunId>,
    ) -> Result<Arc<dyn Recorder>, RecordError> {
        self.tap.create(run_id, parent_run_id).await
    }
}

async fn forward(mut sub: Box<dyn Subscription>, sender: mpsc::Sender<Feed>) {
    while let Some(event) = sub.next().await {
        if sender.send(Feed::Event(event)).await.is_err() {
            return;
        }
    }
    let dropped = sub.dropped();
    if dropped > 0 {
        let _ = sender.send(Feed::Dropped(dropped)).await;
    }
}

/// Counters behind the status line.
#[derive(Default)]
struct State {
    root: Option<RunId>,
    done: u64,
    failed: u64,
    /// Open step executions: (run, path, iteration) → start order.
    running: BTreeMap<(RunId, String, u64), u64>,
    started: u64,
}

impl State {
    fn apply(&mut self, e: &DecodedEvent) {
        if self.root.is_none() && e.parent_run_id.is_none() {
            self.root = Some(e.run_id);
        }
        let key = (e.run_id, e.path.clone(), e.iteration);
        match e.kind {
            EventKind::Known(EventType::StepStarted | EventType::CallWorkflowStarted) => {
                self.started += 1;
                self.running.insert(key, self.started);
            }
            EventKind::Known(EventType::StepCompleted | EventType::CallWorkflowCompleted) => {
                self.running.remove(&key);
                self.done += 1;
                if e.step().and_then(|p| p.error.as_ref()).is_some() {
                    self.failed += 1;
                }
            }
            _ => {}
        }
    }

    fn status(&self) -> String {
        let current = self
            .running
            .iter()
            .max_by_key(|(_, order)| **order)
            .map(|((_, path, iteration), _)| {
                if *iteration > 0 {
                    format!("{} #{iteration}", one_line(path))
                } else {
                    one_line(path)
                }
            })
            .unwrap_or_default();
        format!(
            "{} done{} · {} running · {current}",
            self.done,
            if self.failed > 0 {
                format!(" ({} failed)", self.failed)
            } else {
                String::new()
            },
            self.running.len()
        )
    }

    /// The event's line, marked with its run when it is not the root run's.
    fn line(&self, e: &DecodedEvent, style: &Style) -> String {
        let text = summary(e, style);
        match self.root {
            Some(root) if root != e.run_id => {
                let id = e.run_id.to_string();
                format!("{} {text}", style.dim(&format!("[{}]", &id[..8])))
            }
            _ => text,
        }
    }
}

fn interesting(e: &DecodedEvent) -> bool {
    matches!(
        e.kind,
        EventKind::Known(
            EventType::StepStarted
                | EventType::StepCompleted
                | EventType::CallWorkflowStarted
                | EventType::CallWorkflowCompleted
                | EventType::ToolCall
                | EventType::ToolResult
                | EventType::MessageAssistant
                | EventType::RunCompleted
        )
    )
}

async fn show(mut rx: mpsc::Receiver<Feed>, style: Style) {
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        if let Ok(s) = ProgressStyle::with_template("{spinner} {elapsed_precise} {wide_msg}") {
            bar.set_style(s);
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let mut state = State::default();
    let mut dropped = 0;
    while let Some(feed) = rx.recv().await {
        let event = match feed {
            Feed::Event(event) => event,
            Feed::Dropped(n) => {
                dropped += n;
                continue;
            }
        };
        let decoded: DecodedEvent = (*event).clone().into();
        state.apply(&decoded);
        match &bar {
            Some(bar) => {
                if interesting(&decoded) {
                    bar.println(state.line(&decoded, &style));
                }
                bar.set_message(state.status());
            }
            None => {
                if interesting(&decoded) {
                    crate::diag!("{}", state.line(&decoded, &Style::plain()));
                }
            }
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if dropped > 0 {
        crate::diag!(
            "transcript: progress display skipped {dropped} events (the transcript has all of them)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript_domain::{EventDraft, Payload, StepPayload, Timestamp};

    fn event(run: RunId, seq: u64, draft: EventDraft) -> DecodedEvent {
        draft
            .into_event(seq, run, None, Timestamp::UNIX_EPOCH)
            .into()
    }

    fn storage() -> (tempfile::TempDir, Arc<dyn RecorderFactory>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let factory = transcript_infra::JsonlRecorderFactory::new(dir.path());
        (dir, Arc::new(factory))
    }

    /// Opens a run through `factory`, records one step start and closes it.
    async fn one_run(factory: &ProgressFactory) {
        let run = RunId::from_bytes([2; 16]);
        let recorder = factory
            .create(run, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let draft = EventDraft::new(
            "s",
            0,
            Payload::StepStarted(StepPayload::new("s", "command")),
        );
        recorder
            .record(draft)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        recorder.close().await.unwrap_or_else(|e| panic!("{e}"));
    }

    #[tokio::test]
    async fn a_view_that_panics_is_a_reported_error_naming_the_view_and_the_panic() {
        let (_dir, inner) = storage();
        let factory = ProgressFactory::with_view(inner, |mut rx| {
            tokio::spawn(async move {
                if rx.recv().await.is_some() {
                    panic!("the view broke on its first event");
                }
            })
        });
        one_run(&factory).await;
        let errors = factory.finish().await;
        assert_eq!(errors.len(), 1, "{errors:?}");
        match &errors[0] {
            TapError::Panicked { what, message, .. } => {
                assert_eq!(what, VIEW);
                assert_eq!(message, "the view broke on its first event");
            }
            other => panic!("expected a panic, got {other:?}"),
        }
        let text = errors[0].to_string();
        assert!(text.contains("the live progress view panicked"), "{text}");
        // Joined once: a second finish has nothing left to report.
        assert!(factory.finish().await.is_empty());
    }

    #[tokio::test]
    async fn a_view_that_ends_cleanly_reports_nothing() {
        let (_dir, inner) = storage();
        let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
        let factory = ProgressFactory::with_view(inner, |mut rx| {
            tokio::spawn(async move {
                let mut events = 0;
                while let Some(feed) = rx.recv().await {
                    events += u64::from(matches!(feed, Feed::Event(_)));
                }
                let _ = seen_tx.send(events);
            })
        });
        one_run(&factory).await;
        assert!(factory.finish().await.is_empty());
        // The view saw the run's event before finish returned (it was joined).
        assert_eq!(seen_rx.await.ok(), Some(1));
    }

    #[test]
    fn status_counts_nested_steps_and_names_the_latest_with_its_iteration() {
        let run = RunId::from_bytes([1; 16]);
        let mut state = State::default();
        let start = |p: &str, i| {
            EventDraft::new(p, i, Payload::StepStarted(StepPayload::new(p, "command")))
        };
        let end = |p: &str, i, err: Option<&str>| {
            let mut s = StepPayload::new(p, "command");
            if let Some(e) = err {
                s = s.with_error(e);
            }
            EventDraft::new(p, i, Payload::StepCompleted(s))
        };
        state.apply(&event(run, 1, start("loop", 0)));
        state.apply(&event(run, 2, start("loop.tick", 2)));
        assert_eq!(state.status(), "0 done · 2 running · loop.tick #2");
        state.apply(&event(run, 3, end("loop.tick", 2, Some("boom"))));
        assert_eq!(state.status(), "1 done (1 failed) · 1 running · loop");
    }
}
