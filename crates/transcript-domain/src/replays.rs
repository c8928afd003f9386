//! Which runs are replays: a run whose `run.started` names the run it replays (`replay_of`,
//! wire decision 16), and every child run under one. Their turns were served from a recording
//! and are not spend, so bills leave them out.

use std::collections::{HashMap, HashSet};

use crate::RunId;

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
}
