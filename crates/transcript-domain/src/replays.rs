//! Which runs are replays: a run whose `run.started` names the run it replays (`replay_of`,
//! wire decision 16), and every child run under one. Their turns were served from a recording
//! and are not spend, so bills leave them out. A trial (a replay forked at a step, decision
//! 22) is the exception: [`fork_prefix`] names its steps that were served from the recording;
//! the rest of it ran live and is spend.

use std::collections::{HashMap, HashSet};

use crate::RunId;
pub use crate::fork::{fork_prefix, fork_step};

/// The replays among `runs`, each given as `(run, its parent run, whether it names a run it
/// replays)`: the runs that name one, and the runs whose chain of parents reaches one. A cycle
/// of parents (a corrupt store) ends the walk without a replay.
pub fn replayed_runs(
    runs: impl IntoIterator<Item = (RunId, Option<RunId>, bool)>,
) -> HashSet<RunId> {
    let runs: Vec<_> = runs.into_iter().collect();
    let parents: HashMap<RunId, Option<RunId>> = runs.iter().map(|r| (r.0, r.1)).collect();
    let roots: HashSet<RunId> = runs.iter().filter(|r| r.2).map(|r| r.0).collect();
    let reaches_root = |id: RunId| {
        let mut at = Some(id);
        for _ in 0..=runs.len() {
            match at {
                Some(a) if roots.contains(&a) => return true,
                Some(a) => at = parents.get(&a).copied().flatten(),
                None => return false,
            }
        }
        false
    };
    runs.iter()
        .map(|r| r.0)
        .filter(|id| reaches_root(*id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DecodedEvent;
    use crate::fork::is_within;
    use std::collections::BTreeSet;

    fn id(n: u8) -> RunId {
        RunId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_replay_and_its_descendants_are_replays_a_cycle_is_not() {
        let runs = [
            (id(1), None, false),
            (id(2), None, true),
            (id(3), Some(id(2)), false),
            (id(4), Some(id(3)), false),
            (id(5), Some(id(1)), false),
            (id(6), Some(id(7)), false),
            (id(7), Some(id(6)), false),
        ];
        let replays = replayed_runs(runs);
        assert_eq!(replays, HashSet::from([id(2), id(3), id(4)]));
    }

    fn started(path: &str, iteration: u64) -> DecodedEvent {
        let line = format!(
            "{{\"seq\":1,\"timestamp\":\"2026-01-01T00:00:00Z\",\"run_id\":\"{}\",\
             \"type\":\"step.started\",\"path\":\"{path}\",\"iteration\":{iteration},\
             \"payload\":{{\"name\":\"x\",\"kind\":\"command\"}}}}",
            id(1)
        );
        crate::decode_line(line.as_bytes())
            .unwrap_or_else(|e| panic!("{e}: {line}"))
            .event
    }

    #[test]
    fn the_prefix_is_what_started_before_the_step_but_what_encloses_it() {
        let events = [
            started("prep", 0),
            started("loop", 0),
            started("loop.ask", 0),
            started("loop.ask", 1),
            started("loop.check", 1),
            started("done", 0),
        ];
        let set = |v: &[(&str, u64)]| -> BTreeSet<(String, u64)> {
            v.iter().map(|(p, i)| ((*p).to_owned(), *i)).collect()
        };
        assert_eq!(
            fork_prefix(&events, "loop.ask#1"),
            Some(set(&[("prep", 0), ("loop.ask", 0)]))
        );
        assert_eq!(fork_prefix(&events, "loop.ask"), Some(set(&[("prep", 0)])));
        assert_eq!(fork_prefix(&events, "prep"), Some(set(&[])));
        assert_eq!(
            fork_prefix(&events, "done").map(|s| s.len()),
            Some(5),
            "the enclosing loop ended before done started: it is before the fork"
        );
        assert_eq!(fork_prefix(&events, "loop.ask#7"), None);
        assert_eq!(fork_prefix(&events, "nope"), None);
        assert_eq!(fork_step("a#b"), ("a#b", None));
        assert!(!is_within("loopy", "loop"));
    }
}
