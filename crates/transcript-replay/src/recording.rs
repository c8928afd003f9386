//! A recorded run as a replay needs it: its id, its [`Tape`], and what its `run.started`
//! says about how it ran (wire decision 16): the workflow file (path and sha256) and the
//! inputs, secret ones masked.

use serde_json::{Map, Value};
use sha2::Digest as _;
use transcript_domain::{
    DecodedEvent, DecodedPayload, EventKind, EventType, RunId, WorkflowSource,
};

use crate::tape::{Tape, TapeError};

/// What a masked input is written as (decision 16).
pub const MASKED: &str = "***";

/// A recorded run, read for a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// The run's id.
    pub run_id: RunId,
    /// Its agent executions, child runs included.
    pub tape: Tape,
    /// The workflow file it ran, when its `run.started` names it.
    pub workflow: Option<WorkflowSource>,
    /// Its inputs as recorded (secret ones [`MASKED`]); empty when not recorded.
    pub inputs: Map<String, Value>,
}

/// Why a recording cannot be replayed as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// No event at all.
    #[error("the run has no events")]
    Empty,
    /// The tape could not be read.
    #[error(transparent)]
    Tape(#[from] TapeError),
    /// A secret input was recorded masked and not given again.
    #[error("input '{0}' was recorded masked (secret): give it again (--input {0}=VALUE)")]
    MaskedInput(String),
}

impl Recording {
    /// Reads the run of `events`; `lookup` gives a child run's events.
    pub fn read(
        events: &[DecodedEvent],
        lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    ) -> Result<Recording, RecordingError> {
        let first = events.first().ok_or(RecordingError::Empty)?;
        let started = events.iter().find_map(|e| match (&e.kind, &e.payload) {
            (EventKind::Known(EventType::RunStarted), DecodedPayload::Step(s)) => Some(s),
            _ => None,
        });
        let inputs = started
            .and_then(|s| s.inputs.as_ref())
            .and_then(|i| i.try_to_value().ok())
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .unwrap_or_default();
        Ok(Recording {
            run_id: first.run_id,
            tape: Tape::build(events, lookup)?,
            workflow: started.and_then(|s| s.workflow.clone()),
            inputs,
        })
    }

    /// The recorded inputs as `KEY=VALUE` texts (strings as they are, other values as JSON),
    /// each `given` one replacing the recorded one of its name; a masked input not given is
    /// [`RecordingError::MaskedInput`].
    pub fn inputs_with(
        &self,
        given: Vec<(String, String)>,
    ) -> Result<Vec<(String, String)>, RecordingError> {
        let mut all = Vec::new();
        for (name, value) in &self.inputs {
            if given.iter().any(|(k, _)| k == name) {
                continue;
            }
            let text = match value {
                Value::String(s) if s == MASKED => {
                    return Err(RecordingError::MaskedInput(name.clone()));
                }
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            all.push((name.clone(), text));
        }
        all.extend(given);
        Ok(all)
    }

    /// When the workflow file's `bytes` now are not the ones recorded: the recorded sha256
    /// and the current one.
    pub fn workflow_changed(&self, bytes: &[u8]) -> Option<(String, String)> {
        let recorded = self.workflow.as_ref()?;
        let now: String = sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        (now != recorded.sha256).then(|| (recorded.sha256.clone(), now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript_domain::decode_line;

    fn started(payload: Value) -> Vec<DecodedEvent> {
        let line = serde_json::json!({"seq": 1, "run_id": "00000000-0000-4000-8000-000000000001",
            "type": "run.started", "timestamp": "2026-01-01T00:00:00.000Z", "payload": payload});
        vec![decode_line(line.to_string().as_bytes()).unwrap().event]
    }

    #[test]
    fn provenance_is_read_and_inputs_are_merged_a_masked_one_must_be_given() {
        // sha256 of "abc".
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let events = started(serde_json::json!({"name": "w", "kind": "workflow",
            "workflow": {"path": "w.yaml", "sha256": sha},
            "inputs": {"who": "world", "n": 3, "token": "***"}}));
        let rec = Recording::read(&events, &mut |_| None).unwrap();
        assert_eq!(rec.workflow.as_ref().unwrap().path, "w.yaml");
        assert_eq!(rec.workflow_changed(b"abc"), None);
        assert!(rec.workflow_changed(b"abd").is_some());
        assert_eq!(
            rec.inputs_with(Vec::new()),
            Err(RecordingError::MaskedInput("token".into()))
        );
        let given = vec![("token".to_owned(), "s3cret".to_owned())];
        assert_eq!(
            rec.inputs_with(given).unwrap(),
            [
                ("n".to_owned(), "3".to_owned()),
                ("who".to_owned(), "world".to_owned()),
                ("token".to_owned(), "s3cret".to_owned()),
            ]
        );
    }

    #[test]
    fn a_run_without_provenance_or_events() {
        let events = started(serde_json::json!({"name": "w", "kind": "workflow"}));
        let rec = Recording::read(&events, &mut |_| None).unwrap();
        assert_eq!((rec.workflow, rec.inputs.len()), (None, 0));
        assert_eq!(
            Recording::read(&[], &mut |_| None),
            Err(RecordingError::Empty)
        );
    }
}
