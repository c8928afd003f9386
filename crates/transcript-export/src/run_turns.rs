//! One run as the many-runs bill reads it ([`RunTurns`]): who it is, whether it is a replay
//! or a trial of one, its step starts and calls (where a trial's fork passes through it), the
//! session file it was imported from, and its billed turns, each with its step.

use transcript_domain::fork::started_steps;
use transcript_domain::{DecodedEvent, EventKind, EventType, Usage};

use crate::model::ExportDocument;
use crate::{ExportOptions, billed_turns, build_document, each_step};

/// One billed turn of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTurn {
    /// Its message's timestamp (RFC 3339; its day and month are the first 10 and 7 bytes).
    pub timestamp: String,
    /// The model it is billed under.
    pub model: String,
    /// Its usage.
    pub usage: Usage,
    /// Its request (wire decision 17), if known.
    pub request_id: Option<String>,
    /// The provider that wrote it.
    pub provider: Option<String>,
    /// Its message's seq in the run.
    pub seq: u64,
    /// Its step execution `(path, iteration)`: a trial's step its recording served is not
    /// spend ([`crate::spend::Spend`]).
    pub step: (String, u64),
}

/// The session file an imported run says it was read from (its agent step's result:
/// `provider`, `source`, `project`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedFrom {
    /// The provider.
    pub provider: String,
    /// The session file's path.
    pub source: String,
    /// The directory the session ran in, as recorded.
    pub project: Option<String>,
}

/// What the groupings need of one run: who it is, whether it is a replay or a trial, and
/// its billed turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTurns {
    /// The run.
    pub run_id: String,
    /// Its calling run, for a child run.
    pub parent_run_id: Option<String>,
    /// Its workflow.
    pub workflow: Option<String>,
    /// When it started (RFC 3339).
    pub started_at: Option<String>,
    /// The run it replays.
    pub replay_of: Option<String>,
    /// For a trial, the step it was forked at.
    pub forked_at: Option<String>,
    /// Its step starts `(path, iteration)`, in order (transcript-domain's `started_steps`):
    /// where a fork passes through it.
    pub starts: Vec<(String, u64)>,
    /// Its `call_workflow` executions and the child run each called.
    pub calls: Vec<((String, u64), String)>,
    /// The session file it was imported from, when its step result says.
    pub imported: Option<ImportedFrom>,
    /// Its billed turns, in order.
    pub turns: Vec<RunTurn>,
}

impl RunTurns {
    /// The run of `events` (one run's own, no child run).
    pub fn of(events: &[DecodedEvent]) -> RunTurns {
        let doc = build_document(events, &mut |_| None, &ExportOptions::default());
        RunTurns::of_document(&doc, events)
    }

    /// The run of `doc`, built from `events` (one run's own) with no child run.
    pub fn of_document(doc: &ExportDocument, events: &[DecodedEvent]) -> RunTurns {
        let run = &doc.run;
        let started = events.first().and_then(DecodedEvent::step);
        let replay_of = started.and_then(|s| s.replay_of.clone());
        let forked_at = replay_of
            .as_ref()
            .and(started.and_then(|s| s.forked_at.clone()));
        let mut out = RunTurns {
            run_id: run.run_id.clone(),
            parent_run_id: run.parent_run_id.clone(),
            workflow: run.workflow.clone(),
            started_at: run.started_at.clone(),
            replay_of,
            forked_at,
            starts: started_steps(events),
            calls: calls(events),
            imported: imported_from(doc),
            ..RunTurns::default()
        };
        each_step(run, &mut |step| {
            for turn in billed_turns(step) {
                out.turns.push(RunTurn {
                    seq: turn.message.seq,
                    timestamp: turn.message.timestamp.clone(),
                    model: turn.model.to_owned(),
                    usage: turn.usage.clone(),
                    request_id: turn.message.request_id.clone(),
                    provider: turn.message.provider.clone(),
                    step: (step.path.clone(), step.iteration),
                });
            }
        });
        out
    }
}

/// The `call_workflow` executions of one run's `events` and the child run each called.
fn calls(events: &[DecodedEvent]) -> Vec<((String, u64), String)> {
    let mut out: Vec<((String, u64), String)> = Vec::new();
    for e in events {
        let call = matches!(
            e.kind,
            EventKind::Known(EventType::CallWorkflowStarted | EventType::CallWorkflowCompleted)
        );
        if let (true, Some(child)) = (call, e.child_run_id) {
            let entry = ((e.path.clone(), e.iteration), child.to_string());
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
    }
    out
}

/// The session file a run was imported from by a file import: its first step whose result
/// names a `source` (with `provider` and `project`).
pub fn imported_from(doc: &ExportDocument) -> Option<ImportedFrom> {
    doc.run.steps.iter().find_map(|step| {
        let result = step.result.as_ref()?;
        let text = |key: &str| result.get(key)?.as_str().map(str::to_owned);
        Some(ImportedFrom {
            provider: text("provider").unwrap_or_default(),
            source: text("source")?,
            project: text("project"),
        })
    })
}
