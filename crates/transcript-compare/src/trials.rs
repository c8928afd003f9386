//! What if: the report of the trials of a recorded run forked at a step (#61). Each trial is a
//! run of its own: its first divergence from the recording (the first step, in the run's
//! order, whose comparison differs, and the turn when a turn differs), its expectations'
//! outcomes, the cost of its live part and its time; the report sums them up: passed k of K
//! (pass^K: every trial passed), where the trials diverged, what their live parts cost against
//! what the recording's live part cost, and what the replayed prefix saved.

use std::collections::BTreeMap;

use serde::Serialize;

pub use crate::divergence::{Divergence, first_divergence};
use transcript_domain::fork::ForkSide;

use crate::{DiffDocument, Expectations, Outcome, RunRecord};

/// One trial, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trial {
    /// Its run id.
    pub run_id: String,
    /// How it ended (`succeeded`, `failed`, `cancelled`, `incomplete`).
    pub status: String,
    /// Where it first differs from the recording; `None`: the same as recorded.
    pub divergence: Option<Divergence>,
    /// Its expectations' outcomes (empty without expectations).
    pub outcomes: Vec<Outcome>,
    /// Whether it passed: every expectation held (without expectations: it ran).
    pub passed: bool,
    /// The cost of its live part (`None`: a turn could not be priced).
    pub live_cost_usd: Option<f64>,
    /// Its duration in milliseconds, when it ended.
    pub duration_ms: Option<i64>,
}

/// What a fork did with a step execution, by its chain (the calling steps' `(path,
/// iteration)` from the root run down, then its own): transcript-domain's
/// [`ForkPrefix::side`](transcript_domain::fork::ForkPrefix::side) is one.
pub type LivePart<'a> = &'a dyn Fn(&[(String, u64)]) -> ForkSide;

/// The cost of `run`'s step executions the fork put on side `keep` (`Live`: the trial's live
/// part; `Replayed`: the prefix), each nested step by its own side, a call's child run by the
/// call's (followed into when the call encloses the fork); `None` when one of their turns
/// could not be priced. An enclosing step's own turns (a block has none) count as live.
pub fn part_cost(run: &RunRecord, side: LivePart<'_>, keep: ForkSide) -> Option<f64> {
    fn steps(
        list: &[crate::StepRecord],
        above: &[(String, u64)],
        side: LivePart<'_>,
        keep: ForkSide,
    ) -> Option<f64> {
        let mut sum = 0.0;
        for s in list {
            let mut chain = above.to_vec();
            chain.push((s.path.clone(), s.iteration));
            // A block's nested steps and a call's child run are billed by their own side (a
            // parallel block may have started before the fork while a branch of it runs live);
            // a call that is all served or all live takes its child run with it.
            let here = side(&chain);
            let own = match (here, keep) {
                (ForkSide::Encloses, ForkSide::Live) => s.spend.cost_usd?,
                (found, _) if found == keep => s.spend.cost_usd?,
                _ => 0.0,
            };
            let child = match (&s.child, here) {
                (Some(c), ForkSide::Encloses) => steps(&c.steps, &chain, side, keep)?,
                (Some(c), found) if found == keep => c.spend.cost_usd?,
                _ => 0.0,
            };
            let cost = own + steps(&s.steps, above, side, keep)? + child;
            sum += cost;
        }
        Some(sum)
    }
    steps(&run.steps, &[], side, keep)
}

impl Trial {
    /// Judges `trial` (compared with its recording in `doc`) against `expectations`.
    pub fn judge(
        trial: &RunRecord,
        doc: &DiffDocument,
        expectations: Option<&Expectations>,
        live: LivePart<'_>,
    ) -> Trial {
        let outcomes = expectations.map_or_else(Vec::new, |e| crate::check(trial, e));
        Trial {
            run_id: trial.run_id.to_string(),
            status: trial.status.as_str().to_owned(),
            divergence: doc.divergence.clone(),
            // Without expectations a trial passes when its run succeeded (one that failed, in
            // its served part or live, did not); with them, when every one holds (they may
            // expect a failure).
            passed: match expectations {
                None => trial.status == transcript_domain::tree::Status::Succeeded,
                Some(_) => outcomes.iter().all(|o| o.passed),
            },
            outcomes,
            live_cost_usd: part_cost(trial, live, ForkSide::Live),
            duration_ms: trial.duration_ms,
        }
    }
}

/// The trials of one fork, summed up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialsReport {
    /// The recording's run id.
    pub recording: String,
    /// The step the trials forked at.
    pub forked_at: String,
    /// Each trial, in the order they ran.
    pub trials: Vec<Trial>,
    /// How many passed.
    pub passed: usize,
    /// pass^K: every trial passed.
    pub all_passed: bool,
    /// Where the trials first diverged: step → how many (`same as recorded` for none).
    pub divergence: BTreeMap<String, usize>,
    /// The trials' live parts, summed (`None` when one is unknown).
    pub live_cost_usd: Option<f64>,
    /// What the recording's live part cost (the steps the trials ran live).
    pub recording_live_cost_usd: Option<f64>,
    /// What the replayed prefix would have cost the trials live: the recording's prefix times
    /// the number of trials.
    pub saved_cost_usd: Option<f64>,
}

impl TrialsReport {
    /// The report of `trials` of `recording` forked at `forked_at`.
    pub fn new(
        recording: &RunRecord,
        forked_at: &str,
        trials: Vec<Trial>,
        live: LivePart<'_>,
    ) -> Self {
        let mut divergence = BTreeMap::new();
        for t in &trials {
            let key = t
                .divergence
                .as_ref()
                .map_or_else(|| "same as recorded".to_owned(), |d| d.step.clone());
            *divergence.entry(key).or_insert(0) += 1;
        }
        let passed = trials.iter().filter(|t| t.passed).count();
        let live_cost_usd = trials
            .iter()
            .map(|t| t.live_cost_usd)
            .try_fold(0.0, |sum, c| c.map(|c| sum + c));
        let prefix = part_cost(recording, live, ForkSide::Replayed);
        TrialsReport {
            recording: recording.run_id.to_string(),
            forked_at: forked_at.to_owned(),
            all_passed: passed == trials.len(),
            passed,
            divergence,
            live_cost_usd,
            recording_live_cost_usd: part_cost(recording, live, ForkSide::Live),
            saved_cost_usd: prefix.map(|c| c * trials.len() as f64),
            trials,
        }
    }

    /// JUnit XML: one test case per trial and expectation (`trial N: <scope>`), one per trial
    /// without expectations (`trial N`, `ran`); `expectations` names the file.
    pub fn junit_xml(&self, expectations: &str) -> String {
        let mut cases = Vec::new();
        for (i, t) in self.trials.iter().enumerate() {
            if t.outcomes.is_empty() {
                cases.push(Outcome {
                    scope: format!("trial {}", i + 1),
                    expectation: "ran".to_owned(),
                    line: 0,
                    passed: t.passed,
                    errored: false,
                    detail: t.status.clone(),
                });
            }
            for o in &t.outcomes {
                let mut o = o.clone();
                o.scope = format!("trial {}: {}", i + 1, o.scope);
                cases.push(o);
            }
        }
        crate::junit_xml(&self.recording, expectations, &cases)
    }

    /// The report as text: a line per trial, then the summary.
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let money =
            |c: Option<f64>| c.map_or_else(|| "unknown".to_owned(), |c| crate::usd(Some(c)));
        let mut out = String::new();
        for (i, t) in self.trials.iter().enumerate() {
            let diverged = t.divergence.as_ref().map_or_else(
                || "same as recorded".to_owned(),
                |d| format!("diverged at {d}"),
            );
            let failed: Vec<String> = (t.outcomes.iter().filter(|o| !o.passed))
                .map(|o| format!("{} {}", o.scope, o.expectation))
                .collect();
            let verdict = match (t.passed, failed.is_empty()) {
                (true, _) => "pass".to_owned(),
                (false, _) => format!("FAIL ({})", failed.join("; ")),
            };
            let _ = writeln!(
                out,
                "trial {}: {} {}, {verdict}, {}, live part {}, {}",
                i + 1,
                t.run_id,
                t.status,
                diverged,
                money(t.live_cost_usd),
                t.duration_ms.map_or_else(
                    || "time unknown".to_owned(),
                    |ms| format!("{:.1} s", ms as f64 / 1000.0)
                )
            );
        }
        let k = self.trials.len();
        let _ = writeln!(
            out,
            "passed {} of {k} (pass^{k}: {}); forked at {}",
            self.passed,
            if self.all_passed { "yes" } else { "no" },
            self.forked_at
        );
        let spread: Vec<String> = (self.divergence.iter())
            .map(|(step, n)| format!("{step} ×{n}"))
            .collect();
        let _ = writeln!(out, "first divergence: {}", spread.join(", "));
        let _ = writeln!(
            out,
            "cost: trials' live parts {} (the recording's live part {}); the replayed prefix saved {}",
            money(self.live_cost_usd),
            money(self.recording_live_cost_usd),
            money(self.saved_cost_usd)
        );
        out
    }
}
