//! What an import added, in tokens and dollars (issue #29 item 4): the usage of the
//! `message.assistant` turns it wrote (for a grown session file, only what this import
//! appended), each turn priced by the embedded LiteLLM table as `receipts` prices it. A turn
//! whose model the table lacks (or that names none) makes the cost unknown, shown `—`, and
//! its model is warned about once, never priced $0.

use std::collections::BTreeSet;

use transcript_domain::{MessagePayload, Usage};
use transcript_providers::Pricing;

/// The tokens and cost of the turns one import (or several) wrote.
#[derive(Debug, Clone, Default)]
pub struct ImportBill {
    /// Turns with usage.
    pub turns: u64,
    /// Their usage, summed.
    pub usage: Usage,
    /// Their priced cost; `None` once a turn could not be priced (or none had usage).
    pub cost_usd: Option<f64>,
    /// Models the table cannot price (`(none)` for turns naming no model).
    pub unpriced: BTreeSet<String>,
}

impl ImportBill {
    /// Adds one written turn.
    pub fn add(&mut self, m: &MessagePayload, table: &Pricing) {
        let Some(u) = m.usage.as_ref().filter(|u| !u.is_empty()) else {
            return;
        };
        let priced = match m.model.as_deref() {
            Some(model) => {
                let c = table.cost(model, u).map(|c| c.usd);
                if c.is_none() {
                    self.unpriced.insert(model.to_owned());
                }
                c
            }
            None => {
                self.unpriced
                    .insert(transcript_domain::bill::NO_MODEL.to_owned());
                None
            }
        };
        self.cost_usd = match (self.turns, self.cost_usd, priced) {
            (0, _, p) => p,
            (_, Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.turns += 1;
        self.usage.accumulate(u);
    }

    /// Adds another import's bill.
    pub fn merge(&mut self, other: &ImportBill) {
        if other.turns == 0 {
            self.unpriced.extend(other.unpriced.iter().cloned());
            return;
        }
        self.cost_usd = match (self.turns, self.cost_usd, other.cost_usd) {
            (0, _, c) => c,
            (_, Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.turns += other.turns;
        self.usage.accumulate(&other.usage);
        self.unpriced.extend(other.unpriced.iter().cloned());
    }

    /// `input N, output N, cache read N, cache write N, reasoning N, cost $X` (`—` for a
    /// count not reported and for an unknown cost).
    pub fn describe(&self) -> String {
        let n = |v: Option<u64>| v.map_or("—".to_owned(), |v| v.to_string());
        let u = &self.usage;
        let cost = match (self.turns, self.cost_usd) {
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

    /// One warning per model the embedded table cannot price, worded as `receipts` words
    /// it (not shared with `cmd::receipts`, which reads the import index: no module circle).
    pub fn warn(&self) {
        for m in &self.unpriced {
            if m == transcript_domain::bill::NO_MODEL {
                crate::diag!(
                    "transcript: warning: some turns name no model: their cost shows — (set the step's model:)"
                );
                continue;
            }
            crate::diag!(
                "transcript: warning: no price for model {} in the embedded LiteLLM {} table: its cost shows — (pass --pricing FILE to receipts)",
                crate::style::one_line(m),
                transcript_providers::LITELLM_VERSION
            );
        }
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
        assert!(b.cost_usd.is_some_and(|c| c > 0.0));
        b.add(&turn(Some("no-such-model-x"), 10, 1), table);
        assert_eq!(b.cost_usd, None);
        assert!(b.describe().ends_with("cost —"), "{}", b.describe());
        assert_eq!(
            b.unpriced.iter().collect::<Vec<_>>(),
            vec!["no-such-model-x"]
        );
        assert_eq!(b.usage.input_tokens, Some(1010));
    }
}
