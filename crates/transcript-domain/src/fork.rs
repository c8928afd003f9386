//! Where a trial forks a recording (#61, wire decision 22), at any depth: a step of the root
//! run (`review`), an iteration (`loop.ask#2`), or a step of a child run, named through its
//! calling steps (`call/inner`, `call#1/inner#2`: each level `path` or `path#N`, levels joined by
//! `/`, as transcript-compare names child-run steps). [`ForkPrefix`] says of every step
//! execution whether it was served from the recording (it started before the fork), runs live
//! (the fork and everything after it), or encloses the fork (a loop or parallel block holding
//! it, a `call_workflow` step whose child run holds it): what a fork serves and what a trial's
//! bill counts, by one rule.

use std::collections::BTreeSet;

use crate::{DecodedEvent, EventKind, EventType, RunId};

/// One step execution of a run: its path and iteration.
pub type Execution = (String, u64);

/// A step execution at any depth: the calling steps' `(path, iteration)` from the root run
/// down, then its own.
pub type Chain = [(String, u64)];

/// What a fork does with one step execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkSide {
    /// It started before the fork: served from the recording, not spend.
    Replayed,
    /// The fork itself, or after it: run live, spend.
    Live,
    /// It holds the fork (an enclosing block, or a calling step of the fork's run): part of
    /// it was served, part runs live; look at what it holds.
    Encloses,
}

/// The step executions of a run that started before a fork, at every level down to the fork.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkPrefix {
    /// The fork as found: each level's `(path, iteration)`.
    at: Vec<(String, u64)>,
    /// The executions that started before it, each as its chain.
    before: BTreeSet<Vec<(String, u64)>>,
}

/// Why a fork step names nothing in a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkFindError {
    /// A level names a step its run never started.
    #[error(
        "{run} has no step '{level}' (name a step path, `path#N` for an iteration, `call/step` for a step of a child run; it ran: {ran})"
    )]
    NoSuchStep {
        /// The level as named.
        level: String,
        /// The run it was looked for in: `the recording`, or `the child run of 'call'`.
        run: String,
        /// The step paths that run started, in order (at most 20).
        ran: String,
    },
    /// A step execution that started before the fork ran again after it (a step in nested
    /// loops: a path and its innermost iteration do not name one execution), so which of
    /// its runs were served cannot be told apart.
    #[error(
        "cannot fork at '{level}': step '{step}' iteration {iteration} ran both before and after          it (nested loops name an execution by its innermost iteration only); fork at a step          outside the nested loops"
    )]
    Ambiguous {
        /// The level as named.
        level: String,
        /// The step that ran on both sides.
        step: String,
        /// Its iteration.
        iteration: u64,
    },
    /// A level above the last names a step that called no child run.
    #[error("step '{0}' called no child run: only a call_workflow step has steps below it")]
    NoChild(String),
    /// The child run a level called could not be read.
    #[error("the child run {child} of step '{step}' could not be read")]
    MissingChild {
        /// The calling step.
        step: String,
        /// Its child run.
        child: RunId,
    },
}

impl ForkPrefix {
    /// The fork of the run `events` (one run's, in the order written) at `step`; `lookup`
    /// gives a child run's events by id (a step of a child run is named through its callers).
    pub fn find(
        events: &[DecodedEvent],
        step: &str,
        lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    ) -> Result<ForkPrefix, ForkFindError> {
        let levels: Vec<&str> = step.split('/').collect();
        let mut fork = ForkPrefix {
            at: Vec::new(),
            before: BTreeSet::new(),
        };
        let mut run = events.to_vec();
        for (depth, level) in levels.iter().enumerate() {
            let started = started_steps(&run);
            let run_name = match depth {
                0 => "the recording".to_owned(),
                _ => format!("the child run of '{}'", levels[..depth].join("/")),
            };
            let Some((before, here)) = level_prefix(&started, level) else {
                return Err(ForkFindError::NoSuchStep {
                    level: (*level).to_owned(),
                    run: run_name,
                    ran: ran(&started),
                });
            };
            let at = started.iter().position(|s| *s == here).unwrap_or(0);
            if let Some((p, i)) = started[at..].iter().find(|s| before.contains(*s)) {
                return Err(ForkFindError::Ambiguous {
                    level: (*level).to_owned(),
                    step: p.clone(),
                    iteration: *i,
                });
            }
            for step in before {
                let mut chain = fork.at.clone();
                chain.push(step);
                fork.before.insert(chain);
            }
            fork.at.push(here.clone());
            if depth + 1 < levels.len() {
                let child = child_of(&run, &here)
                    .ok_or_else(|| ForkFindError::NoChild(within_level(&levels, depth)))?;
                run = lookup(child).ok_or_else(|| ForkFindError::MissingChild {
                    step: within_level(&levels, depth),
                    child,
                })?;
            }
        }
        Ok(fork)
    }

    /// The fork's chain as found (each level's path and iteration).
    pub fn at(&self) -> &Chain {
        &self.at
    }

    /// What the fork does with the execution `chain`.
    pub fn side(&self, chain: &Chain) -> ForkSide {
        if (1..=chain.len()).any(|n| self.before.contains(&chain[..n])) {
            return ForkSide::Replayed;
        }
        let Some(((last, _), above)) = chain.split_last() else {
            return ForkSide::Live;
        };
        let depth = above.len();
        let Some((fork_path, _)) = self.at.get(depth) else {
            return ForkSide::Live;
        };
        if above != &self.at[..depth] {
            return ForkSide::Live;
        }
        let calls_the_fork = depth + 1 < self.at.len() && chain[depth] == self.at[depth];
        if calls_the_fork || is_within(fork_path, last) {
            ForkSide::Encloses
        } else {
            ForkSide::Live
        }
    }
}

/// A step as a fork names it (`path`, or `path#N` for its iteration N), split.
pub fn fork_step(step: &str) -> (&str, Option<u64>) {
    match step.rsplit_once('#') {
        Some((p, n)) => match n.parse::<u64>() {
            Ok(n) => (p, Some(n)),
            Err(_) => (step, None),
        },
        None => (step, None),
    }
}

/// The root-run step executions `(path, iteration)` of `events` (one run's, in the order
/// written) that started before the execution `step` names (`path`, or `path#N`; without
/// `#N`, its first execution), leaving out the steps that enclose it (a loop, a parallel
/// block: they started before what they hold). `None` when the run never started `step`.
///
/// For the recording, these are what a fork at `step` serves from the recording; for a trial
/// (its own events, `run.started`'s `forked_at`), these are what was served, not spend. A
/// step that ran first in a changed workflow after the fork is not among them. One level only:
/// [`crate::fork::ForkPrefix`] follows a fork into child runs (`call/inner`).
pub fn fork_prefix(events: &[DecodedEvent], step: &str) -> Option<BTreeSet<(String, u64)>> {
    level_prefix(&started_steps(events), step).map(|(before, _)| before)
}

/// One level of a fork: among one run's step starts `started` (in order, as
/// [`started_steps`] lists them), the execution `level` names (`path` or `path#N`; without
/// `#N`, its first), and the executions that started before it but the steps enclosing it.
/// `None` when the run never started it. A bill that keeps each run's starts (not its events)
/// follows a fork down through child runs with this, level by level.
pub fn level_prefix(
    started: &[(String, u64)],
    level: &str,
) -> Option<(BTreeSet<Execution>, Execution)> {
    let (path, iteration) = fork_step(level);
    let at = started
        .iter()
        .position(|(p, i)| p == path && iteration.is_none_or(|n| n == *i))?;
    let before = started[..at]
        .iter()
        .filter(|(p, _)| !is_within(path, p))
        .cloned()
        .collect();
    Some((before, started[at].clone()))
}

/// The `(path, iteration)` of every step start of one run, in order (`step.started`, and
/// `step.call_workflow.started` for a `call_workflow` step, which writes no `step.started`).
pub fn started_steps(run: &[DecodedEvent]) -> Vec<(String, u64)> {
    run.iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Known(EventType::StepStarted | EventType::CallWorkflowStarted)
            )
        })
        .map(|e| (e.path.clone(), e.iteration))
        .collect()
}

/// The child run the execution `(path, iteration)` called.
fn child_of(run: &[DecodedEvent], (path, iteration): &(String, u64)) -> Option<RunId> {
    run.iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Known(EventType::CallWorkflowStarted | EventType::CallWorkflowCompleted)
            )
        })
        .find(|e| &e.path == path && e.iteration == *iteration)
        .and_then(|e| e.child_run_id)
}

/// The levels down to `depth`, joined as named.
fn within_level(levels: &[&str], depth: usize) -> String {
    levels[..=depth].join("/")
}

/// The distinct step paths of `started`, in order, at most 20.
fn ran(started: &[(String, u64)]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for (p, _) in started {
        if !seen.contains(&p.as_str()) && seen.len() < 20 {
            seen.push(p);
        }
    }
    seen.join(", ")
}

/// Whether step path `inner` lies within step path `outer` (`outer.` prefixes it).
pub(crate) fn is_within(inner: &str, outer: &str) -> bool {
    inner
        .strip_prefix(outer)
        .is_some_and(|rest| rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "00000000-0000-4000-8000-000000000001";
    const CHILD: &str = "00000000-0000-4000-8000-000000000002";

    fn event(
        run: &str,
        kind: &str,
        path: &str,
        iteration: u64,
        child: Option<&str>,
    ) -> DecodedEvent {
        let child = child.map_or(String::new(), |c| format!(",\"child_run_id\":\"{c}\""));
        let line = format!(
            "{{\"seq\":1,\"timestamp\":\"2026-01-01T00:00:00Z\",\"run_id\":\"{run}\"{child},\
             \"type\":\"{kind}\",\"path\":\"{path}\",\"iteration\":{iteration},\
             \"payload\":{{\"name\":\"x\",\"kind\":\"x\"}}}}"
        );
        crate::decode_line(line.as_bytes())
            .unwrap_or_else(|e| panic!("{e}: {line}"))
            .event
    }

    fn started(run: &str, path: &str, iteration: u64) -> DecodedEvent {
        event(run, "step.started", path, iteration, None)
    }

    /// prep; loop (ask#0, ask#1); call -> child (a, b, c); done.
    fn runs() -> (Vec<DecodedEvent>, Vec<DecodedEvent>) {
        let root = vec![
            started(ROOT, "prep", 0),
            started(ROOT, "loop", 0),
            started(ROOT, "loop.ask", 0),
            started(ROOT, "loop.ask", 1),
            started(ROOT, "call", 0),
            event(ROOT, "step.call_workflow.started", "call", 0, Some(CHILD)),
            started(ROOT, "done", 0),
        ];
        let child = vec![
            started(CHILD, "a", 0),
            started(CHILD, "b", 0),
            started(CHILD, "c", 0),
        ];
        (root, child)
    }

    fn chain(levels: &[(&str, u64)]) -> Vec<(String, u64)> {
        levels.iter().map(|(p, i)| ((*p).to_owned(), *i)).collect()
    }

    #[test]
    fn a_fork_in_a_child_run_serves_what_started_before_it_at_every_level() {
        let (root, child) = runs();
        let child_id = RunId::parse(CHILD).unwrap_or_else(|e| panic!("{e}"));
        let mut lookup = |id: RunId| (id == child_id).then(|| child.clone());
        let fork = ForkPrefix::find(&root, "call/b", &mut lookup).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fork.at(), chain(&[("call", 0), ("b", 0)]).as_slice());
        let side = |levels: &[(&str, u64)]| fork.side(&chain(levels));
        assert_eq!(side(&[("prep", 0)]), ForkSide::Replayed);
        assert_eq!(side(&[("loop", 0)]), ForkSide::Replayed);
        assert_eq!(side(&[("loop.ask", 1)]), ForkSide::Replayed);
        assert_eq!(side(&[("call", 0)]), ForkSide::Encloses);
        assert_eq!(side(&[("call", 0), ("a", 0)]), ForkSide::Replayed);
        assert_eq!(side(&[("call", 0), ("b", 0)]), ForkSide::Live);
        assert_eq!(side(&[("call", 0), ("c", 0)]), ForkSide::Live);
        assert_eq!(side(&[("done", 0)]), ForkSide::Live);
        // A second call of the same step (another iteration) is after the fork.
        assert_eq!(side(&[("call", 1), ("a", 0)]), ForkSide::Live);
    }

    #[test]
    fn a_fork_at_an_iteration_encloses_its_loop() {
        let (root, _) = runs();
        let fork =
            ForkPrefix::find(&root, "loop.ask#1", &mut |_| None).unwrap_or_else(|e| panic!("{e}"));
        let side = |levels: &[(&str, u64)]| fork.side(&chain(levels));
        assert_eq!(side(&[("prep", 0)]), ForkSide::Replayed);
        assert_eq!(side(&[("loop", 0)]), ForkSide::Encloses);
        assert_eq!(side(&[("loop.ask", 0)]), ForkSide::Replayed);
        assert_eq!(side(&[("loop.ask", 1)]), ForkSide::Live);
        assert_eq!(side(&[("loopy", 0)]), ForkSide::Live);
        assert_eq!(side(&[("call", 0), ("a", 0)]), ForkSide::Live);
    }

    #[test]
    fn a_fork_that_names_nothing_says_what_ran() {
        let (root, child) = runs();
        let err = ForkPrefix::find(&root, "nope", &mut |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the recording has no step 'nope' (name a step path, `path#N` for an iteration, \
             `call/step` for a step of a child run; it ran: prep, loop, loop.ask, call, done)"
        );
        let err = ForkPrefix::find(&root, "prep/a", &mut |_| None).unwrap_err();
        assert_eq!(err, ForkFindError::NoChild("prep".to_owned()));
        let err = ForkPrefix::find(&root, "call/a", &mut |_| None).unwrap_err();
        assert!(matches!(err, ForkFindError::MissingChild { .. }), "{err}");
        let mut lookup = |_| Some(child.clone());
        let err = ForkPrefix::find(&root, "call/zz", &mut lookup).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the child run of 'call' has no step 'zz' (name a step path"),
            "{err}"
        );
        assert!(err.to_string().ends_with("it ran: a, b, c)"), "{err}");
    }

    #[test]
    fn a_fork_inside_nested_loops_whose_executions_repeat_is_refused() {
        // o over [x, y], o.in over [p, q]: o.in.ask#1 of o's first iteration, then o.in.ask#0
        // and #1 again in o's second.
        let root = vec![
            started(ROOT, "o", 0),
            started(ROOT, "o.in", 0),
            started(ROOT, "o.in.ask", 0),
            started(ROOT, "o.in.ask", 1),
            started(ROOT, "o", 1),
            started(ROOT, "o.in", 0),
            started(ROOT, "o.in.ask", 0),
            started(ROOT, "o.in.ask", 1),
        ];
        let err = ForkPrefix::find(&root, "o.in.ask#1", &mut |_| None).unwrap_err();
        assert!(matches!(err, ForkFindError::Ambiguous { .. }), "{err}");
        assert!(
            err.to_string().contains("step 'o.in.ask' iteration 0"),
            "{err}"
        );
        // Before the nested loops is fine.
        let mut flat = vec![started(ROOT, "prep", 0)];
        flat.extend(root);
        assert!(ForkPrefix::find(&flat, "o", &mut |_| None).is_ok());
    }
}
