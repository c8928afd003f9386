//! `/search?q=`: every run of the store, newest first, scanned for the query
//! ([`crate::search::scan`]); a line that holds it is decoded and the match looked for in its
//! payload's strings (messages, prompts, tool inputs and outputs, step results), so a match in
//! a key or an envelope field is no hit. Each hit names its run, step and event and links to
//! the step (`/runs/<id>/at/<seq>`), with a snippet around the match, the match marked.

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use transcript_domain::{MAX_LINE_BYTES, decode_line};
use transcript_export::escape_html as esc;

use crate::ViewerError;
use crate::http::html;
use crate::page::{Live, shell};
use crate::search::{Needle, scan};
use crate::state::{AppState, blocking};

/// Hits shown at most.
pub const MAX_HITS: usize = 200;

/// Characters of context each side of a match.
const CONTEXT: usize = 80;

/// The query of `/search`.
#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    q: String,
}

/// One hit.
struct Hit {
    run: String,
    workflow: String,
    seq: u64,
    kind: String,
    path: String,
    iteration: u64,
    time: String,
    snippet: (String, String, String),
}

struct Outcome {
    hits: Vec<Hit>,
    runs: usize,
    bytes: u64,
    millis: u128,
    more: bool,
}

/// `GET /search?q=`.
pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<SearchQuery>,
) -> Result<Response, ViewerError> {
    let q = query.q.trim().to_owned();
    let mut body = format!(
        "<h1>Search</h1><form method=\"get\" action=\"/search\" class=\"filters\">\
         <input type=\"search\" name=\"q\" value=\"{}\" size=\"50\" autofocus>\
         <button type=\"submit\">Search</button></form>",
        esc(&q)
    );
    if let Some(needle) = Needle::new(&q) {
        let outcome = blocking(move || search(&state, &needle)).await?;
        render(&outcome, &mut body);
    }
    Ok(html(shell(
        &format!("transcript: search {q}"),
        &body,
        &Live::None,
    )))
}

/// Scans every run, newest first, until [`MAX_HITS`].
fn search(state: &AppState, needle: &Needle) -> Result<Outcome, ViewerError> {
    let started = Instant::now();
    let mut runs = state.store.runs()?;
    runs.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then(a.run_id.cmp(&b.run_id))
    });
    let mut out = Outcome {
        hits: Vec::new(),
        runs: 0,
        bytes: 0,
        millis: 0,
        more: false,
    };
    for run in &runs {
        if out.hits.len() >= MAX_HITS {
            out.more = true;
            break;
        }
        let Some(lines) = state.store.read(run.run_id)? else {
            continue;
        };
        out.runs += 1;
        let workflow = run.workflow.clone().unwrap_or_else(|| "?".to_owned());
        let mut found = Vec::new();
        let room = MAX_HITS - out.hits.len();
        let scanned = scan(lines.body, needle, MAX_LINE_BYTES, &mut |line| {
            if let Some(hit) = hit(line, needle, &workflow) {
                found.push(hit);
            }
            if found.len() >= room {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .map_err(|e| ViewerError::Read {
            location: lines.location.clone(),
            message: e.to_string(),
        })?;
        out.bytes += scanned.bytes;
        // Newest first within a run too.
        out.hits.extend(found.into_iter().rev());
    }
    out.millis = started.elapsed().as_millis();
    Ok(out)
}

/// The hit of a line that holds the needle, when a string of its payload holds it.
fn hit(line: &[u8], needle: &Needle, workflow: &str) -> Option<Hit> {
    let event = decode_line(line).ok()?.event;
    let value: Value = serde_json::from_slice(line).ok()?;
    let text = first_string_with(value.get("payload")?, &needle.text)?;
    Some(Hit {
        run: event.run_id.to_string(),
        workflow: workflow.to_owned(),
        seq: event.seq,
        kind: event.kind.as_str().to_owned(),
        path: event.path,
        iteration: event.iteration,
        time: event.timestamp.to_string(),
        snippet: snippet(text, &needle.text),
    })
}

/// The first string value (not key) under `value` holding `lower` (ASCII case ignored).
fn first_string_with<'v>(value: &'v Value, lower: &str) -> Option<&'v str> {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.to_ascii_lowercase().contains(lower) => return Some(s),
            Value::Array(items) => stack.extend(items.iter().rev()),
            Value::Object(map) => stack.extend(map.values().rev()),
            _ => {}
        }
    }
    None
}

/// Before, match, after: up to [`CONTEXT`] bytes each side, cut on character boundaries.
fn snippet(text: &str, lower: &str) -> (String, String, String) {
    let at = text.to_ascii_lowercase().find(lower).unwrap_or(0);
    let end = (at + lower.len()).min(text.len());
    let mut from = at.saturating_sub(CONTEXT);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = (end + CONTEXT).min(text.len());
    while !text.is_char_boundary(to) {
        to += 1;
    }
    let part = |r: std::ops::Range<usize>| text.get(r).unwrap_or("").to_owned();
    let before = if from > 0 { "…" } else { "" };
    let after = if to < text.len() { "…" } else { "" };
    (
        format!("{before}{}", part(from..at)),
        part(at..end),
        format!("{}{after}", part(end..to)),
    )
}

fn render(o: &Outcome, out: &mut String) {
    let _ = write!(
        out,
        "<p class=\"meta\" id=\"summary\">{} matches{} · {} runs, {:.1} MB scanned in {} ms</p>",
        o.hits.len(),
        if o.more {
            " (more not shown: refine the query)"
        } else {
            ""
        },
        o.runs,
        o.bytes as f64 / 1e6,
        o.millis
    );
    for h in &o.hits {
        let step = if h.path.is_empty() {
            "run".to_owned()
        } else {
            format!("{} #{}", h.path, h.iteration)
        };
        let _ = write!(
            out,
            "<div class=\"hit\"><a class=\"open\" href=\"/runs/{}/at/{}\">{} · {} · {}</a> \
             <span class=\"meta\">run {} · seq {} · {}</span>\
             <div class=\"snippet\">{}<mark>{}</mark>{}</div></div>",
            esc(&h.run),
            h.seq,
            esc(&h.workflow),
            esc(&step),
            esc(&h.kind),
            esc(h.run.get(..8).unwrap_or(&h.run)),
            h.seq,
            esc(&h.time),
            esc(&h.snippet.0),
            esc(&h.snippet.1),
            esc(&h.snippet.2),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_marks_the_match_and_cuts_on_characters() {
        let text = format!("{}Needle{}", "é".repeat(100), "ü".repeat(100));
        let (before, mark, after) = snippet(&text, "needle");
        assert_eq!(mark, "Needle");
        assert!(before.starts_with('…') && after.ends_with('…'));
        let value: Value = serde_json::json!({"a": {"needle": 1}, "b": ["x", "the NEEDLE"]});
        assert_eq!(first_string_with(&value, "needle"), Some("the NEEDLE"));
    }
}
