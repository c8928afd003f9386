//! What if: a recorded run forked at a step (#61). The steps that started before it in the
//! recording are replayed from their recorded turns (and, asked, their recorded command
//! outcomes); the step and everything after it run live, against the endpoints the workflow
//! names, as `run` runs them.
//!
//! The order is the recording's: a root-run step is before the fork when its `step.started`
//! was written before the forked step's; a step of a child run follows its outermost calling
//! step. A step the recording never ran (a new step of a changed workflow) runs live.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use transcript_domain::{DecodedEvent, EventKind, EventType};
use transcript_exec::model_endpoint::{
    EndpointOutcome, EndpointSession, EndpointStart, ModelEndpoints, RecordedCommand,
    RecordedCommands,
};

use crate::engine::ReplayEndpoints;
use crate::{Replayer, StepKey};

/// The step a run is forked at, and which of the recording's steps started before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkPoint {
    /// The step as named (`path` or `path#iteration`).
    pub step: String,
    /// The root-run executions `(path, iteration)` that started before it.
    before: std::collections::BTreeSet<(String, u64)>,
}

/// Why a run cannot be forked at a step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The recording never started the step.
    #[error(
        "the recording has no step '{step}' (name a step path of its root run, `path#N` for \
         an iteration; it ran: {ran})"
    )]
    NoSuchStep {
        /// The step as named.
        step: String,
        /// The step paths it ran, in order (at most 20).
        ran: String,
    },
}

impl ForkPoint {
    /// The fork of the recorded root run `events` at `step` (`path`, or `path#N` for its
    /// iteration N; without `#N`, its first execution).
    pub fn find(events: &[DecodedEvent], step: &str) -> Result<ForkPoint, ForkError> {
        // One rule for the fork and for the bill of its trials (transcript-domain's).
        let before = transcript_domain::replays::fork_prefix(events, step).ok_or_else(|| {
            let mut ran: Vec<&str> = Vec::new();
            let started = events
                .iter()
                .filter(|e| e.kind == EventKind::Known(EventType::StepStarted));
            for e in started {
                if !ran.contains(&e.path.as_str()) && ran.len() < 20 {
                    ran.push(&e.path);
                }
            }
            ForkError::NoSuchStep {
                step: step.to_owned(),
                ran: ran.join(", "),
            }
        })?;
        Ok(ForkPoint {
            step: step.to_owned(),
            before,
        })
    }

    /// Whether the execution at `key` is replayed (it started before the fork).
    pub fn replays(&self, key: &StepKey) -> bool {
        let (path, iteration) = key
            .callers
            .first()
            .map_or((key.path.as_str(), key.iteration), |(p, i)| {
                (p.as_str(), *i)
            });
        self.before.contains(&(path.to_owned(), iteration))
    }
}

/// The engine's replay ports for a forked run: the executions before the fork from
/// [`ReplayEndpoints`], the others live (no endpoint of ours: the agent's own configuration).
#[derive(Debug, Clone)]
pub struct ForkEndpoints {
    replay: ReplayEndpoints,
    fork: Arc<ForkPoint>,
}

impl ForkEndpoints {
    /// `replayer`'s tape served before `fork`, live from it on.
    pub fn new(replayer: Replayer, fork: ForkPoint) -> Self {
        ForkEndpoints {
            replay: ReplayEndpoints::new(replayer),
            fork: Arc::new(fork),
        }
    }

    /// Where the run is forked.
    pub fn fork(&self) -> &ForkPoint {
        &self.fork
    }
}

#[async_trait]
impl ModelEndpoints for ForkEndpoints {
    async fn open(&self, start: EndpointStart) -> Result<Box<dyn EndpointSession>, String> {
        let key = StepKey {
            callers: start.callers.clone(),
            path: start.path.clone(),
            iteration: start.iteration,
        };
        if self.fork.replays(&key) {
            self.replay.open(start).await
        } else {
            Ok(Box::new(Live))
        }
    }
}

impl RecordedCommands for ForkEndpoints {
    fn take(
        &self,
        callers: &[(String, u64)],
        path: &str,
        iteration: u64,
    ) -> Option<RecordedCommand> {
        let key = StepKey {
            callers: callers.to_vec(),
            path: path.to_owned(),
            iteration,
        };
        if self.fork.replays(&key) {
            self.replay.take(callers, path, iteration)
        } else {
            None
        }
    }
}

/// A live execution: nothing added to the agent's environment, nothing judged.
struct Live;

#[async_trait]
impl EndpointSession for Live {
    fn env(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    async fn finish(self: Box<Self>) -> EndpointOutcome {
        EndpointOutcome::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn started(seq: u64, path: &str, iteration: u64) -> DecodedEvent {
        let line = serde_json::json!({"seq": seq, "run_id": "00000000-0000-4000-8000-000000000001",
            "type": "step.started", "path": path, "iteration": iteration,
            "timestamp": "2026-01-01T00:00:00.000Z", "payload": {"name": path, "kind": "agent"}});
        transcript_domain::decode_line(line.to_string().as_bytes())
            .unwrap()
            .event
    }

    fn recording() -> Vec<DecodedEvent> {
        vec![
            started(2, "plan", 0),
            started(3, "each", 0),
            started(4, "each.work", 0),
            started(5, "each.work", 1),
            started(6, "review", 0),
            started(7, "call", 0),
            started(8, "ship", 0),
        ]
    }

    #[test]
    fn steps_that_started_before_the_fork_replay_the_rest_run_live() {
        let fork = ForkPoint::find(&recording(), "review").unwrap();
        let key = |p: &str, i| StepKey::new(p, i);
        assert!(fork.replays(&key("plan", 0)));
        assert!(fork.replays(&key("each.work", 1)));
        assert!(!fork.replays(&key("review", 0)));
        assert!(!fork.replays(&key("ship", 0)));
        assert!(
            !fork.replays(&key("new-step", 0)),
            "a step never recorded is live"
        );
        // A child run's steps follow their outermost caller.
        let child = StepKey {
            callers: vec![("call".into(), 0)],
            path: "inner".into(),
            iteration: 0,
        };
        assert!(!fork.replays(&child));
        let early = ForkPoint::find(&recording(), "ship").unwrap();
        assert!(early.replays(&child));
    }

    #[test]
    fn an_iteration_can_be_named_and_its_loop_is_not_before_it() {
        let fork = ForkPoint::find(&recording(), "each.work#1").unwrap();
        assert!(fork.replays(&StepKey::new("each.work", 0)));
        assert!(!fork.replays(&StepKey::new("each.work", 1)));
        assert!(fork.replays(&StepKey::new("plan", 0)));
        assert!(!fork.replays(&StepKey::new("each", 0)));
    }

    #[test]
    fn a_step_the_recording_never_ran_is_an_error_naming_what_it_ran() {
        let err = ForkPoint::find(&recording(), "nope").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("'nope'") && text.contains("plan, each, each.work"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_live_execution_gets_no_endpoint_and_no_recorded_command() {
        let fork = ForkPoint::find(&recording(), "review").unwrap();
        let endpoints = ForkEndpoints::new(
            Replayer::new(crate::Tape::default(), crate::Matching::Strict),
            fork,
        );
        let dir = tempfile::tempdir().unwrap();
        let start = |path: &str| EndpointStart {
            callers: Vec::new(),
            path: path.into(),
            iteration: 0,
            provider: "claude".into(),
            prompt: "p".into(),
            system_prompt: String::new(),
            config_dir: dir.path().to_path_buf(),
        };
        let live = endpoints.open(start("review")).await.unwrap();
        assert!(live.env().is_empty());
        assert_eq!(live.finish().await, EndpointOutcome::default());
        let replayed = endpoints.open(start("plan")).await.unwrap();
        assert!(replayed.env().contains_key("ANTHROPIC_BASE_URL"));
        // No recorded execution of `plan` in this empty tape: the replay fails the step.
        assert!(replayed.finish().await.failure.is_some());
        assert!(endpoints.take(&[], "review", 0).is_none());
    }
}
