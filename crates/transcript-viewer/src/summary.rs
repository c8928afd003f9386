//! A run's bill as the list and the receipts show it ([`Bill`]): its own billed turns (child
//! runs are runs of their own), each priced under the model it is billed under
//! (transcript-export's `billed_turns`, the rule every report bills by), the tokens and
//! models they sum to, and the project (the last component of `run.started`'s `workspace`).
//! [`Summaries`] caches bills by run and event count, so a finished run is read once and a
//! running run again only when it grew.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use transcript_domain::run_store::{RunStore, StoredRun};
use transcript_domain::{DecodedEvent, DecodedPayload, RunId, Seq, Usage};
use transcript_export::{ExportOptions, billed_turns, build_document, each_step};

use crate::ViewerError;
use crate::config::Price;

/// One billed request of a run.
#[derive(Debug, Clone)]
pub struct TurnBill {
    /// Its day (`YYYY-MM-DD`).
    pub day: String,
    /// The model it is billed under.
    pub model: String,
    /// Its usage.
    pub usage: Usage,
    /// Its price (`None`: no price for the model, or no table).
    pub cost: Option<f64>,
}

/// A run's own bill.
#[derive(Debug, Clone, Default)]
pub struct Bill {
    /// Summed cost; `None` when a turn has no price (shown `—`, never $0) or nothing priced.
    pub cost_usd: Option<f64>,
    /// Input plus output tokens.
    pub tokens: u64,
    /// Models billed, sorted.
    pub models: Vec<String>,
    /// The project (the workspace's last path component), if recorded.
    pub project: Option<String>,
    /// Each billed request.
    pub turns: Vec<TurnBill>,
}

impl Bill {
    /// The bill of `events` (one run's own, no child run), priced with `price`.
    pub fn of(events: &[DecodedEvent], price: Option<&Price>) -> Bill {
        let doc = build_document(events, &mut |_| None, &ExportOptions::default());
        let mut bill = Bill {
            project: project(events),
            ..Bill::default()
        };
        let mut unpriced = false;
        each_step(&doc.run, &mut |step| {
            for turn in billed_turns(step) {
                let cost = price.and_then(|p| p(turn.model, turn.usage));
                unpriced |= cost.is_none();
                bill.tokens +=
                    turn.usage.input_tokens.unwrap_or(0) + turn.usage.output_tokens.unwrap_or(0);
                bill.turns.push(TurnBill {
                    day: turn.message.timestamp.get(..10).unwrap_or("?").to_owned(),
                    model: turn.model.to_owned(),
                    usage: turn.usage.clone(),
                    cost,
                });
            }
        });
        bill.cost_usd = match (unpriced, bill.turns.is_empty(), price.is_some()) {
            (false, false, true) => Some(bill.turns.iter().filter_map(|t| t.cost).sum()),
            (false, true, true) => Some(0.0),
            _ => None,
        };
        let mut models: Vec<String> = bill.turns.iter().map(|t| t.model.clone()).collect();
        models.sort();
        models.dedup();
        bill.models = models;
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

/// The last component of `run.started`'s `workspace`.
fn project(events: &[DecodedEvent]) -> Option<String> {
    let first = events.first()?;
    let DecodedPayload::Step(step) = &first.payload else {
        return None;
    };
    let workspace = step.workspace.as_deref()?;
    let name = workspace.trim_end_matches('/').rsplit('/').next()?;
    (!name.is_empty()).then(|| name.to_owned())
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
