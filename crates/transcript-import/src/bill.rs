//! What an import added, in tokens and dollars (issue #29 item 4): the usage of the
//! `message.assistant` turns it wrote (for a grown session file, only what this import
//! appended), each turn priced by the embedded LiteLLM table under the one billing rule every
//! report uses ([`transcript_domain::bill::billed_model`]: the turn's own model, else its
//! step's, the one model its other turns name). A turn whose model the table lacks (or that
//! names none in a step without a single model) makes the cost unknown, shown `—`, and its
//! model is warned about once, never priced $0.
//!
//! One request, one bill (#59 item 5, as `receipts` bills, wire decision 17): the turns of one
//! run that carry a request id are that run's copy of the request; when bills of several runs
//! are merged (an import's total), a request another merged run already billed is set aside
//! and counted in [`ImportBill::duplicates`] (a resumed session file repeating its earlier
//! requests). A Claude `<message.id>/<requestId>` is one request wherever it is; any other
//! request id is one within its session file.

use std::collections::BTreeSet;
use std::path::Path;

use transcript_domain::bill::{CostSum, NO_MODEL, billed_model, step_model};
use transcript_domain::{MessagePayload, Usage};
use transcript_providers::Pricing;

/// The tokens and cost of the turns one import (or several) wrote.
///
/// An imported run is one step, so a turn naming no model is billed under the model the
/// run's other turns name; until the run is complete ([`ImportBill::settled`]) such turns
/// wait unpriced.
#[derive(Debug, Clone, Default)]
pub struct ImportBill {
    /// Turns with usage.
    pub turns: u64,
    /// Their usage, summed.
    pub usage: Usage,
    /// The priced cost of the settled turns (unknown once one could not be priced).
    cost: CostSum,
    /// Models the table cannot price (`(none)` for turns billed under no model).
    pub unpriced: BTreeSet<String>,
    /// The models this run's turns name (for the turns that name none).
    models: BTreeSet<String>,
    /// Usage of this run's turns that name no model, priced when the run is settled.
    unnamed: Vec<Usage>,
    /// Every turn added to this run's bill: its request key and model, for a merge.
    entries: Vec<Entry>,
    /// The session file the run was imported from: the scope of a request id that is not
    /// global.
    scope: String,
    /// The request keys of every bill merged in.
    keys: BTreeSet<String>,
    /// Turns of merged bills set aside: their request was billed by another merged run.
    pub duplicates: u64,
}

/// One billed turn of a run: its request's key (`None`: its own bill) and model.
#[derive(Debug, Clone)]
struct Entry {
    key: Option<String>,
    model: Option<String>,
    usage: Usage,
}

impl ImportBill {
    /// The bill of a run imported from the session file `source` (the scope of its request
    /// ids that are not global).
    pub fn of_session(source: &Path) -> Self {
        Self {
            scope: source.display().to_string(),
            ..Self::default()
        }
    }

    /// Adds one written turn of this run.
    pub fn add(&mut self, m: &MessagePayload, table: &Pricing) {
        let Some(u) = m.usage.as_ref().filter(|u| !u.is_empty()) else {
            return;
        };
        self.entries.push(Entry {
            key: m.request_id.as_deref().map(|id| {
                if id.contains('/') {
                    id.to_owned()
                } else {
                    format!("{}\u{1f}{id}", self.scope)
                }
            }),
            model: m.model.clone(),
            usage: u.clone(),
        });
        match m.model.as_deref() {
            Some(model) => {
                self.models.insert(model.to_owned());
                self.price(model, u, table);
            }
            None => self.unnamed.push(u.clone()),
        }
        self.turns += 1;
        self.usage.accumulate(u);
    }

    fn price(&mut self, model: &str, u: &Usage, table: &Pricing) {
        let c = table.cost(model, u).map(|c| c.usd);
        if c.is_none() {
            self.unpriced.insert(model.to_owned());
        }
        self.cost.add(c);
    }

    /// This run's bill with its model-less turns priced under the run's one model (or
    /// unknown, under `(none)`, when its turns name none or several).
    pub fn settled(&self, table: &Pricing) -> ImportBill {
        let mut out = self.clone();
        let unnamed = std::mem::take(&mut out.unnamed);
        let model = billed_model(
            None,
            step_model(self.models.iter().map(|m| Some(m.as_str()))),
        );
        for u in &unnamed {
            if model == NO_MODEL {
                out.unpriced.insert(NO_MODEL.to_owned());
                out.cost.add(None);
            } else {
                out.price(model, u, table);
            }
        }
        out
    }

    /// Adds another run's bill (settled first), but for the turns of a request a bill merged
    /// before billed (counted in [`ImportBill::duplicates`]).
    pub fn merge(&mut self, other: &ImportBill) {
        let table = Pricing::embedded();
        let theirs: BTreeSet<String> = other.entries.iter().filter_map(|e| e.key.clone()).collect();
        if theirs.is_disjoint(&self.keys) {
            let other = other.settled(table);
            self.cost.merge(other.cost);
            self.turns += other.turns;
            self.usage.accumulate(&other.usage);
            self.unpriced.extend(other.unpriced.iter().cloned());
        } else {
            let run_model = billed_model(
                None,
                step_model(other.models.iter().map(|m| Some(m.as_str()))),
            );
            for e in &other.entries {
                if e.key.as_ref().is_some_and(|k| self.keys.contains(k)) {
                    self.duplicates += 1;
                    continue;
                }
                let model = e.model.as_deref().unwrap_or(run_model);
                if model == NO_MODEL {
                    self.unpriced.insert(NO_MODEL.to_owned());
                    self.cost.add(None);
                } else {
                    self.price(model, &e.usage, table);
                }
                self.turns += 1;
                self.usage.accumulate(&e.usage);
            }
        }
        self.duplicates += other.duplicates;
        self.keys.extend(theirs);
    }

    /// The cost of every turn, `None` when one could not be priced (or none had usage).
    pub fn cost_usd(&self) -> Option<f64> {
        self.settled(Pricing::embedded()).cost.get()
    }

    /// `input N, output N, cache read N, cache write N, reasoning N, cost $X` (`—` for a
    /// count not reported and for an unknown cost).
    pub fn describe(&self) -> String {
        let n = |v: Option<u64>| v.map_or("—".to_owned(), |v| v.to_string());
        let u = &self.usage;
        let cost = match (self.turns, self.cost_usd()) {
            (0, _) => "$0 (no billed turns)".to_owned(),
            // Six decimals: a small import's cost must not read as $0.0000.
            (_, Some(c)) => format!("${c:.6}"),
            (_, None) => "—".to_owned(),
        };
        format!(
            "tokens: input {}, output {}, cache read {}, cache write {}, reasoning {}; cost {cost}",
            n(u.input_tokens),
            n(u.output_tokens),
            n(u.cache_read_tokens),
            n(u.cache_write_tokens),
            n(u.reasoning_tokens),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript_domain::Role;

    fn turn(model: Option<&str>, input: u64, output: u64) -> MessagePayload {
        let mut m = MessagePayload::new(Role::Assistant, Vec::new());
        m.model = model.map(str::to_owned);
        m.usage = Some(Usage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..Usage::default()
        });
        m
    }

    fn request(id: &str, input: u64) -> MessagePayload {
        let mut m = turn(Some("claude-sonnet-4-5"), input, 10);
        m.request_id = Some(id.to_owned());
        m
    }

    #[test]
    fn a_request_another_merged_run_billed_is_set_aside() {
        let table = Pricing::embedded();
        let mut first = ImportBill::of_session(Path::new("/p/s1.jsonl"));
        first.add(&request("msg_1/req_1", 1000), table);
        first.add(&request("msg_1/req_1", 0), table); // the same request, split over turns
        first.add(&request("msg_2/req_2", 500), table);
        // A resumed session repeats msg_1 and adds msg_3; its own id `r1` is another session's.
        let mut resumed = ImportBill::of_session(Path::new("/p/s2.jsonl"));
        resumed.add(&request("msg_1/req_1", 1000), table);
        resumed.add(&request("msg_3/req_3", 200), table);
        resumed.add(&request("r1", 50), table);
        let mut other = ImportBill::of_session(Path::new("/p/s3.jsonl"));
        other.add(&request("r1", 50), table);
        let mut total = ImportBill::default();
        for b in [&first, &resumed, &other] {
            total.merge(b);
        }
        assert_eq!(total.duplicates, 1);
        assert_eq!(total.turns, 6);
        assert_eq!(total.usage.input_tokens, Some(1000 + 500 + 200 + 50 + 50));
        let alone = |b: &ImportBill| b.cost_usd().unwrap();
        let expected = alone(&first) + alone(&other) + alone(&resumed) - {
            let mut dup = ImportBill::default();
            dup.add(&request("x/y", 1000), table);
            alone(&dup)
        };
        assert!((total.cost_usd().unwrap() - expected).abs() < 1e-12);
    }

    #[test]
    fn an_unknown_model_makes_the_cost_unknown_never_zero() {
        let table = Pricing::embedded();
        let mut b = ImportBill::default();
        b.add(&turn(Some("gemini-2.5-pro"), 1000, 100), table);
        assert!(b.cost_usd().is_some_and(|c| c > 0.0));
        b.add(&turn(Some("no-such-model-x"), 10, 1), table);
        assert_eq!(b.cost_usd(), None);
        assert!(b.describe().ends_with("cost —"), "{}", b.describe());
        assert_eq!(
            b.unpriced.iter().collect::<Vec<_>>(),
            vec!["no-such-model-x"]
        );
        assert_eq!(b.usage.input_tokens, Some(1010));
    }

    #[test]
    fn a_turn_naming_no_model_is_billed_under_the_runs_one_model_as_every_report_bills_it() {
        let table = Pricing::embedded();
        let mut run = ImportBill::default();
        run.add(&turn(None, 1000, 100), table);
        run.add(&turn(Some("gemini-2.5-pro"), 1000, 100), table);
        let one = table
            .cost(
                "gemini-2.5-pro",
                turn(None, 1000, 100).usage.as_ref().unwrap(),
            )
            .unwrap()
            .usd;
        let two = transcript_domain::bill::add_usd(one, one);
        assert_eq!(run.cost_usd(), Some(two));
        let mut total = ImportBill::default();
        total.merge(&run);
        assert_eq!(total.cost_usd(), Some(two));
        assert!(total.unpriced.is_empty(), "{:?}", total.unpriced);

        // Two models: the model-less turn has no step model, so the cost is unknown.
        run.add(&turn(Some("gemini-2.5-flash"), 10, 1), table);
        assert_eq!(run.cost_usd(), None);
        total = ImportBill::default();
        total.merge(&run);
        assert_eq!(total.unpriced.iter().collect::<Vec<_>>(), vec![NO_MODEL]);
    }
}
