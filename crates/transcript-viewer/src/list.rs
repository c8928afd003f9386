//! `/` and `/api/runs`: the runs list as a page (filters, sort links, pages, radio buttons to
//! pick two runs for the diff, live rows) and as JSON. Every recorded value is escaped.

use std::fmt::Write as _;

use axum::extract::{Query, State};
use axum::response::Response;
use serde::Serialize;
use transcript_export::escape_html as esc;

use crate::ViewerError;
use crate::format::pct;
use crate::http::{html, json};
use crate::page::{Live, shell};
use crate::rows::{ListQuery, Listing, LiveRow, PAGE_SIZE, Row, listing};
use crate::state::{AppState, blocking};

/// `GET /api/runs`: `{"total", "page", "per_page", "runs": [Row…]}`.
pub async fn api(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Response, ViewerError> {
    let page = query.page();
    let listed = blocking(move || listing(&state, &query)).await?;
    #[derive(Serialize)]
    struct Answer {
        total: usize,
        page: usize,
        per_page: usize,
        runs: Vec<Row>,
    }
    let answer = Answer {
        total: listed.total,
        page,
        per_page: PAGE_SIZE,
        runs: listed.rows,
    };
    serde_json::to_string(&answer)
        .map(json)
        .map_err(|e| ViewerError::Internal(e.to_string()))
}

/// `GET /`: the runs page.
pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Response, ViewerError> {
    let q = query.clone();
    let listed = blocking(move || listing(&state, &q)).await?;
    let mut body = String::from("<h1>Runs</h1>");
    filters(&query, &mut body);
    table(&listed, &query, &mut body);
    pages(&listed, &query, &mut body);
    let live = Live::List {
        version: listed.version,
        insert: query.is_default(),
    };
    Ok(html(shell("transcript: runs", &body, &live)))
}

fn filters(q: &ListQuery, out: &mut String) {
    let value = |v: Option<&str>| esc(v.unwrap_or(""));
    let _ = write!(
        out,
        "<form class=\"filters\" method=\"get\" action=\"/\">\
         <label>status <select name=\"status\"><option value=\"\">any</option>{}</select></label>\
         <label>workflow <input name=\"workflow\" value=\"{}\"></label>\
         <label>model <input name=\"model\" value=\"{}\"></label>\
         <label>day <input name=\"day\" placeholder=\"YYYY-MM-DD\" value=\"{}\"></label>\
         <label><input type=\"checkbox\" name=\"all\" value=\"1\"{}> child runs</label>\
         <input type=\"hidden\" name=\"sort\" value=\"{}\"><input type=\"hidden\" name=\"order\" value=\"{}\">\
         <button type=\"submit\">Filter</button> <a href=\"/\">clear</a></form>",
        ["succeeded", "failed", "running", "abandoned", "open"]
            .iter()
            .map(|s| format!(
                "<option{}>{s}</option>",
                if q.status() == Some(s) {
                    " selected"
                } else {
                    ""
                }
            ))
            .collect::<String>(),
        value(q.workflow()),
        value(q.model()),
        value(q.day()),
        if q.all() { " checked" } else { "" },
        esc(q.sort()),
        if q.ascending() { "asc" } else { "desc" },
    );
}

/// The query string of `q` with `sort`, `order` and `page` replaced.
fn link(q: &ListQuery, sort: &str, ascending: bool, page: usize) -> String {
    let mut parts = Vec::new();
    for (name, v) in [
        ("status", q.status()),
        ("workflow", q.workflow()),
        ("model", q.model()),
        ("day", q.day()),
    ] {
        if let Some(v) = v {
            parts.push(format!("{name}={}", pct(v)));
        }
    }
    if q.all() {
        parts.push("all=1".to_owned());
    }
    parts.push(format!("sort={}", pct(sort)));
    parts.push(format!("order={}", if ascending { "asc" } else { "desc" }));
    parts.push(format!("page={page}"));
    esc(&format!("/?{}", parts.join("&")))
}

fn table(listed: &Listing, q: &ListQuery, out: &mut String) {
    out.push_str(
        "<form method=\"get\" action=\"/diff\"><table class=\"tv\" id=\"runs\"><thead><tr>\
         <th title=\"run A of a diff\">A</th><th title=\"run B of a diff\">B</th>",
    );
    for (key, label, num) in [
        ("", "run", false),
        ("workflow", "workflow", false),
        ("status", "status", false),
        ("started", "started", false),
        ("duration", "duration", true),
        ("events", "events", true),
        ("cost", "cost", true),
        ("tokens", "tokens", true),
        ("", "models", false),
        ("", "replay of", false),
    ] {
        let class = if num { " class=\"num\"" } else { "" };
        if key.is_empty() {
            let _ = write!(out, "<th{class}>{label}</th>");
        } else {
            let ascending = q.sort() == key && !q.ascending();
            let _ = write!(
                out,
                "<th{class}><a href=\"{}\">{label}</a></th>",
                link(q, key, ascending, 1)
            );
        }
    }
    out.push_str("</tr></thead><tbody>");
    for r in &listed.rows {
        row(r, out);
    }
    out.push_str("</tbody></table><p><button type=\"submit\">Diff A and B</button></p></form>");
}

fn row(r: &Row, out: &mut String) {
    let id = esc(&r.run_id);
    let live = LiveRow::from(r);
    let c = &live.cells;
    // A trial names the step it was forked at after the run it replays (#61).
    let replay = r.replay_of.as_deref().map_or(String::new(), |of| {
        let from = r.forked_at.as_deref().map_or(String::new(), |step| {
            format!(" <span class=\"fork\">trial from {}</span>", esc(step))
        });
        format!(
            "<a href=\"/runs/{}\">{}</a>{from}",
            esc(&pct(of)),
            esc(of.get(..8).unwrap_or(of))
        )
    });
    let _ = write!(
        out,
        "<tr id=\"run-{id}\"><td><input type=\"radio\" name=\"a\" value=\"{id}\" aria-label=\"A\"></td>\
         <td><input type=\"radio\" name=\"b\" value=\"{id}\" aria-label=\"B\"></td>\
         <td data-col=\"id\"><a href=\"/runs/{id}\"><code>{}</code></a></td>\
         <td data-col=\"workflow\">{}</td><td data-col=\"status\" class=\"st-{}\">{}</td>\
         <td data-col=\"started\">{}</td><td data-col=\"duration\" class=\"num\">{}</td>\
         <td data-col=\"events\" class=\"num\">{}</td><td data-col=\"cost\" class=\"num\">{}</td>\
         <td data-col=\"tokens\" class=\"num\">{}</td><td data-col=\"models\">{}</td>\
         <td data-col=\"replay\">{replay}</td></tr>",
        esc(r.run_id.get(..8).unwrap_or(&r.run_id)),
        esc(&c.workflow),
        esc(r.status),
        esc(&c.status),
        esc(&c.started),
        esc(&c.duration),
        esc(&c.events),
        esc(&c.cost),
        esc(&c.tokens),
        esc(&c.models),
    );
}

fn pages(listed: &Listing, q: &ListQuery, out: &mut String) {
    let page = q.page();
    let last = listed.total.div_ceil(PAGE_SIZE).max(1);
    let _ = write!(
        out,
        "<p class=\"meta\">{} runs · page {page} of {last}",
        listed.total
    );
    if page > 1 {
        let _ = write!(
            out,
            " · <a rel=\"prev\" href=\"{}\">previous page</a>",
            link(q, q.sort(), q.ascending(), page - 1)
        );
    }
    if page < last {
        let _ = write!(
            out,
            " · <a rel=\"next\" href=\"{}\">next page</a>",
            link(q, q.sort(), q.ascending(), page + 1)
        );
    }
    out.push_str("</p>");
}
