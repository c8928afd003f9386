//! "Where the money went" (issue #42): tokens and cost per step and per model as bars
//! beside the run's totals. Every figure is one the document already holds: the per-model
//! and total costs of [`crate::price_document`] (which prices with
//! [`crate::priced_receipts`], the code behind `transcript receipts`) and each step's own
//! usage and cost. Nothing is priced here a second way. Bars are plain `<div>`s with inline
//! percentage widths; the figures are their text, so the chart reads without colour.

use std::fmt::Write as _;

use transcript_domain::Usage;

use crate::model::{ExportDocument, RunExport, StepExport};
use crate::render_util::{escape_html as esc, model_tokens, usd};

/// The CSS of the chart.
pub const COSTS_CSS: &str = r#"
section.money { margin: 6px 0 18px; }
.money-row { display:grid; grid-template-columns: 30% 40% 30%; align-items:center; font-size:12px; min-height:18px; }
.money-row .cbar { height:10px; background:#bf8700; border-radius:2px; min-width:1px; }
.money-row .tbar { height:4px; background:#8250df; border-radius:2px; margin-top:2px; min-width:1px; }
.money-totals { font-weight:600; }
"#;

/// Input plus output tokens (the bar's length when no cost is known).
fn tokens(u: &Usage) -> u64 {
    u.input_tokens.unwrap_or(0) + u.output_tokens.unwrap_or(0)
}

/// One row of the chart: a label, its usage and its cost.
struct Row {
    /// `data-model="…"` or `data-run="…" data-path="…"`, escaped.
    key: String,
    label: String,
    usage: Usage,
    cost: Option<f64>,
}

fn steps_of(run: &RunExport, out: &mut Vec<Row>) {
    for s in &run.steps {
        step_rows(&run.run_id, s, out);
    }
}

fn step_rows(run_id: &str, step: &StepExport, out: &mut Vec<Row>) {
    if let Some(u) = &step.usage {
        let iteration = if step.iteration > 0 || step.path.contains('.') {
            format!(" #{}", step.iteration)
        } else {
            String::new()
        };
        out.push(Row {
            key: format!(
                "data-run=\"{}\" data-path=\"{}\"",
                esc(run_id),
                esc(&step.path)
            ),
            label: format!("{}{iteration}", step.name),
            usage: u.clone(),
            cost: step.cost_usd,
        });
    }
    for s in &step.steps {
        step_rows(run_id, s, out);
    }
    if let Some(child) = &step.child_run {
        steps_of(child, out);
    }
}

/// Renders the chart of `doc` (nothing when no step reported usage).
pub fn render_costs(doc: &ExportDocument, out: &mut String) {
    let mut steps = Vec::new();
    steps_of(&doc.run, &mut steps);
    if steps.is_empty() {
        return;
    }
    out.push_str(
        "<section class=\"money\" aria-label=\"Where the money went\"><h2>Where the money went</h2>",
    );
    if let Some(cost) = &doc.cost {
        let _ = write!(
            out,
            "<p class=\"money-totals\">Total (with child runs): <span data-total-usd>{}</span> · the CLIs reported {}</p>",
            esc(&usd(cost.total_usd)),
            esc(&usd(cost.reported_usd))
        );
        let models: Vec<Row> = cost
            .by_model
            .iter()
            .map(|m| Row {
                key: format!("data-model=\"{}\"", esc(&m.model)),
                label: m.model.clone(),
                usage: m.usage.clone(),
                cost: m.cost_usd,
            })
            .collect();
        chart("By model", &models, out);
    }
    chart("By step", &steps, out);
    out.push_str("</section>\n");
}

fn chart(title: &str, rows: &[Row], out: &mut String) {
    let max_cost = rows.iter().filter_map(|r| r.cost).fold(0.0_f64, f64::max);
    let max_tokens = rows
        .iter()
        .map(|r| tokens(&r.usage))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let _ = write!(out, "<h3>{}</h3>", esc(title));
    for r in rows {
        let cost_w = match r.cost {
            Some(c) if max_cost > 0.0 => c / max_cost * 100.0,
            _ => 0.0,
        };
        let tok_w = tokens(&r.usage) as f64 / max_tokens * 100.0;
        let _ = write!(
            out,
            "<div class=\"money-row\" {}><div class=\"tl-name\">{}</div>\
             <div><div class=\"cbar\" style=\"width:{cost_w:.4}%\"></div><div class=\"tbar\" style=\"width:{tok_w:.4}%\"></div></div>\
             <div><span class=\"usd\">{}</span> · {}</div></div>",
            r.key,
            esc(&r.label),
            esc(&usd(r.cost)),
            esc(&model_tokens(&r.usage)),
        );
    }
}
