//! `/receipts`: the store's bill grouped by day, model, workflow and project, with a bar per
//! group: transcript-export's `group_runs`, the function `transcript receipts --by` prints, so
//! the two cannot disagree: spend only (a replay and the runs under it left out, a trial
//! billed for its live part), a request several runs repeat billed once, an imported run's
//! session and project as the composition root's [`crate::Origins`] say. Each run is read
//! once into the bill cache ([`crate::summary`]).

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Response;
use transcript_domain::Usage;
use transcript_export::{Group, GroupKey, Origin, RunTurns, escape_html as esc, group_runs};

use crate::ViewerError;
use crate::format::usd;
use crate::http::html;
use crate::page::{Live, shell};
use crate::state::{AppState, blocking};

/// The four groupings, in the page's order.
const KEYS: [GroupKey; 4] = [
    GroupKey::Day,
    GroupKey::Model,
    GroupKey::Workflow,
    GroupKey::Project,
];

/// The groupings, by label.
type Grouped = Vec<(&'static str, Vec<Group>)>;

/// `GET /receipts`.
pub async fn page(State(state): State<AppState>) -> Result<Response, ViewerError> {
    let (grouped, unpriced, duplicates) = blocking(move || group(&state)).await?;
    let mut body = String::from(
        "<h1>Receipts</h1><p class=\"meta\">Billed requests of every run, each under the model \
         that served it, each request once; replays are not spend, a trial's live part is.</p>",
    );
    if duplicates > 0 {
        let _ = write!(
            body,
            "<p class=\"meta\" id=\"duplicates\">{duplicates} duplicate turn(s) set aside: \
             copies of a request another run bills.</p>"
        );
    }
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

/// Every run's bill (cached), grouped by [`KEYS`]; the models without a price; the turns set
/// aside as copies.
fn group(state: &AppState) -> Result<(Grouped, Vec<String>, u64), ViewerError> {
    let runs = state.store.runs()?;
    let mut bills = Vec::with_capacity(runs.len());
    for run in &runs {
        bills.push(
            state
                .summaries
                .get(state.store.as_ref(), state.price.as_ref(), run)?,
        );
    }
    let origin = match &state.origins {
        Some(origins) => origins().map_err(ViewerError::Internal)?,
        None => Box::new(|run: &RunTurns| Origin {
            project: run.imported.as_ref().and_then(|i| i.project.clone()),
            ..Origin::default()
        }),
    };
    let none = |_: &str, _: &Usage| None;
    let price: &transcript_domain::bill::PriceFn<'_> = match state.price.as_deref() {
        Some(p) => p,
        None => &none,
    };
    let turns: Vec<&RunTurns> = bills.iter().map(|b| &b.run).collect();
    let grouped = group_runs(&turns, &mut |r| origin(r), &KEYS, price);
    let groups = grouped
        .groups
        .into_iter()
        .map(|(key, groups)| (key.name(), groups))
        .collect();
    Ok((groups, grouped.unpriced, grouped.duplicates))
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
