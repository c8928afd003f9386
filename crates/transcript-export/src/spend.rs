//! What of many runs is spend (#61, wire decision 22). A replay's turns were served from its
//! recording: a plain replay and every run under it are not spend. A *trial* (a replay forked
//! at a step, `run.started`'s `forked_at`) ran live from that step on: at each level of the fork
//! (`call/inner` goes down through the child run the `call` step ran) the steps that started
//! before it in the recording (transcript-domain's [`level_prefix`] over the recording's
//! starts, as `replay --live-from` served them; the trial's own when the recording is not
//! among the runs) and the child runs they called were served, not spend; the step, what follows it and the
//! child runs they called are spend. A trial that never reached its fork step (at some level)
//! was served whole there.

use std::collections::{BTreeSet, HashMap, HashSet};

use transcript_domain::fork::level_prefix;

use crate::run_turns::{RunTurn, RunTurns};

/// What a run's turns are, as spend.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Served {
    /// Served whole (not spend).
    All,
    /// These step executions were served; the rest of it is spend.
    Steps(BTreeSet<(String, u64)>),
}

/// Which runs are spend, and of a trial (at any depth) which steps were served.
#[derive(Debug, Clone, Default)]
pub struct Spend<'r> {
    runs: HashSet<&'r str>,
    served: HashMap<&'r str, Served>,
}

impl<'r> Spend<'r> {
    /// Reads `runs` (every run of a store, or the ones a caller picked; a run's parent or
    /// child not among them is not followed).
    pub fn of(runs: &[&'r RunTurns]) -> Spend<'r> {
        let by_id: HashMap<&str, &RunTurns> =
            runs.iter().map(|r| (r.run_id.as_str(), *r)).collect();
        let mut not_spend: HashSet<&str> = runs
            .iter()
            .filter(|r| r.replay_of.is_some() && r.forked_at.is_none())
            .map(|r| r.run_id.as_str())
            .collect();
        let mut served = HashMap::new();
        // Each trial, then each child run its fork goes down through, with the rest of the
        // fork and the recording's run at that level: what was served is decided in the
        // recording's order, as `replay --live-from` decided it (a step the recording never
        // ran is live); without the recording in `runs`, in the trial's own order.
        let mut forks: Vec<(&str, Option<&str>, &str)> = runs
            .iter()
            .filter_map(|r| {
                let fork = r.forked_at.as_deref()?;
                let recording = r.replay_of.as_deref()?;
                Some((r.run_id.as_str(), Some(recording), fork))
            })
            .collect();
        let mut seen = HashSet::new();
        while let Some((id, recorded, fork)) = forks.pop() {
            let Some(run) = by_id.get(id).copied() else {
                continue;
            };
            if !seen.insert(id) {
                continue; // a corrupt store whose calls loop
            }
            let recorded = recorded.and_then(|r| by_id.get(r).copied()).unwrap_or(run);
            let (level, rest) = match fork.split_once('/') {
                Some((l, r)) => (l, Some(r)),
                None => (fork, None),
            };
            let Some((before, here)) = level_prefix(&recorded.starts, level) else {
                not_spend.insert(id);
                served.insert(id, Served::All);
                continue;
            };
            for (step, child) in &run.calls {
                if before.contains(step) {
                    not_spend.insert(child.as_str());
                } else if let Some(rest) = rest.filter(|_| *step == here) {
                    let recorded_child = recorded
                        .calls
                        .iter()
                        .find(|(s, _)| *s == here)
                        .map(|(_, c)| c.as_str());
                    forks.push((child.as_str(), recorded_child, rest));
                }
            }
            served.insert(id, Served::Steps(before));
        }
        let parents: HashMap<&str, Option<&str>> = runs
            .iter()
            .map(|r| (r.run_id.as_str(), r.parent_run_id.as_deref()))
            .collect();
        let under = |id: &str| {
            let mut at = Some(id);
            for _ in 0..=runs.len() {
                match at {
                    Some(a) if not_spend.contains(a) => return true,
                    Some(a) => at = parents.get(a).copied().flatten(),
                    None => return false,
                }
            }
            false // a cycle of parents
        };
        let spend = runs
            .iter()
            .map(|r| r.run_id.as_str())
            .filter(|id| !under(id))
            .collect();
        Spend {
            runs: spend,
            served,
        }
    }

    /// Whether `run` is spend (some of it, for a trial).
    pub fn is_spend(&self, run: &str) -> bool {
        self.runs.contains(run)
    }

    /// Whether `turn` of `run` is spend: its run is, and its step was not served.
    pub fn bills(&self, run: &str, turn: &RunTurn) -> bool {
        self.is_spend(run)
            && match self.served.get(run) {
                None => true,
                Some(Served::All) => false,
                Some(Served::Steps(before)) => !before.contains(&turn.step),
            }
    }

    /// The spend runs.
    pub fn runs(&self) -> &HashSet<&'r str> {
        &self.runs
    }

    /// The seqs of `run`'s billed turns that are spend (none when the run is not spend): for
    /// a store that bills from an index of turns (NATS), whose entries carry their seq.
    pub fn billed_seqs(&self, run: &RunTurns) -> HashSet<u64> {
        run.turns
            .iter()
            .filter(|t| self.bills(&run.run_id, t))
            .map(|t| t.seq)
            .collect()
    }
}

/// One run as a store's index lists it, for [`trial_bills`]: its id, its calling run, the run
/// it replays and the step a trial was forked at.
#[derive(Debug, Clone, Copy)]
pub struct Listed<'a> {
    /// The run.
    pub run_id: &'a str,
    /// Its calling run.
    pub parent_run_id: Option<&'a str>,
    /// The run it replays.
    pub replay_of: Option<&'a str>,
    /// For a trial, the step it was forked at.
    pub forked_at: Option<&'a str>,
}

/// For a store that bills from an index of turns (NATS): of each trial and every run under
/// one, the seqs of the turns that are spend. `read` gives a run's events; only the trials,
/// their recordings and the runs under those are read. A run `read` cannot give keeps none.
pub fn trial_bills(
    listed: &[Listed<'_>],
    read: &mut dyn FnMut(&str) -> Option<Vec<transcript_domain::DecodedEvent>>,
) -> HashMap<String, HashSet<u64>> {
    let parent: HashMap<&str, Option<&str>> =
        listed.iter().map(|r| (r.run_id, r.parent_run_id)).collect();
    let roots: HashSet<&str> = listed
        .iter()
        .filter(|r| r.forked_at.is_some())
        .map(|r| r.run_id)
        .collect();
    let under = |set: &HashSet<&str>, id: &str| {
        let mut at = Some(id);
        for _ in 0..=listed.len() {
            match at {
                Some(a) if set.contains(a) => return true,
                Some(a) => at = parent.get(a).copied().flatten(),
                None => return false,
            }
        }
        false
    };
    let trial_side: Vec<&str> = listed
        .iter()
        .map(|r| r.run_id)
        .filter(|id| under(&roots, id))
        .collect();
    if trial_side.is_empty() {
        return HashMap::new();
    }
    let recordings: HashSet<&str> = listed
        .iter()
        .filter(|r| roots.contains(r.run_id))
        .filter_map(|r| r.replay_of)
        .collect();
    let family = listed
        .iter()
        .map(|r| r.run_id)
        .filter(|id| under(&roots, id) || under(&recordings, id));
    let runs: Vec<RunTurns> = family
        .filter_map(|id| Some(RunTurns::of(&read(id)?)))
        .collect();
    let spend = Spend::of(&runs.iter().collect::<Vec<_>>());
    let mut bills: HashMap<String, HashSet<u64>> = trial_side
        .iter()
        .map(|id| ((*id).to_owned(), HashSet::new()))
        .collect();
    for r in &runs {
        if let Some(seqs) = bills.get_mut(&r.run_id) {
            *seqs = spend.billed_seqs(r);
        }
    }
    bills
}
