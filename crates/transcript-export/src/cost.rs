//! Pricing an export document (issue #29): every billed turn priced with the caller's price
//! function by the receipts' own code ([`crate::priced_receipts`]: one request, one bill,
//! each turn under its own model, else its step's), its cost set on the turn, summed per step
//! and per run, and the per-model totals in [`ExportDocument::cost`]. A turn whose model has
//! no price leaves every sum it belongs to unset (shown `—`, never $0) and is named in
//! [`CostSummary::unpriced_models`].

use std::collections::HashMap;

use transcript_domain::bill::{CostSum, PriceFn};

use crate::model::{CostSummary, Entry, ExportDocument, ModelCost, RunExport, StepExport};
use crate::receipts::priced_receipts;

/// Prices `doc` with `price` (the CLI passes the providers crate's `Pricing::cost`);
/// `table` names the price table in the document (e.g. `LiteLLM 1.110.2`).
pub fn price_document(doc: &mut ExportDocument, price: &PriceFn<'_>, table: &str) {
    let receipts = priced_receipts(doc, price);
    let mut turns: HashMap<(&str, u64), Option<f64>> = HashMap::new();
    for r in &receipts.receipts {
        for t in &r.turn_costs {
            turns.insert((r.run_id.as_str(), t.seq), t.cost_usd);
        }
    }
    let runs: HashMap<&str, Option<f64>> = receipts
        .per_run
        .iter()
        .map(|t| (t.run_id.as_str(), t.cost_usd))
        .collect();
    let costs = Costs { turns, runs };
    costs.run(&mut doc.run);
    doc.cost = Some(CostSummary {
        price_table: table.to_owned(),
        total_usd: receipts.cost_usd,
        reported_usd: receipts.total.cost_usd,
        by_model: receipts
            .by_model
            .iter()
            .map(|m| ModelCost {
                model: m.model.clone(),
                turns: m.turns,
                usage: m.usage.clone(),
                cost_usd: m.cost_usd,
            })
            .collect(),
        unpriced_models: receipts.unpriced_models.clone(),
    });
}

/// The receipts' figures, by (run id, seq) for turns and by run id for runs.
struct Costs<'r> {
    turns: HashMap<(&'r str, u64), Option<f64>>,
    runs: HashMap<&'r str, Option<f64>>,
}

impl Costs<'_> {
    fn run(&self, run: &mut RunExport) {
        run.cost_usd = self.runs.get(run.run_id.as_str()).copied().flatten();
        for step in &mut run.steps {
            self.step(&run.run_id, step);
        }
    }

    /// A step's turns, its own cost (the sum of its own billed turns, as its usage is), its
    /// nested steps and child run.
    fn step(&self, run_id: &str, step: &mut StepExport) {
        let mut sum = CostSum::default();
        for entry in &mut step.entries {
            if let Entry::Message(m) = entry
                && let Some(cost) = self.turns.get(&(run_id, m.seq))
            {
                m.cost_usd = *cost;
                sum.add(*cost);
            }
        }
        step.cost_usd = sum.get();
        for child in &mut step.steps {
            self.step(run_id, child);
        }
        if let Some(child) = &mut step.child_run {
            self.run(child);
        }
    }
}
