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
#[cfg(test)]
use crate::search::MAX_QUERY;
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
    if let Some(needle) = Needle::new(&q).map_err(ViewerError::BadRequest)? {
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
    let text = first_string_with(value.get("payload")?, needle)?;
    Some(Hit {
        run: event.run_id.to_string(),
        workflow: workflow.to_owned(),
        seq: event.seq,
        kind: event.kind.as_str().to_owned(),
        path: event.path,
        iteration: event.iteration,
        time: event.timestamp.to_string(),
        snippet: snippet(text, needle),
    })
}

/// The first string value (not key) under `value` holding the needle (case folded).
fn first_string_with<'v>(value: &'v Value, needle: &Needle) -> Option<&'v str> {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if needle.text.is_match(s) => return Some(s),
            Value::Array(items) => stack.extend(items.iter().rev()),
            Value::Object(map) => stack.extend(map.values().rev()),
            _ => {}
        }
    }
    None
}

/// Before, match, after: the match as it is written in `text` (folding may relate characters
/// of different lengths: the Kelvin sign is 3 bytes, `k` one), up to [`CONTEXT`] bytes each
/// side, cut on character boundaries.
fn snippet(text: &str, needle: &Needle) -> (String, String, String) {
    let found = needle.find(text).unwrap_or(0..0);
    let (at, end) = (found.start, found.end);
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

    fn needle(q: &str) -> Needle {
        Needle::new(q)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("no needle for {q:?}"))
    }

    /// The snippet of `text` for `q`, its parts checked to be `text` cut in three.
    fn cut(text: &str, q: &str) -> (String, String, String) {
        let (before, mark, after) = snippet(text, &needle(q));
        let whole = format!("{before}{mark}{after}");
        assert!(
            text.contains(whole.trim_start_matches('…').trim_end_matches('…')),
            "{text:?}: {whole:?}"
        );
        (before, mark, after)
    }

    #[test]
    fn a_snippet_marks_the_match_and_cuts_on_characters() {
        let text = format!("{}Needle{}", "é".repeat(100), "ü".repeat(100));
        let (before, mark, after) = cut(&text, "needle");
        assert_eq!(mark, "Needle");
        assert!(before.starts_with('…') && after.ends_with('…'));
        let value: Value = serde_json::json!({"a": {"needle": 1}, "b": ["x", "the NEEDLE"]});
        assert_eq!(
            first_string_with(&value, &needle("needle")),
            Some("the NEEDLE")
        );
    }

    #[test]
    fn case_is_folded_beyond_ascii_and_the_mark_is_the_text_as_written() {
        // At the start, at the end, and folds relating characters of different lengths.
        let cases = [
            (
                "Éclair au chocolat",
                "éCLAIR",
                ("", "Éclair", " au chocolat"),
            ),
            (
                "Ὀδυσσεύς: ΟΔΥΣΣΕΥΣ",
                "οδυσσευς",
                ("Ὀδυσσεύς: ", "ΟΔΥΣΣΕΥΣ", ""),
            ),
            ("final σ and Σ and ς", "ΣΣ", ("", "", "")),
            (
                "temperature 300 \u{212A}ELVIN.",
                "kelvin",
                ("temperature 300 ", "\u{212A}ELVIN", "."),
            ),
            ("kk", "\u{212A}\u{212A}", ("", "kk", "")),
            ("the ſong", "SONG", ("the ", "ſong", "")),
            ("ДОБРЫЙ день", "добрый ДЕНЬ", ("", "ДОБРЫЙ день", "")),
        ];
        for (text, q, want) in cases {
            let got = if want.1.is_empty() {
                assert!(needle(q).find(text).is_none(), "{q:?} in {text:?}");
                continue;
            } else {
                cut(text, q)
            };
            assert_eq!(
                (got.0.as_str(), got.1.as_str(), got.2.as_str()),
                want,
                "{q:?}"
            );
        }
        // Σ finds both sigmas; σ finds the capital.
        assert_eq!(needle("Σ").text.find_iter("σ ς Σ").count(), 3);
    }

    #[test]
    fn hostile_and_multibyte_text_never_cuts_a_character() {
        let pieces = [
            "日本語",
            "🎉",
            "é",
            "a",
            "\u{212A}",
            "\u{0301}",
            "\"<b>\\",
            "ß",
        ];
        for (i, left) in pieces.iter().enumerate() {
            for right in &pieces[i..] {
                for n in [0, 1, 13, 40, 81] {
                    let text = format!("{}MaTcH{}", left.repeat(n), right.repeat(n));
                    let (_, mark, _) = cut(&text, "match");
                    assert_eq!(mark, "MaTcH");
                    let text = format!("{}{}", left.repeat(n), right.repeat(n));
                    for q in [*left, *right] {
                        if text.contains(q) {
                            assert!(!cut(&text, q).1.is_empty(), "{q:?} in {text:?}");
                        }
                    }
                }
            }
        }
        // Regex syntax in a query is text.
        assert!(needle(".*").find("abc").is_none());
        assert_eq!(needle("a.c").find("xA.Cy"), Some(1..4));
        assert!(Needle::new(&"x".repeat(MAX_QUERY + 1)).is_err());
        assert!(matches!(Needle::new(""), Ok(None)));
    }

    #[test]
    fn a_hit_is_a_payload_string_holding_the_folded_query_never_a_key() {
        let line = |payload: Value| {
            serde_json::json!({"seq": 3, "run_id": "0b6e7c8e-3f4a-4b1c-9d2e-1a2b3c4d5e6f",
                "type": "tool.result", "path": "s", "iteration": 0,
                "timestamp": "2026-06-08T08:14:42.000Z", "payload": payload})
            .to_string()
        };
        let n = needle("ÉCLAIR");
        let in_key =
            line(serde_json::json!({"name": "t", "call_id": "c", "output": {"éclair": 1}}));
        assert!(hit(in_key.as_bytes(), &n, "w").is_none());
        let in_value =
            line(serde_json::json!({"name": "t", "call_id": "c", "output": "un éclair"}));
        let h = hit(in_value.as_bytes(), &n, "w").unwrap_or_else(|| panic!("no hit"));
        assert_eq!(
            h.snippet,
            ("un ".to_owned(), "éclair".to_owned(), String::new())
        );
    }
}
