//! `/receipts`: the store's billed turns grouped by day, model, workflow and project, summed
//! and priced by transcript-export's `Groups` (the sums `receipts --by` prints), with a bar
//! per group. Replays and their child runs are not spend and are left out, as `receipts --by`
//! leaves them out. Each run's turns come from the bill cache ([`crate::summary`]).

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Response;
use transcript_domain::Usage;
use transcript_domain::replays::replayed_runs;
use transcript_export::{Group, Groups, escape_html as esc};

use crate::ViewerError;
use crate::format::usd;
use crate::http::html;
use crate::page::{Live, shell};
use crate::state::{AppState, blocking};

/// The four groupings, by label.
type Grouped = Vec<(&'static str, Vec<Group>)>;

/// `GET /receipts`.
pub async fn page(State(state): State<AppState>) -> Result<Response, ViewerError> {
    let (grouped, unpriced) = blocking(move || group(&state)).await?;
    let mut body = String::from(
        "<h1>Receipts</h1><p class=\"meta\">Billed requests of every run (replays left out), \
         each under the model that served it.</p>",
    );
    if !unpriced.is_empty() {
        let _ = write!(
            body,
            "<p class=\"error\">No price for {}: their cost shows —, never $0.</p>",
            esc(&unpriced.join(", "))
        );
    }
    for (label, groups) in &grouped {
        table(label, groups, &mut body);
    }
    Ok(html(shell("transcript: receipts", &body, &Live::None)))
}

fn group(state: &AppState) -> Result<(Grouped, Vec<String>), ViewerError> {
    let runs = state.store.runs()?;
    let replays = replayed_runs(
        runs.iter()
            .map(|r| (r.run_id, r.parent_run_id, r.replay_of.is_some())),
    );
    let none = |_: &str, _: &Usage| None;
    let price: &transcript_domain::bill::PriceFn<'_> = match state.price.as_deref() {
        Some(p) => p,
        None => &none,
    };
    let mut groups: Vec<(&'static str, Groups<'_>)> = ["day", "model", "workflow", "project"]
        .into_iter()
        .map(|label| (label, Groups::new(price)))
        .collect();
    for run in runs.iter().filter(|r| !replays.contains(&r.run_id)) {
        let bill = state
            .summaries
            .get(state.store.as_ref(), state.price.as_ref(), run)?;
        let id = run.run_id.to_string();
        for turn in &bill.turns {
            let keys = [
                turn.day.clone(),
                turn.model.clone(),
                run.workflow.clone().unwrap_or_else(|| "?".to_owned()),
                bill.project.clone().unwrap_or_else(|| "(none)".to_owned()),
            ];
            for ((_, g), key) in groups.iter_mut().zip(keys) {
                g.add_usage(key, &id, (&turn.model, &turn.usage), true);
            }
        }
    }
    let mut unpriced = Vec::new();
    let grouped = groups
        .into_iter()
        .map(|(label, g)| {
            let (groups, missing) = g.finish();
            unpriced = missing;
            (label, groups)
        })
        .collect();
    Ok((grouped, unpriced))
}

fn table(label: &str, groups: &[Group], out: &mut String) {
    let tokens = |g: &Group| g.usage.input_tokens.unwrap_or(0) + g.usage.output_tokens.unwrap_or(0);
    let by_cost = groups.iter().any(|g| g.cost_usd.is_some_and(|c| c > 0.0));
    let weight = |g: &Group| {
        if by_cost {
            g.cost_usd.unwrap_or(0.0)
        } else {
            tokens(g) as f64
        }
    };
    let max = groups.iter().map(weight).fold(0.0_f64, f64::max);
    let _ = write!(
        out,
        "<h2>By {label}</h2><table class=\"tv receipts\" id=\"by-{label}\"><thead><tr><th>{label}</th>\
         <th class=\"num\">runs</th><th class=\"num\">requests</th><th class=\"num\">input</th>\
         <th class=\"num\">output</th><th class=\"num\">cost</th><th>{}</th><th>models</th></tr></thead><tbody>",
        if by_cost { "cost" } else { "tokens" }
    );
    for g in groups {
        let width = if max > 0.0 {
            weight(g) / max * 100.0
        } else {
            0.0
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td><span class=\"bar\" style=\"width:{width:.1}%\"></span></td><td>{}</td></tr>",
            esc(&g.key),
            g.runs,
            g.turns,
            g.usage.input_tokens.unwrap_or(0),
            g.usage.output_tokens.unwrap_or(0),
            esc(&usd(g.cost_usd)),
            esc(&g.models.join(", ")),
        );
    }
    if groups.is_empty() {
        out.push_str("<tr><td colspan=\"8\" class=\"meta\">no billed requests</td></tr>");
    }
    out.push_str("</tbody></table>");
}
