//! What if: a recorded run forked at a step (#61). The steps that started before it in the
//! recording are replayed from their recorded turns (and, asked, their recorded command
//! outcomes); the step and everything after it run live, against the endpoints the workflow
//! names, as `run` runs them.
//!
//! The order is the recording's: a step is before the fork when its `step.started` was written
//! before the forked step's in the same run; a step of a child run follows its calling step,
//! unless the fork is inside that child run (`call/step`), where the same rule holds one level
//! down. A step the recording never ran (a new step of a changed workflow) runs live.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
pub use transcript_domain::fork::{ForkFindError, ForkPrefix, ForkSide};
use transcript_domain::{DecodedEvent, RunId};
use transcript_exec::model_endpoint::{
    EndpointOutcome, EndpointSession, EndpointStart, ModelEndpoints, RecordedCommand,
    RecordedCommands,
};

use crate::engine::ReplayEndpoints;
use crate::{Replayer, StepKey};

/// The step a run is forked at, and which of the recording's step executions started before
/// it (transcript-domain's [`ForkPrefix`]: the one rule the fork and the bills use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkPoint {
    /// The step as named (`path`, `path#iteration`, `call/step` for a step of a child run).
    pub step: String,
    /// What started before it, at every level down to it.
    prefix: ForkPrefix,
}

/// Why a run cannot be forked at a step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The step names nothing the recording ran (a level it never started, a level above the
    /// last that called no child run, a child run that could not be read).
    #[error(transparent)]
    NoSuchStep(#[from] ForkFindError),
}

impl ForkPoint {
    /// The fork of the recorded root run `events` at `step` (`path`, or `path#N` for its
    /// iteration N; without `#N`, its first execution), a step of the root run.
    pub fn find(events: &[DecodedEvent], step: &str) -> Result<ForkPoint, ForkError> {
        Self::find_with(events, step, &mut |_| None)
    }

    /// The fork at `step`, which may name a step of a child run through its calling steps
    /// (`call/step`, `call#1/step#2`); `lookup` gives a child run's events by id.
    pub fn find_with(
        events: &[DecodedEvent],
        step: &str,
        lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    ) -> Result<ForkPoint, ForkError> {
        Ok(ForkPoint {
            step: step.to_owned(),
            prefix: ForkPrefix::find(events, step, lookup)?,
        })
    }

    /// Whether the execution at `key` is replayed (it, or a step calling it, started before
    /// the fork).
    pub fn replays(&self, key: &StepKey) -> bool {
        self.side(key) == ForkSide::Replayed
    }

    /// What the fork does with the execution at `key`.
    pub fn side(&self, key: &StepKey) -> ForkSide {
        let mut chain = key.callers.clone();
        chain.push((key.path.clone(), key.iteration));
        self.prefix.side(&chain)
    }

    /// The rule itself.
    pub fn prefix(&self) -> &ForkPrefix {
        &self.prefix
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
