//! Billed turns grouped by a caller's key (`transcript receipts --by day|month|session|
//! project|model`), and the table they print as: the one home of that layout (the CLI
//! computes the keys, this module sums, prices and renders).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use transcript_domain::Usage;
use transcript_domain::bill::PriceFn;

use crate::billed::BilledTurn;
use crate::render_util::{count, usd};

/// One group of billed turns.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Group {
    /// Day, month, session, project or model.
    pub key: String,
    /// Runs with a billed turn in the group.
    pub runs: u64,
    /// Requests billed (turns that reported usage, a request split over several turns
    /// counted once: [`crate::requests`]).
    pub turns: u64,
    /// Summed usage (`cost_usd`: what the CLIs reported).
    pub usage: Usage,
    /// Cost from the price table (`None`: a model without a price).
    pub cost_usd: Option<f64>,
    /// Models seen.
    pub models: Vec<String>,
    #[serde(skip)]
    unknown: bool,
    #[serde(skip)]
    last_run: String,
}

/// Billed turns being grouped, each priced with `price` under the model it is billed under.
pub struct Groups<'p> {
    price: &'p PriceFn<'p>,
    groups: BTreeMap<String, Group>,
    unpriced: BTreeSet<String>,
}

impl<'p> Groups<'p> {
    /// No group yet; turns will be priced with `price`.
    pub fn new(price: &'p PriceFn<'p>) -> Self {
        Self {
            price,
            groups: BTreeMap::new(),
            unpriced: BTreeSet::new(),
        }
    }

    /// One billed turn of `run_id` (turns of a run arrive together) in the group `key`,
    /// priced under the model it is billed under ([`crate::billed_turns`]: the rule `receipts`
    /// prices by, so every grouping totals what `receipts` does).
    pub fn add(&mut self, key: String, run_id: &str, turn: &BilledTurn<'_>) {
        self.add_usage(key, run_id, (turn.model, turn.usage), true);
    }

    /// [`Groups::add`] of a turn's model and usage; `new_request`: whether it is the first
    /// billed turn of its request (the turns column counts requests, not records:
    /// [`crate::requests::Kept::first`]).
    pub fn add_usage(
        &mut self,
        key: String,
        run_id: &str,
        (model, usage): (&str, &Usage),
        new_request: bool,
    ) {
        let g = self.groups.entry(key.clone()).or_insert_with(|| Group {
            key,
            ..Group::default()
        });
        if g.last_run != run_id {
            g.runs += 1;
            g.last_run = run_id.to_owned();
        }
        g.turns += u64::from(new_request);
        g.usage.accumulate(usage);
        match (self.price)(model, usage) {
            Some(c) => {
                // Summed exactly: the same total in any order, on any storage.
                g.cost_usd = Some(transcript_domain::bill::add_usd(
                    g.cost_usd.unwrap_or(0.0),
                    c,
                ));
            }
            None => {
                g.unknown = true;
                self.unpriced.insert(model.to_owned());
            }
        }
        if !g.models.iter().any(|m| m == model) {
            g.models.push(model.to_owned());
        }
    }

    /// The groups in key order (a group with an unpriced turn has no cost), and the models
    /// without a price.
    pub fn finish(self) -> (Vec<Group>, Vec<String>) {
        let groups = self
            .groups
            .into_values()
            .map(|mut g| {
                if g.unknown {
                    g.cost_usd = None;
                }
                g.models.sort();
                g
            })
            .collect();
        (groups, self.unpriced.into_iter().collect())
    }
}

/// The grouped table: a header whose first column is `label` (`day`, `model`...), then one
/// line per group.
pub fn render_groups(label: &str, groups: &[Group]) -> String {
    let n = count;
    let mut s = format!(
        "{:<38} {:>5} {:>6} {:>10} {:>10} {:>12} {:>12} {:>10} {:>10} {:>10}  models\n",
        label,
        "runs",
        "turns",
        "input",
        "output",
        "cache_read",
        "cache_write",
        "reasoning",
        "cost",
        "reported"
    );
    for g in groups {
        s.push_str(&format!(
            "{:<38} {:>5} {:>6} {:>10} {:>10} {:>12} {:>12} {:>10} {:>10} {:>10}  {}\n",
            g.key,
            g.runs,
            g.turns,
            n(g.usage.input_tokens),
            n(g.usage.output_tokens),
            n(g.usage.cache_read_tokens),
            n(g.usage.cache_write_tokens),
            n(g.usage.reasoning_tokens),
            usd(g.cost_usd),
            usd(g.usage.cost_usd),
            g.models.join(",")
        ));
    }
    s
}
