//! Per-step receipts (idea from seed 004): one receipt per agent step with
//! provider, model, timing, status and token usage, plus per-run totals that
//! include child runs. Derived only from the transcript (decision 10): usage
//! is what the `message.assistant` events carry, already deduplicated per
//! provider message by the normalizers.

use std::fmt::Write as _;

use serde::Serialize;
use transcript_domain::Usage;

use crate::model::{Entry, ExportDocument, RunExport, StepExport};
use crate::render_util::duration;

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
    /// Assistant turns.
    pub turns: u64,
    /// Summed usage (fields absent when no turn reported them).
    pub usage: Usage,
}

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
}

/// Derives receipts from an export document.
pub fn receipts(doc: &ExportDocument) -> Receipts {
    let mut out = Receipts {
        run_id: doc.run.run_id.clone(),
        receipts: Vec::new(),
        per_run: Vec::new(),
        total: Usage::default(),
    };
    collect_run(&doc.run, &mut out);
    out
}

fn collect_run(run: &RunExport, out: &mut Receipts) {
    let mut total = RunTotal {
        run_id: run.run_id.clone(),
        workflow: run.workflow.clone(),
        usage: Usage::default(),
    };
    let index = out.per_run.len();
    out.per_run.push(total.clone());
    let mut children = Vec::new();
    for step in &run.steps {
        collect_step(step, &run.run_id, &mut total.usage, out, &mut children);
    }
    out.total.accumulate(&total.usage);
    out.per_run[index] = total;
    for child in children {
        collect_run(child, out);
    }
}

fn collect_step<'a>(
    step: &'a StepExport,
    run_id: &str,
    run_usage: &mut Usage,
    out: &mut Receipts,
    children: &mut Vec<&'a RunExport>,
) {
    if step.kind == "agent" {
        let mut usage = Usage::default();
        let mut providers: Vec<String> = Vec::new();
        let mut models: Vec<String> = Vec::new();
        let mut turns = 0;
        for entry in &step.entries {
            if let Entry::Message(m) = entry
                && m.role == "assistant"
            {
                turns += 1;
                if let Some(u) = &m.usage {
                    usage.accumulate(u);
                }
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
        }
        run_usage.accumulate(&usage);
        out.receipts.push(Receipt {
            run_id: run_id.to_owned(),
            path: step.path.clone(),
            name: step.name.clone(),
            iteration: step.iteration,
            provider: (!providers.is_empty()).then(|| providers.join(",")),
            model: (!models.is_empty()).then(|| models.join(",")),
            started_at: step.started_at.clone(),
            completed_at: step.completed_at.clone(),
            duration_ms: step.duration_ms,
            status: step.status.clone(),
            turns,
            usage,
        });
    }
    for s in &step.steps {
        collect_step(s, run_id, run_usage, out, children);
    }
    if let Some(child) = &step.child_run {
        children.push(child);
    }
}

impl Receipts {
    /// A plain-text table.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let n = |v: Option<u64>| v.map_or("—".to_owned(), |v| v.to_string());
        let _ = writeln!(
            out,
            "{:<28} {:<10} {:<24} {:<10} {:>9} {:>5} {:>8} {:>8} {:>10} {:>11} {:>9} {:>9}",
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
            "cost_usd"
        );
        for r in &self.receipts {
            let step = if r.iteration > 0 {
                format!("{}#{}", r.path, r.iteration)
            } else {
                r.path.clone()
            };
            let _ = writeln!(
                out,
                "{:<28} {:<10} {:<24} {:<10} {:>9} {:>5} {:>8} {:>8} {:>10} {:>11} {:>9} {:>9}",
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
                r.usage
                    .cost_usd
                    .map_or("—".to_owned(), |c| format!("{c:.4}")),
            );
        }
        let _ = writeln!(out);
        for t in &self.per_run {
            let _ = writeln!(
                out,
                "run {} ({}): input {} · output {} · cache read {} · cache write {} · reasoning {} · cost {}",
                t.run_id,
                t.workflow.as_deref().unwrap_or("?"),
                n(t.usage.input_tokens),
                n(t.usage.output_tokens),
                n(t.usage.cache_read_tokens),
                n(t.usage.cache_write_tokens),
                n(t.usage.reasoning_tokens),
                t.usage
                    .cost_usd
                    .map_or("—".to_owned(), |c| format!("${c:.4}")),
            );
        }
        let _ = writeln!(
            out,
            "total (with child runs): input {} · output {} · cache read {} · cache write {} · reasoning {} · cost {}",
            n(self.total.input_tokens),
            n(self.total.output_tokens),
            n(self.total.cache_read_tokens),
            n(self.total.cache_write_tokens),
            n(self.total.reasoning_tokens),
            self.total
                .cost_usd
                .map_or("—".to_owned(), |c| format!("${c:.4}")),
        );
        out
    }
}
