//! What an import added, in tokens and dollars (issue #29 item 4): the usage of the
//! `message.assistant` turns it wrote (for a grown session file, only what this import
//! appended), each turn priced by the embedded LiteLLM table under the one billing rule every
//! report uses ([`transcript_domain::bill::billed_model`]: the turn's own model, else its
//! step's, the one model its other turns name). A turn whose model the table lacks (or that
//! names none in a step without a single model) makes the cost unknown, shown `—`, and its
//! model is warned about once, never priced $0.

use std::collections::BTreeSet;

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
}

impl ImportBill {
    /// Adds one written turn of this run.
    pub fn add(&mut self, m: &MessagePayload, table: &Pricing) {
        let Some(u) = m.usage.as_ref().filter(|u| !u.is_empty()) else {
            return;
        };
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

    /// Adds another run's bill (settled first).
    pub fn merge(&mut self, other: &ImportBill) {
        let other = other.settled(Pricing::embedded());
        self.cost.merge(other.cost);
        self.turns += other.turns;
        self.usage.accumulate(&other.usage);
        self.unpriced.extend(other.unpriced.iter().cloned());
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
        assert_eq!(run.cost_usd(), Some(2.0 * one));
        let mut total = ImportBill::default();
        total.merge(&run);
        assert_eq!(total.cost_usd(), Some(2.0 * one));
        assert!(total.unpriced.is_empty(), "{:?}", total.unpriced);

        // Two models: the model-less turn has no step model, so the cost is unknown.
        run.add(&turn(Some("gemini-2.5-flash"), 10, 1), table);
        assert_eq!(run.cost_usd(), None);
        total = ImportBill::default();
        total.merge(&run);
        assert_eq!(total.unpriced.iter().collect::<Vec<_>>(), vec![NO_MODEL]);
    }
}
