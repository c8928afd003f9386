//! Per-step receipts (idea from seed 004): one receipt per agent step (and per other step
//! holding assistant turns, so every billed turn is on one) with
//! provider, model, timing, status and token usage, plus per-run totals that
//! include child runs. Derived only from the transcript (decision 10): usage
//! is what the `message.assistant` events carry, already deduplicated per
//! API request by the normalizers (one request, one bill).
//!
//! Cost (issue #29): [`priced_receipts`] prices every billed turn under the model that
//! served it ([`crate::billed`], the rule of every report) with the caller's
//! price function (the CLI passes the providers crate's
//! `Pricing::cost`, this crate stays pure and depends on the domain only):
//! per turn, step, run, model and in total. A turn whose model the function
//! cannot price makes every sum it belongs to unknown (`None`, shown `—`),
//! never $0, and names the model in [`Receipts::unpriced_models`]. What a
//! CLI reported itself (`total_cost_usd`, in `usage.cost_usd`) is kept
//! beside it as `reported`: the two may differ (the CLI's own price table,
//! cache-write durations, helper-model calls that are not messages).

use std::fmt::Write as _;

use serde::Serialize;
use transcript_domain::Usage;
use transcript_domain::bill::CostSum;

use std::collections::HashMap;

use crate::billed;
use crate::model::{ExportDocument, RunExport, StepExport};
use crate::render_util::{count, duration, usd};
use crate::requests::{Requests, Source};

/// One agent step's receipt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    /// Run the step belongs to.
    pub run_id: String,
    /// Step path.
    pub path: String,
    /// Step name.
    pub name: String,
    /// Loop iteration.
    pub iteration: u64,
    /// Provider(s) of the step's assistant turns, comma-separated.
    pub provider: Option<String>,
    /// Model(s) reported.
    pub model: Option<String>,
    /// RFC 3339 start.
    pub started_at: String,
    /// RFC 3339 completion.
    pub completed_at: Option<String>,
    /// Milliseconds.
    pub duration_ms: Option<i64>,
    /// `succeeded`, `failed` or `incomplete`.
    pub status: String,
    /// Assistant turns, a request counted once (its turns set aside as another run's copy,
    /// or after its first, are not counted).
    pub turns: u64,
    /// Summed usage (fields absent when no turn reported them);
    /// `usage.cost_usd` is what the CLI reported itself.
    pub usage: Usage,
    /// Cost from the price table (`None`: not priced, or a model without
    /// a price).
    pub cost_usd: Option<f64>,
    /// The cost of each turn that reported usage.
    pub turn_costs: Vec<TurnCost>,
}

/// The cost of one turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnCost {
    /// Seq of its `message.assistant` event.
    pub seq: u64,
    /// Its model.
    pub model: Option<String>,
    /// Cost from the price table.
    pub cost_usd: Option<f64>,
}

/// Usage and cost of one model over the run and its child runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelTotal {
    /// The model (`(none)` for turns that name none).
    pub model: String,
    /// Requests that reported usage (a request split over several turns counts once).
    pub turns: u64,
    /// Summed usage.
    pub usage: Usage,
    /// Cost from the price table.
    pub cost_usd: Option<f64>,
}

/// Prices one turn: model and usage to US dollars, `None` when unknown (the domain's
/// [`transcript_domain::bill::PriceFn`]).
pub use transcript_domain::bill::PriceFn;

/// Receipts of a run and its totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipts {
    /// Root run id.
    pub run_id: String,
    /// Every agent step of the run and its child runs, in tree order.
    pub receipts: Vec<Receipt>,
    /// Totals per run id (each run's own agent steps).
    pub per_run: Vec<RunTotal>,
    /// Totals over the root run and all child runs.
    pub total: Usage,
    /// Cost over the root run and all child runs, from the price table.
    pub cost_usd: Option<f64>,
    /// Usage and cost per model, sorted by model.
    pub by_model: Vec<ModelTotal>,
    /// Models of billed turns the price table has no price for (sorted).
    pub unpriced_models: Vec<String>,
    /// Billed turns set aside as copies of a request another run of the document bills
    /// ([`crate::requests`]: one request, one bill across runs).
    pub duplicates: u64,
}

/// Totals of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunTotal {
    /// The run.
    pub run_id: String,
    /// Workflow name.
    pub workflow: Option<String>,
    /// Summed usage of its agent steps.
    pub usage: Usage,
    /// Cost of its agent steps, from the price table.
    pub cost_usd: Option<f64>,
}

/// Derives receipts from an export document, without prices (every cost
/// `None`).
pub fn receipts(doc: &ExportDocument) -> Receipts {
    build(doc, None)
}

/// Derives receipts from an export document, pricing each turn with
/// `price`.
pub fn priced_receipts(doc: &ExportDocument, price: &PriceFn<'_>) -> Receipts {
    build(doc, Some(price))
}

struct Ctx<'p> {
    price: Option<&'p PriceFn<'p>>,
    models: std::collections::BTreeMap<String, (ModelTotal, CostSum)>,
    total_cost: CostSum,
    /// The billed turns kept (run id, seq) and whether each is its request's first.
    kept: HashMap<(String, u64), bool>,
}

/// The billed turns of the document (the run and its child runs) to bill, one request once
/// ([`crate::requests`], each run its own session), and how many were set aside.
fn deduplicate(doc: &ExportDocument) -> (HashMap<(String, u64), bool>, u64) {
    fn walk(run: &RunExport, requests: &mut Requests<(String, u64)>) {
        let mut children = Vec::new();
        billed::each_step(run, &mut |step| {
            for t in billed::billed_turns(step) {
                requests.add(
                    (run.run_id.clone(), t.message.seq),
                    t.message.request_id.as_deref(),
                    Source {
                        run: &run.run_id,
                        session: &run.run_id,
                        provider: t.message.provider.as_deref().unwrap_or(""),
                        sidechain: false,
                    },
                    t.usage,
                );
            }
            if let Some(child) = &step.child_run {
                children.push(child);
            }
        });
        for child in children {
            walk(child, requests);
        }
    }
    let mut requests = Requests::new();
    walk(&doc.run, &mut requests);
    let d = requests.finish();
    let kept = d.kept.into_iter().map(|k| (k.turn, k.first)).collect();
    (kept, d.duplicates)
}

fn build(doc: &ExportDocument, price: Option<&PriceFn<'_>>) -> Receipts {
    let mut out = Receipts {
        run_id: doc.run.run_id.clone(),
        receipts: Vec::new(),
        per_run: Vec::new(),
        total: Usage::default(),
        cost_usd: None,
        by_model: Vec::new(),
        unpriced_models: Vec::new(),
        duplicates: 0,
    };
    let (kept, duplicates) = deduplicate(doc);
    out.duplicates = duplicates;
    let mut ctx = Ctx {
        price,
        models: Default::default(),
        total_cost: CostSum::default(),
        kept,
    };
    collect_run(&doc.run, &mut out, &mut ctx);
    out.cost_usd = ctx.total_cost.get();
    for (_, (mut m, cost)) in ctx.models {
        m.cost_usd = cost.get();
        if price.is_some() && cost.has_unknown() {
            out.unpriced_models.push(m.model.clone());
        }
        out.by_model.push(m);
    }
    out
}

fn collect_run(run: &RunExport, out: &mut Receipts, ctx: &mut Ctx<'_>) {
    let mut total = RunTotal {
        run_id: run.run_id.clone(),
        workflow: run.workflow.clone(),
        usage: Usage::default(),
        cost_usd: None,
    };
    let index = out.per_run.len();
    out.per_run.push(total.clone());
    let mut children = Vec::new();
    let mut cost = CostSum::default();
    for step in &run.steps {
        collect_step(
            step,
            &run.run_id,
            (&mut total.usage, &mut cost),
            out,
            ctx,
            &mut children,
        );
    }
    out.total.accumulate(&total.usage);
    ctx.total_cost.merge(cost);
    total.cost_usd = cost.get();
    out.per_run[index] = total;
    for child in children {
        collect_run(child, out, ctx);
    }
}

fn collect_step<'a>(
    step: &'a StepExport,
    run_id: &str,
    (run_usage, run_cost): (&mut Usage, &mut CostSum),
    out: &mut Receipts,
    ctx: &mut Ctx<'_>,
    children: &mut Vec<&'a RunExport>,
) {
    // Every billed turn has its receipt: an agent step's, or any step's that holds turns.
    if step.kind == "agent" || billed::assistant_turns(step).next().is_some() {
        let (receipt, cost) = agent_receipt(step, run_id, ctx);
        run_usage.accumulate(&receipt.usage);
        run_cost.merge(cost);
        out.receipts.push(receipt);
    }
    for s in &step.steps {
        collect_step(s, run_id, (run_usage, run_cost), out, ctx, children);
    }
    if let Some(child) = &step.child_run {
        children.push(child);
    }
}

/// The provider an agent step's result names (`{"provider": …}`, an import's).
fn result_provider(step: &StepExport) -> Option<String> {
    step.result
        .as_ref()?
        .get("provider")?
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

/// An agent step's receipt and its priced cost; each billed turn also counts toward its
/// model's total in `ctx`.
fn agent_receipt(step: &StepExport, run_id: &str, ctx: &mut Ctx<'_>) -> (Receipt, CostSum) {
    let mut usage = Usage::default();
    let mut providers: Vec<String> = Vec::new();
    let mut models: Vec<String> = Vec::new();
    let mut cost = CostSum::default();
    let mut turn_costs = Vec::new();
    // One request, one bill, under the model that served it: the one rule (`crate::billed`).
    for t in billed::billed_turns(step) {
        let Some(&first) = ctx.kept.get(&(run_id.to_owned(), t.message.seq)) else {
            // A copy of a request another run bills.
            continue;
        };
        usage.accumulate(t.usage);
        let c = ctx.bill(t.model, t.usage, first);
        cost.add(c);
        turn_costs.push(TurnCost {
            seq: t.message.seq,
            model: Some(t.model.to_owned()),
            cost_usd: c,
        });
    }
    let mut turns = 0;
    for m in billed::assistant_turns(step) {
        // Turns count requests: a billed turn set aside, or not its request's first, is not
        // one more.
        if m.usage.is_some() && ctx.kept.get(&(run_id.to_owned(), m.seq)) != Some(&true) {
            continue;
        }
        turns += 1;
        if let Some(p) = &m.provider
            && !providers.contains(p)
        {
            providers.push(p.clone());
        }
        if let Some(model) = &m.model
            && !models.contains(model)
        {
            models.push(model.clone());
        }
    }
    let receipt = Receipt {
        run_id: run_id.to_owned(),
        path: step.path.clone(),
        name: step.name.clone(),
        iteration: step.iteration,
        // No reply named it (a session that failed first): the provider its step's result
        // names (an import's).
        provider: (!providers.is_empty())
            .then(|| providers.join(","))
            .or_else(|| result_provider(step)),
        model: (!models.is_empty()).then(|| models.join(",")),
        started_at: step.started_at.clone(),
        completed_at: step.completed_at.clone(),
        duration_ms: step.duration_ms,
        status: step.status.clone(),
        turns,
        usage,
        cost_usd: cost.get(),
        turn_costs,
    };
    (receipt, cost)
}

impl Ctx<'_> {
    /// Prices one turn's usage under `model` and counts it toward that model's total.
    fn bill(&mut self, model: &str, u: &Usage, new_request: bool) -> Option<f64> {
        let c = self.price.and_then(|p| p(model, u));
        let (mt, mc) = self.models.entry(model.to_owned()).or_insert_with(|| {
            (
                ModelTotal {
                    model: model.to_owned(),
                    turns: 0,
                    usage: Usage::default(),
                    cost_usd: None,
                },
                CostSum::default(),
            )
        });
        mt.turns += u64::from(new_request);
        mt.usage.accumulate(u);
        mc.add(c);
        c
    }
}

impl Receipts {
    /// A plain-text table: one line per agent step, then per run, per model
    /// and the total. `cost` is priced from the table, `reported` is what
    /// the CLI reported itself (`total_cost_usd`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_steps(&mut out);
        let _ = writeln!(out);
        self.render_totals(&mut out);
        out
    }

    /// The header and one line per agent step.
    fn render_steps(&self, out: &mut String) {
        let n = count;
        let _ = writeln!(
            out,
            "{:<28} {:<10} {:<24} {:<10} {:>9} {:>5} {:>8} {:>8} {:>10} {:>11} {:>9} {:>9} {:>9}",
            "step",
            "provider",
            "model",
            "status",
            "duration",
            "turns",
            "input",
            "output",
            "cache_read",
            "cache_write",
            "reasoning",
            "cost",
            "reported"
        );
        for r in &self.receipts {
            let step = if r.iteration > 0 {
                format!("{}#{}", r.path, r.iteration)
            } else {
                r.path.clone()
            };
            let _ = writeln!(
                out,
                "{:<28} {:<10} {:<24} {:<10} {:>9} {:>5} {:>8} {:>8} {:>10} {:>11} {:>9} {:>9} {:>9}",
                step,
                r.provider.as_deref().unwrap_or("—"),
                r.model.as_deref().unwrap_or("—"),
                r.status,
                duration(r.duration_ms),
                r.turns,
                n(r.usage.input_tokens),
                n(r.usage.output_tokens),
                n(r.usage.cache_read_tokens),
                n(r.usage.cache_write_tokens),
                n(r.usage.reasoning_tokens),
                usd(r.cost_usd),
                usd(r.usage.cost_usd),
            );
        }
    }

    /// One line per run, per model, and the total with child runs.
    fn render_totals(&self, out: &mut String) {
        let n = count;
        for t in &self.per_run {
            let _ = writeln!(
                out,
                "run {} ({}): input {} · output {} · cache read {} · cache write {} · reasoning {} · cost {} · reported {}",
                t.run_id,
                t.workflow.as_deref().unwrap_or("?"),
                n(t.usage.input_tokens),
                n(t.usage.output_tokens),
                n(t.usage.cache_read_tokens),
                n(t.usage.cache_write_tokens),
                n(t.usage.reasoning_tokens),
                usd(t.cost_usd),
                usd(t.usage.cost_usd),
            );
        }
        for m in &self.by_model {
            let _ = writeln!(
                out,
                "model {}: turns {} · input {} · output {} · cache read {} · cache write {} · reasoning {} · cost {}",
                m.model,
                m.turns,
                n(m.usage.input_tokens),
                n(m.usage.output_tokens),
                n(m.usage.cache_read_tokens),
                n(m.usage.cache_write_tokens),
                n(m.usage.reasoning_tokens),
                usd(m.cost_usd),
            );
        }
        let _ = writeln!(
            out,
            "total (with child runs): input {} · output {} · cache read {} · cache write {} · reasoning {} · cost {} · reported {}",
            n(self.total.input_tokens),
            n(self.total.output_tokens),
            n(self.total.cache_read_tokens),
            n(self.total.cache_write_tokens),
            n(self.total.reasoning_tokens),
            usd(self.cost_usd),
            usd(self.total.cost_usd),
        );
    }
}
