//! A run's bill as the list and the receipts show it ([`Bill`]): its own billed turns (child
//! runs are runs of their own) as transcript-export reads them for every grouped bill
//! ([`RunTurns`]: each under the model it is billed under, the rule every report bills by),
//! priced by the caller's function, and the tokens and models they sum to. [`Summaries`]
//! caches bills by run and event count, so a finished run is read once and a running run
//! again only when it grew.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use transcript_domain::run_store::{RunStore, StoredRun};
use transcript_domain::{DecodedEvent, RunId, Seq};
use transcript_export::{ExportOptions, RunTurns, build_document};

use crate::ViewerError;
use crate::config::Price;

/// A run's own bill.
#[derive(Debug, Clone, Default)]
pub struct Bill {
    /// Summed cost; `None` when a turn has no price (shown `—`, never $0) or nothing priced.
    pub cost_usd: Option<f64>,
    /// Input plus output tokens.
    pub tokens: u64,
    /// Models billed, sorted.
    pub models: Vec<String>,
    /// The run and each billed request, as `/receipts` groups them (a trial's served turns
    /// are among them, marked).
    pub run: RunTurns,
}

impl Bill {
    /// The bill of `events` (one run's own, no child run), priced with `price`: every billed
    /// turn (the list shows what a run recorded; `/receipts` bills spend only).
    pub fn of(events: &[DecodedEvent], price: Option<&Price>) -> Bill {
        let doc = build_document(events, &mut |_| None, &ExportOptions::default());
        let run = RunTurns::of_document(&doc, events);
        let mut bill = Bill::default();
        let mut unpriced = false;
        let mut cost = 0.0;
        for turn in &run.turns {
            match price.and_then(|p| p(&turn.model, &turn.usage)) {
                Some(c) => cost += c,
                None => unpriced = true,
            }
            bill.tokens +=
                turn.usage.input_tokens.unwrap_or(0) + turn.usage.output_tokens.unwrap_or(0);
        }
        bill.cost_usd = (price.is_some() && !unpriced).then_some(cost);
        let mut models: Vec<String> = run.turns.iter().map(|t| t.model.clone()).collect();
        models.sort();
        models.dedup();
        bill.models = models;
        bill.run = run;
        bill
    }

    /// This bill plus `other`'s (a run with its child runs).
    pub fn add(&mut self, other: &Bill) {
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.tokens += other.tokens;
        for m in &other.models {
            if !self.models.contains(m) {
                self.models.push(m.clone());
            }
        }
        self.models.sort();
    }
}

/// Bills by run, valid while the run has the same number of events.
#[derive(Default)]
pub struct Summaries {
    cache: Mutex<HashMap<RunId, (Seq, Arc<Bill>)>>,
}

impl Summaries {
    /// The bill of `run` (read from `store` unless cached for its event count).
    pub fn get(
        &self,
        store: &dyn RunStore,
        price: Option<&Price>,
        run: &StoredRun,
    ) -> Result<Arc<Bill>, ViewerError> {
        if let Some((events, bill)) = self.lock().get(&run.run_id)
            && *events == run.events
        {
            return Ok(bill.clone());
        }
        let read = crate::read::read_run(store, run.run_id)?;
        let bill = Arc::new(read.map_or_else(Bill::default, |r| Bill::of(&r.events, price)));
        self.lock().insert(run.run_id, (run.events, bill.clone()));
        Ok(bill)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, (Seq, Arc<Bill>)>> {
        // A panic while holding it left at worst a missing entry.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}
