//! `/runs/<id>` (the export's HTML page of the run, priced, in our frame, live while the run
//! records), `/runs/<id>/at/<seq>` (to the step that recorded an event), `/api/runs/<id>`
//! (its events as recorded) and `/diff` (transcript-compare's page of two runs).

use std::ops::ControlFlow;

use axum::extract::{Path, Query, State};
use axum::response::{Redirect, Response};
use serde::Deserialize;
use transcript_domain::run_store::RunState;
use transcript_domain::{DecodedEvent, RunId, decode_line};
use transcript_export::{ExportDocument, ExportOptions, RunExport, StepExport, escape_html as esc};

use crate::ViewerError;
use crate::http::{html, json};
use crate::page::{Live, embed, shell};
use crate::read::{lookup, must_read, resolve};
use crate::state::{AppState, blocking};

/// The run's export document, priced when the viewer has prices.
fn document(state: &AppState, events: &[DecodedEvent]) -> ExportDocument {
    let store = state.store.as_ref();
    let mut doc =
        transcript_export::build_document(events, &mut lookup(store), &ExportOptions::default());
    if let Some(price) = state.price.as_deref() {
        transcript_export::price_document(&mut doc, price, &state.price_table);
    }
    doc
}

/// `GET /runs/<id>`.
pub async fn page(
    State(state): State<AppState>,
    Path(arg): Path<String>,
) -> Result<Response, ViewerError> {
    blocking(move || {
        let id = resolve(state.store.as_ref(), &arg)?;
        let run = must_read(state.store.as_ref(), id)?;
        let doc = document(&state, &run.events);
        let live = match run.state {
            RunState::Running | RunState::Open => Live::Run {
                id: id.to_string(),
                since: run.events.last().map_or(0, |e| e.seq),
            },
            _ => Live::None,
        };
        let note = match run.skipped {
            0 => String::new(),
            n => {
                format!("{n} line(s) of this transcript are not events or are too long: not shown.")
            }
        };
        Ok(html(embed(&transcript_export::to_html(&doc), &live, &note)))
    })
    .await
}

/// `GET /runs/<id>/at/<seq>`: 303 to the page's anchor of the step (or run) that recorded
/// event `seq`.
pub async fn at(
    State(state): State<AppState>,
    Path((arg, seq)): Path<(String, u64)>,
) -> Result<Redirect, ViewerError> {
    blocking(move || {
        let id = resolve(state.store.as_ref(), &arg)?;
        let run = must_read(state.store.as_ref(), id)?;
        let Some(event) = run.events.iter().find(|e| e.seq == seq) else {
            return Err(ViewerError::NotFound(format!("event {seq} of run {id}")));
        };
        let doc = document(&state, &run.events);
        let anchor = anchor(&doc.run, event).map_or(String::new(), |n| format!("#n{n}"));
        Ok(Redirect::to(&format!("/runs/{id}{anchor}")))
    })
    .await
}

/// The export page's anchor number (`#n…`) of the section showing `event`: the page numbers
/// the run, then each step in tree order (a step before its nested steps, then its child
/// run), as `transcript_export::to_html` does.
fn anchor(run: &RunExport, event: &DecodedEvent) -> Option<usize> {
    struct Walk<'e> {
        n: usize,
        event: &'e DecodedEvent,
        run_id: String,
    }
    impl Walk<'_> {
        fn run(&mut self, run: &RunExport) -> Option<usize> {
            self.n += 1;
            let here = self.n;
            if run.run_id == self.run_id && self.event.path.is_empty() {
                return Some(here);
            }
            let mine = run.run_id == self.run_id;
            run.steps.iter().find_map(|s| self.step(s, mine))
        }
        fn step(&mut self, step: &StepExport, mine: bool) -> Option<usize> {
            self.n += 1;
            if mine && step.path == self.event.path && step.iteration == self.event.iteration {
                return Some(self.n);
            }
            if let Some(found) = step.steps.iter().find_map(|s| self.step(s, mine)) {
                return Some(found);
            }
            step.child_run.as_deref().and_then(|c| self.run(c))
        }
    }
    Walk {
        n: 0,
        event,
        run_id: event.run_id.to_string(),
    }
    .run(run)
}

/// `GET /api/runs/<id>`: `{"run_id", "state", "events": [each event as recorded]}` (lines
/// that are not events left out).
pub async fn api(
    State(state): State<AppState>,
    Path(arg): Path<String>,
) -> Result<Response, ViewerError> {
    blocking(move || {
        let store = state.store.as_ref();
        let id = resolve(store, &arg)?;
        let lines = store
            .read(id)?
            .ok_or_else(|| ViewerError::NotFound(format!("run {id}")))?;
        let mut out = format!(
            "{{\"run_id\":\"{id}\",\"state\":\"{}\",\"events\":[",
            lines.state.as_str()
        )
        .into_bytes();
        let mut first = true;
        let location = lines.location.clone();
        crate::read::each_line(lines.body, transcript_domain::MAX_LINE_BYTES, &mut |line| {
            if decode_line(line).is_ok() {
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(line);
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| ViewerError::Read {
            location,
            message: e.to_string(),
        })?;
        out.extend_from_slice(b"]}");
        Ok(json(String::from_utf8_lossy(&out).into_owned()))
    })
    .await
}

/// The query of `/diff`.
#[derive(Debug, Deserialize)]
pub struct DiffQuery {
    a: Option<String>,
    b: Option<String>,
}

/// `GET /diff?a=&b=`: the diff page; without both runs, a form to name them.
pub async fn diff(
    State(state): State<AppState>,
    Query(query): Query<DiffQuery>,
) -> Result<Response, ViewerError> {
    let given = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let (Some(a), Some(b)) = (given(&query.a), given(&query.b)) else {
        return Ok(html(shell(
            "transcript: diff",
            &diff_form(&query),
            &Live::None,
        )));
    };
    blocking(move || {
        let (ra, rb) = (record(&state, &a)?, record(&state, &b)?);
        let options = transcript_compare::DiffOptions::default();
        let doc = transcript_compare::diff_with_definitions(&ra.0, &rb.0, &options, (&ra.1, &rb.1));
        let page = transcript_compare::render_html(&doc, &a, &b);
        Ok(html(embed(&page, &Live::None, "")))
    })
    .await
}

/// One side of a diff: its record (child runs from the store, priced) and definitions.
fn record(
    state: &AppState,
    arg: &str,
) -> Result<
    (
        transcript_compare::RunRecord,
        transcript_compare::StepDefinitions,
    ),
    ViewerError,
> {
    let store = state.store.as_ref();
    let id: RunId = resolve(store, arg)?;
    let run = must_read(store, id)?;
    let price = state
        .price
        .as_deref()
        .map(|p| p as &transcript_domain::bill::PriceFn<'_>);
    let record = transcript_compare::RunRecord::build(&run.events, &mut lookup(store), price);
    let definitions = state
        .definitions
        .as_ref()
        .map(|d| d(&run.events))
        .unwrap_or_default();
    Ok((record, definitions))
}

fn diff_form(query: &DiffQuery) -> String {
    let value = |v: &Option<String>| esc(v.as_deref().unwrap_or(""));
    format!(
        "<h1>Diff two runs</h1><p>Pick A and B in the <a href=\"/\">runs list</a>, or name them \
         (a run id, a unique prefix, or <code>latest</code>):</p>\
         <form method=\"get\" action=\"/diff\" class=\"filters\">\
         <label>A <input name=\"a\" value=\"{}\" required></label>\
         <label>B <input name=\"b\" value=\"{}\" required></label>\
         <button type=\"submit\">Diff</button></form>",
        value(&query.a),
        value(&query.b)
    )
}
