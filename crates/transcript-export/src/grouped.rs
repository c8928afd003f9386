//! Many runs' bill, grouped: what `transcript receipts --by day|month|session|project|model`
//! prints and the viewer's `/receipts` shows, computed here once so the two cannot disagree.
//!
//! - each run's billed turns ([`crate::billed_turns`], under the model that served them) are
//!   read once into a [`RunTurns`], which a caller may cache;
//! - **what is spend**: a replay's turns were served from its recording, so a replay and every
//!   run under it are left out; a *trial* (a replay forked at a step, `run.started`'s
//!   `forked_at`, decision 22) ran live from that step on: its steps in the fork prefix, at
//!   every level of the fork, and the child runs they called are left out, the rest of it,
//!   and the child runs its live steps called, are billed ([`crate::spend::Spend`]);
//! - **one request, one bill**: a request several runs repeat is billed once
//!   ([`crate::requests`]), each run read as the session its [`Origin`] names;
//! - **the keys**: the day or month of the turn, its model, the run's workflow, the session
//!   and the project of the imported session the caller's [`Origin`] names (else the run and
//!   the workflow); sums, prices and the table are [`crate::Groups`]'.
//!
//! Where an imported run came from is the caller's to say (the CLI reads its import index and
//! `transcript_import::project`): this crate reads no file.

use std::collections::{BTreeSet, HashSet};

use serde::Serialize;
use transcript_domain::Usage;
use transcript_domain::bill::{PriceFn, add_usd};

use crate::groups::{Group, Groups};
use crate::requests::{Requests, Source};
pub use crate::run_turns::{ImportedFrom, RunTurn, RunTurns, imported_from};
use crate::spend::Spend;

/// Where a run's turns come from, as the caller knows it: the imported session and its
/// project, and whether it is a side chain (a sub-agent's log, whose copy of a request loses
/// to the main chain's). All absent for a run that was not imported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The session (else the run is its own).
    pub session: Option<String>,
    /// The project (else the run's workflow).
    pub project: Option<String>,
    /// A sub-agent's log.
    pub sidechain: bool,
}

/// A key turns are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKey {
    /// UTC day of the turn (`YYYY-MM-DD`).
    Day,
    /// UTC month of the turn (`YYYY-MM`).
    Month,
    /// The imported session, else the run.
    Session,
    /// The imported session's project, else the run's workflow.
    Project,
    /// The model the turn is billed under.
    Model,
    /// The run's workflow.
    Workflow,
}

impl GroupKey {
    /// Its name (`day`, `month`, …).
    pub fn name(self) -> &'static str {
        match self {
            GroupKey::Day => "day",
            GroupKey::Month => "month",
            GroupKey::Session => "session",
            GroupKey::Project => "project",
            GroupKey::Model => "model",
            GroupKey::Workflow => "workflow",
        }
    }
}

/// Every grouping's totals together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupTotal {
    /// Runs with a billed request.
    pub runs: u64,
    /// Requests billed.
    pub turns: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache read tokens.
    pub cache_read_tokens: u64,
    /// Cache write tokens.
    pub cache_write_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
    /// Cost from the price table (`None`: a model without a price).
    pub cost_usd: Option<f64>,
    /// What the CLIs reported themselves (`None`: none did).
    pub reported_usd: Option<f64>,
}

/// Many runs' bill, grouped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grouped {
    /// The groups of each key asked for, in the order asked.
    pub groups: Vec<(GroupKey, Vec<Group>)>,
    /// The sums of every billed request.
    pub total: GroupTotal,
    /// Models without a price.
    pub unpriced: Vec<String>,
    /// Turns set aside: copies of a request another run's copy bills.
    pub duplicates: u64,
}

/// The runs among `runs` that are spend ([`Spend`]: all but plain replays and what runs under
/// them; a trial's child runs its served steps called are not, at any depth of its fork).
pub fn spend_runs<'r>(runs: &[&'r RunTurns]) -> HashSet<&'r str> {
    Spend::of(runs).runs().clone()
}

/// One billed turn waiting for the requests to be resolved.
struct Pending<'r> {
    keys: Vec<String>,
    run: &'r RunTurns,
    turn: &'r RunTurn,
}

/// The bill of `runs` (every run of a store, or the ones a caller picked) grouped by each of
/// `keys`: spend only (see the module docs), each request once, in the order of the runs'
/// start (newest first, then by run id, whatever order they are given in); `origin` says
/// where each run's turns come from, `price` prices a turn under its model.
pub fn group_runs(
    runs: &[&RunTurns],
    origin: &mut dyn FnMut(&RunTurns) -> Origin,
    keys: &[GroupKey],
    price: &PriceFn<'_>,
) -> Grouped {
    let mut runs = runs.to_vec();
    runs.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then_with(|| a.run_id.cmp(&b.run_id))
    });
    let spend = Spend::of(&runs);
    let mut requests = Requests::new();
    for run in runs.iter().filter(|r| spend.is_spend(&r.run_id)) {
        let origin = origin(run);
        let scope = origin.session.as_deref().unwrap_or(&run.run_id);
        for turn in run.turns.iter().filter(|t| spend.bills(&run.run_id, t)) {
            let keys = keys.iter().map(|k| key(*k, run, turn, &origin)).collect();
            requests.add(
                Pending { keys, run, turn },
                turn.request_id.as_deref(),
                Source {
                    run: &run.run_id,
                    session: scope,
                    provider: turn.provider.as_deref().unwrap_or(""),
                    sidechain: origin.sidechain,
                },
                &turn.usage,
            );
        }
    }
    let billed = requests.finish();
    let mut groups: Vec<Groups<'_>> = keys.iter().map(|_| Groups::new(price)).collect();
    let mut total = Total::new(price);
    for kept in &billed.kept {
        let Pending { keys, run, turn } = &kept.turn;
        for (g, key) in groups.iter_mut().zip(keys) {
            g.add_usage(
                key.clone(),
                &run.run_id,
                (&turn.model, &turn.usage),
                kept.first,
            );
        }
        total.add(run, turn, kept.first);
    }
    let mut unpriced = BTreeSet::new();
    let groups = keys
        .iter()
        .zip(groups)
        .map(|(k, g)| {
            let (groups, missing) = g.finish();
            unpriced.extend(missing);
            (*k, groups)
        })
        .collect();
    Grouped {
        groups,
        total: total.finish(),
        unpriced: unpriced.into_iter().collect(),
        duplicates: billed.duplicates,
    }
}

/// The group of `turn` of `run` by `key`.
fn key(key: GroupKey, run: &RunTurns, turn: &RunTurn, origin: &Origin) -> String {
    let cut = |n: usize| turn.timestamp.get(..n).unwrap_or("?").to_owned();
    let workflow = || run.workflow.clone().unwrap_or_else(|| "?".to_owned());
    match key {
        GroupKey::Day => cut(10),
        GroupKey::Month => cut(7),
        GroupKey::Session => origin.session.clone().unwrap_or_else(|| run.run_id.clone()),
        GroupKey::Project => origin.project.clone().unwrap_or_else(workflow),
        GroupKey::Model => turn.model.clone(),
        GroupKey::Workflow => workflow(),
    }
}

/// [`GroupTotal`] being summed.
struct Total<'p> {
    price: &'p PriceFn<'p>,
    sum: GroupTotal,
    usage: Usage,
    runs: HashSet<String>,
    unknown: bool,
}

impl<'p> Total<'p> {
    fn new(price: &'p PriceFn<'p>) -> Self {
        Total {
            price,
            sum: GroupTotal::default(),
            usage: Usage::default(),
            runs: HashSet::new(),
            unknown: false,
        }
    }

    fn add(&mut self, run: &RunTurns, turn: &RunTurn, first: bool) {
        if !self.runs.contains(&run.run_id) {
            self.runs.insert(run.run_id.clone());
        }
        self.sum.turns += u64::from(first);
        self.usage.accumulate(&turn.usage);
        match (self.price)(&turn.model, &turn.usage) {
            Some(c) => self.sum.cost_usd = Some(add_usd(self.sum.cost_usd.unwrap_or(0.0), c)),
            None => self.unknown = true,
        }
    }

    fn finish(self) -> GroupTotal {
        let u = &self.usage;
        GroupTotal {
            runs: self.runs.len() as u64,
            input_tokens: u.input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
            cache_read_tokens: u.cache_read_tokens.unwrap_or(0),
            cache_write_tokens: u.cache_write_tokens.unwrap_or(0),
            reasoning_tokens: u.reasoning_tokens.unwrap_or(0),
            cost_usd: if self.unknown {
                None
            } else {
                Some(self.sum.cost_usd.unwrap_or(0.0))
            },
            reported_usd: u.cost_usd,
            ..self.sum
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use transcript_domain::DecodedEvent;

    /// One run's events: `(type, path, payload, child)` lines of `run` (child of `parent`).
    fn events(
        run: &str,
        parent: Option<&str>,
        lines: &[(&str, &str, serde_json::Value, Option<&str>)],
    ) -> Vec<DecodedEvent> {
        lines
            .iter()
            .enumerate()
            .map(|(i, (ty, path, payload, child))| {
                let mut e = serde_json::json!({"seq": i + 1, "run_id": run, "type": ty,
                    "path": path, "iteration": 0,
                    "timestamp": format!("2026-05-28T10:00:{:02}.000Z", i), "payload": payload});
                if let Some(p) = parent {
                    e["parent_run_id"] = p.into();
                }
                if let Some(c) = child {
                    e["child_run_id"] = (*c).into();
                }
                transcript_domain::decode_line(e.to_string().as_bytes())
                    .unwrap()
                    .event
            })
            .collect()
    }

    const R: &str = "00000000-0000-4000-8000-00000000000";

    fn id(n: u8) -> String {
        format!("{R}{n:x}")
    }

    /// A run `n` (child of `parent`): `run.started` with `extra`, then agent steps with one
    /// turn each (`path`, input tokens, request) and calls (`path`, child run).
    fn run(
        n: u8,
        parent: Option<u8>,
        extra: serde_json::Value,
        steps: &[(&str, u64, Option<&str>, Option<u8>)],
    ) -> RunTurns {
        let (me, parent) = (id(n), parent.map(id));
        let children: Vec<Option<String>> = steps.iter().map(|s| s.3.map(id)).collect();
        let mut started = serde_json::json!({"name": "w", "kind": "workflow"});
        if let (Some(s), Some(e)) = (started.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let mut lines = vec![("run.started", "", started, None)];
        for ((path, input, request, _), child) in steps.iter().zip(&children) {
            let step = serde_json::json!({"name": path, "kind": "agent"});
            if let Some(c) = child {
                let call = serde_json::json!({"name": path, "kind": "call_workflow"});
                lines.push(("step.call_workflow.started", path, call, Some(c.as_str())));
                continue;
            }
            lines.push(("step.started", path, step.clone(), None));
            let mut m = serde_json::json!({"role": "assistant", "model": "m", "provider": "claude",
                "usage": {"input_tokens": input, "output_tokens": 1}, "blocks": []});
            if let Some(r) = request {
                m["request_id"] = (*r).into();
            }
            lines.push(("message.assistant", path, m, None));
            lines.push(("step.completed", path, step, None));
        }
        RunTurns::of(&events(&me, parent.as_deref(), &lines))
    }

    fn price(_: &str, u: &Usage) -> Option<f64> {
        u.input_tokens.map(|i| i as f64 * 0.01)
    }

    fn total(runs: &[&RunTurns]) -> Grouped {
        group_runs(runs, &mut |_| Origin::default(), &[GroupKey::Model], &price)
    }

    #[test]
    fn a_trial_bills_its_live_steps_and_the_children_they_called_and_a_replay_nothing() {
        // The recording ran what the trial runs (its children are not among the runs).
        let recording = run(
            1,
            None,
            serde_json::json!({}),
            &[
                ("a", 1, None, None),
                ("early", 0, None, Some(14)),
                ("b", 2, None, None),
                ("late", 0, None, Some(15)),
                ("c", 3, None, None),
            ],
        );
        let fork = serde_json::json!({"replay_of": id(1), "forked_at": "b"});
        let trial = run(
            2,
            None,
            fork,
            &[
                ("a", 10, None, None),
                ("early", 0, None, Some(3)),
                ("b", 100, None, None),
                ("late", 0, None, Some(4)),
                ("c", 1000, None, None),
            ],
        );
        let call = |p: &str, n: u8| ((p.to_owned(), 0), id(n));
        assert_eq!(trial.calls, [call("early", 3), call("late", 4)]);
        let alone = Spend::of(&[&trial]);
        let served: Vec<bool> = trial
            .turns
            .iter()
            .map(|t| !alone.bills(&trial.run_id, t))
            .collect();
        assert_eq!(served, [true, false, false]);
        let served_child = run(
            3,
            Some(2),
            serde_json::json!({}),
            &[("x", 10_000, None, None)],
        );
        let under_it = run(
            5,
            Some(3),
            serde_json::json!({}),
            &[("y", 20_000, None, None)],
        );
        let live_child = run(
            4,
            Some(2),
            serde_json::json!({}),
            &[("x", 40_000, None, None)],
        );
        let replay = run(
            6,
            None,
            serde_json::json!({"replay_of": id(1)}),
            &[("a", 1, None, Some(7))],
        );
        let replay_child = run(
            7,
            Some(6),
            serde_json::json!({}),
            &[("x", 80_000, None, None)],
        );
        let all = [
            &recording,
            &trial,
            &served_child,
            &under_it,
            &live_child,
            &replay,
            &replay_child,
        ];
        let spend = spend_runs(&all);
        let mut spend: Vec<&str> = spend.into_iter().collect();
        spend.sort_unstable();
        assert_eq!(spend, [id(1), id(2), id(4)]);
        let g = total(&all);
        assert_eq!(g.total.input_tokens, 1 + 2 + 3 + 100 + 1000 + 40_000);
        assert_eq!((g.total.runs, g.total.turns), (3, 6));
        assert_eq!(
            g.total.cost_usd,
            Some((1 + 2 + 3 + 100 + 1000 + 40_000) as f64 * 0.01)
        );

        // A trial that never reached its fork step was served whole.
        let short = run(
            8,
            None,
            serde_json::json!({"replay_of": id(1), "forked_at": "zz"}),
            &[("a", 10, None, None)],
        );
        assert_eq!(total(&[&short]).total.input_tokens, 0);
    }

    #[test]
    fn what_was_served_is_decided_in_the_recordings_order() {
        // The changed workflow added `extra` before the fork step `answer`: the recording
        // never ran it, so the fork ran it live and the bill counts it.
        let recording = run(
            1,
            None,
            serde_json::json!({}),
            &[("plan", 1, None, None), ("answer", 2, None, None)],
        );
        let trial = run(
            2,
            None,
            serde_json::json!({"replay_of": id(1), "forked_at": "answer"}),
            &[
                ("plan", 10, None, None),
                ("extra", 100, None, None),
                ("answer", 1000, None, None),
            ],
        );
        assert_eq!(
            total(&[&recording, &trial]).total.input_tokens,
            1 + 2 + 100 + 1000
        );
        // Without the recording, the trial's own order is all there is.
        assert_eq!(total(&[&trial]).total.input_tokens, 1000);
    }

    #[test]
    fn a_trial_forked_inside_a_child_run_bills_the_child_from_the_fork_on() {
        // call/b: the root's `a` was served, its `call` encloses the fork, `c` ran live; in
        // the child, `a2` was served (and the run its `early` called), `b` and `c2` ran live.
        let fork = serde_json::json!({"replay_of": id(1), "forked_at": "call/b"});
        let trial = run(
            9,
            None,
            fork,
            &[
                ("a", 10, None, None),
                ("call", 0, None, Some(10)),
                ("c", 100, None, None),
            ],
        );
        let child = run(
            10,
            Some(9),
            serde_json::json!({}),
            &[
                ("a2", 1_000, None, None),
                ("early", 0, None, Some(11)),
                ("b", 10_000, None, None),
                ("c2", 100_000, None, None),
            ],
        );
        let served_grandchild = run(11, Some(10), serde_json::json!({}), &[("z", 7, None, None)]);
        let all = [&trial, &child, &served_grandchild];
        let g = total(&all);
        assert_eq!(g.total.input_tokens, 100 + 10_000 + 100_000);
        assert_eq!((g.total.runs, g.total.turns), (2, 3));
        // The child's fork level never ran: the child was served whole there.
        let lost = run(
            12,
            None,
            serde_json::json!({"replay_of": id(1), "forked_at": "call/zz"}),
            &[
                ("a", 10, None, None),
                ("call", 0, None, Some(13)),
                ("c", 100, None, None),
            ],
        );
        let lost_child = run(
            13,
            Some(12),
            serde_json::json!({}),
            &[("b", 10_000, None, None)],
        );
        assert_eq!(total(&[&lost, &lost_child]).total.input_tokens, 100);
    }

    #[test]
    fn a_request_two_runs_repeat_is_billed_once_whatever_order_the_runs_come_in() {
        let a = run(
            1,
            None,
            serde_json::json!({}),
            &[("s", 50, Some("msg_1/req_1"), None)],
        );
        let b = run(
            2,
            None,
            serde_json::json!({}),
            &[("s", 50, Some("msg_1/req_1"), None), ("t", 7, None, None)],
        );
        let one = total(&[&a, &b]);
        assert_eq!(one, total(&[&b, &a]));
        assert_eq!(
            (one.duplicates, one.total.turns, one.total.input_tokens),
            (1, 2, 57)
        );
        let groups = &one.groups[0].1;
        assert_eq!(
            (groups.len(), groups[0].key.as_str(), groups[0].turns),
            (1, "m", 2)
        );
        // Keyed as asked, each grouping summing the same.
        let keys = [
            GroupKey::Day,
            GroupKey::Session,
            GroupKey::Project,
            GroupKey::Workflow,
        ];
        let mut origin = |r: &RunTurns| Origin {
            session: Some(format!("s-{}", &r.run_id[34..])),
            project: None,
            sidechain: false,
        };
        let g = group_runs(&[&a, &b], &mut origin, &keys, &price);
        let names: Vec<Vec<&str>> = g
            .groups
            .iter()
            .map(|(_, gs)| gs.iter().map(|x| x.key.as_str()).collect())
            .collect();
        assert_eq!(
            names,
            [
                vec!["2026-05-28"],
                vec!["s-01", "s-02"],
                vec!["w"],
                vec!["w"]
            ]
        );
        for (_, gs) in &g.groups {
            assert_eq!(
                gs.iter()
                    .map(|x| x.usage.input_tokens.unwrap_or(0))
                    .sum::<u64>(),
                57
            );
        }
    }
}
