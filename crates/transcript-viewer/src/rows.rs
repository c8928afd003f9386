//! The runs list as data: [`ListQuery`] (the filters, sort and page of `/` and `/api/runs`),
//! [`Row`] (one run with its bill, the JSON of `/api/runs` and of the live list's events),
//! and [`listing`], which reads the store once and answers a query, billing only the rows it
//! needs (every filtered run when the query filters or sorts by model, cost or tokens), a
//! page's on as many threads as there are CPUs.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use transcript_domain::run_store::{RunState, StoredRun};
use transcript_domain::{RunId, Timestamp};

use crate::ViewerError;
use crate::format::{duration as show_duration, usd};
use crate::state::AppState;
use crate::summary::Bill;

/// Runs per page of `/` and `/api/runs`.
pub const PAGE_SIZE: usize = 100;

/// The query of `/` and `/api/runs` (every field optional; an empty one is absent).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ListQuery {
    /// `succeeded`, `failed`, `running`, `abandoned` or `open`.
    pub status: Option<String>,
    /// A workflow name, exactly.
    pub workflow: Option<String>,
    /// A model the run (or a child run) billed.
    pub model: Option<String>,
    /// A start day, `YYYY-MM-DD` (UTC).
    pub day: Option<String>,
    /// `started` (default), `duration`, `cost`, `tokens`, `events`, `workflow`, `status`.
    pub sort: Option<String>,
    /// `desc` (default) or `asc`.
    pub order: Option<String>,
    /// 1-based page.
    pub page: Option<usize>,
    /// `1`: child runs too.
    pub all: Option<String>,
}

fn set(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl ListQuery {
    /// The status filter, if any.
    pub fn status(&self) -> Option<&str> {
        set(&self.status)
    }
    /// The workflow filter, if any.
    pub fn workflow(&self) -> Option<&str> {
        set(&self.workflow)
    }
    /// The model filter, if any.
    pub fn model(&self) -> Option<&str> {
        set(&self.model)
    }
    /// The day filter, if any.
    pub fn day(&self) -> Option<&str> {
        set(&self.day)
    }
    /// The sort key.
    pub fn sort(&self) -> &str {
        set(&self.sort).unwrap_or("started")
    }
    /// Whether ascending.
    pub fn ascending(&self) -> bool {
        set(&self.order) == Some("asc")
    }
    /// Whether child runs are listed.
    pub fn all(&self) -> bool {
        set(&self.all).is_some_and(|v| v != "0")
    }
    /// The page, from 1.
    pub fn page(&self) -> usize {
        self.page.unwrap_or(1).max(1)
    }
    /// The default view: first page, newest first, nothing filtered (new runs go on top).
    pub fn is_default(&self) -> bool {
        self.page() == 1
            && self.sort() == "started"
            && !self.ascending()
            && self.status().is_none()
            && self.workflow().is_none()
            && self.model().is_none()
            && self.day().is_none()
    }
    fn checked(&self) -> Result<(), ViewerError> {
        const SORTS: &[&str] = &[
            "started", "duration", "cost", "tokens", "events", "workflow", "status",
        ];
        if !SORTS.contains(&self.sort()) {
            return Err(ViewerError::BadRequest(format!(
                "sort must be one of {}",
                SORTS.join(", ")
            )));
        }
        Ok(())
    }
}

/// One run of the list.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The run.
    pub run_id: String,
    /// Its calling run, for a child run.
    pub parent_run_id: Option<String>,
    /// Its workflow.
    pub workflow: Option<String>,
    /// `succeeded`, `failed`, `running`, `abandoned` or `open`.
    pub status: &'static str,
    /// When it started (RFC 3339, UTC).
    pub started_at: Option<String>,
    /// Milliseconds from start to its last event (to now while running).
    pub duration_ms: Option<i64>,
    /// Events recorded.
    pub events: u64,
    /// Cost with its child runs (`null`: a model without a price, or no price table).
    pub cost_usd: Option<f64>,
    /// Input plus output tokens with its child runs.
    pub tokens: u64,
    /// Models billed by it and its child runs.
    pub models: Vec<String>,
    /// The run it replays.
    pub replay_of: Option<String>,
    /// For a trial of that run, the step it was forked at.
    pub forked_at: Option<String>,
    /// Where the store keeps it.
    pub location: String,
}

/// The runs of a store, indexed for bills with child runs.
pub struct Index {
    /// Every run.
    pub runs: Vec<StoredRun>,
    by_id: HashMap<RunId, usize>,
    children: HashMap<RunId, Vec<usize>>,
}

impl Index {
    /// `runs`, indexed.
    pub fn new(runs: Vec<StoredRun>) -> Index {
        let by_id = runs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.run_id, i))
            .collect();
        let mut children: HashMap<RunId, Vec<usize>> = HashMap::new();
        for (i, r) in runs.iter().enumerate() {
            if let Some(p) = r.parent_run_id {
                children.entry(p).or_default().push(i);
            }
        }
        Index {
            runs,
            by_id,
            children,
        }
    }

    /// The run `id`'s position.
    pub fn position(&self, id: RunId) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The bill of run `i` with every descendant's.
    pub fn total(&self, state: &AppState, i: usize) -> Result<Bill, ViewerError> {
        let mut total = Bill {
            cost_usd: state.price.as_ref().map(|_| 0.0),
            ..Bill::default()
        };
        let (mut stack, mut seen) = (vec![i], HashSet::new());
        while let Some(j) = stack.pop() {
            let run = &self.runs[j];
            if !seen.insert(run.run_id) {
                continue;
            }
            let bill = state
                .summaries
                .get(state.store.as_ref(), state.price.as_ref(), run)?;
            total.add(&bill);
            stack.extend(self.children.get(&run.run_id).into_iter().flatten());
        }
        Ok(total)
    }

    /// Run `i` as a row, billed.
    pub fn row(&self, state: &AppState, i: usize) -> Result<Row, ViewerError> {
        let r = &self.runs[i];
        let bill = self.total(state, i)?;
        Ok(Row {
            run_id: r.run_id.to_string(),
            parent_run_id: r.parent_run_id.map(|p| p.to_string()),
            workflow: r.workflow.clone(),
            status: r.state.as_str(),
            started_at: r.started_at.map(|t| t.to_string()),
            duration_ms: duration_ms(r, state.clock.now()),
            events: r.events,
            cost_usd: bill.cost_usd,
            tokens: bill.tokens,
            models: bill.models,
            replay_of: r.replay_of.clone(),
            forked_at: r.forked_at.clone(),
            location: r.location.clone(),
        })
    }
}

/// Start to last event; to now for a running run (a step may be working for long).
pub fn duration_ms(r: &StoredRun, now: Timestamp) -> Option<i64> {
    let start = r.started_at?;
    match r.state {
        RunState::Running => Some(now.millis_since(start).max(0)),
        _ => r.ended_at.map(|e| e.millis_since(start)),
    }
}

/// A query's answer: the page's rows, how many runs matched, and the live snapshot it was
/// read at.
pub struct Listing {
    /// The rows of the page.
    pub rows: Vec<Row>,
    /// Runs matching the filters.
    pub total: usize,
    /// The live list's snapshot version of this read.
    pub version: u64,
}

/// Reads the store and answers `query` (blocking).
pub fn listing(state: &AppState, query: &ListQuery) -> Result<Listing, ViewerError> {
    query.checked()?;
    let index = Index::new(state.store.runs()?);
    let version = observe(state, &index);
    let mut picked: Vec<usize> = (0..index.runs.len())
        .filter(|&i| {
            let r = &index.runs[i];
            (query.all() || r.parent_run_id.is_none())
                && query.status().is_none_or(|s| r.state.as_str() == s)
                && query
                    .workflow()
                    .is_none_or(|w| r.workflow.as_deref() == Some(w))
                && query
                    .day()
                    .is_none_or(|d| r.started_at.is_some_and(|t| t.to_string().starts_with(d)))
        })
        .collect();
    let needs_bills = query.model().is_some() || matches!(query.sort(), "cost" | "tokens");
    let mut bills: HashMap<usize, Bill> = HashMap::new();
    if needs_bills {
        for &i in &picked {
            bills.insert(i, index.total(state, i)?);
        }
        if let Some(m) = query.model() {
            picked.retain(|i| {
                bills
                    .get(i)
                    .is_some_and(|b| b.models.iter().any(|x| x == m))
            });
        }
    }
    sort(&mut picked, &index, &bills, query, state.clock.now());
    let total = picked.len();
    let page: Vec<usize> = picked
        .into_iter()
        .skip((query.page() - 1).saturating_mul(PAGE_SIZE))
        .take(PAGE_SIZE)
        .collect();
    let rows = rows_of(state, &index, &page)?;
    Ok(Listing {
        rows,
        total,
        version,
    })
}

/// The rows of `page` (positions in `index`), in order, billed on as many threads as there
/// are CPUs (each a contiguous share: a run not billed yet is read whole), on this one when
/// a thread cannot be started.
fn rows_of(state: &AppState, index: &Index, page: &[usize]) -> Result<Vec<Row>, ViewerError> {
    let one = |part: &[usize]| {
        part.iter()
            .map(|&i| index.row(state, i))
            .collect::<Result<Vec<_>, _>>()
    };
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let threads = cpus.min(page.len() / 8).max(1);
    if threads == 1 {
        return one(page);
    }
    let parts: Vec<&[usize]> = page.chunks(page.len().div_ceil(threads)).collect();
    std::thread::scope(|scope| {
        let spawned: Vec<_> = parts[1..]
            .iter()
            .map(|part| {
                let thread = std::thread::Builder::new().name("transcript-rows".to_owned());
                (*part, thread.spawn_scoped(scope, || one(part)).ok())
            })
            .collect();
        let mut rows = one(parts[0])?;
        for (part, handle) in spawned {
            match handle.map(std::thread::ScopedJoinHandle::join) {
                Some(Ok(done)) => rows.extend(done?),
                // Not started, or ended by a panic (a bug): this thread does its share.
                _ => rows.extend(one(part)?),
            }
        }
        Ok(rows)
    })
}

fn sort(
    picked: &mut [usize],
    index: &Index,
    bills: &HashMap<usize, Bill>,
    query: &ListQuery,
    now: Timestamp,
) {
    let runs = &index.runs;
    let cost = |i: &usize| bills.get(i).and_then(|b| b.cost_usd).unwrap_or(-1.0);
    let tokens = |i: &usize| bills.get(i).map_or(0, |b| b.tokens);
    picked.sort_by(|a, b| {
        let (ra, rb) = (&runs[*a], &runs[*b]);
        let by = match query.sort() {
            "duration" => duration_ms(ra, now).cmp(&duration_ms(rb, now)),
            "cost" => cost(a).total_cmp(&cost(b)),
            "tokens" => tokens(a).cmp(&tokens(b)),
            "events" => ra.events.cmp(&rb.events),
            "workflow" => ra.workflow.cmp(&rb.workflow),
            "status" => ra.state.as_str().cmp(rb.state.as_str()),
            _ => ra.started_at.cmp(&rb.started_at),
        };
        let by = if query.ascending() { by } else { by.reverse() };
        by.then(ra.run_id.cmp(&rb.run_id))
    });
}

/// A row as the live list sends it: the run, its status, and each cell's text.
#[derive(Debug, Serialize)]
pub struct LiveRow {
    /// The run.
    pub run_id: String,
    /// Its status (the cell's class is `st-<status>`).
    pub status: &'static str,
    /// The cells' texts, by `data-col`.
    pub cells: Cells,
}

/// The texts of a row's cells.
#[derive(Debug, Serialize)]
pub struct Cells {
    /// The `workflow` cell.
    pub workflow: String,
    /// The `status` cell.
    pub status: String,
    /// The `started` cell.
    pub started: String,
    /// The `duration` cell.
    pub duration: String,
    /// The `events` cell.
    pub events: String,
    /// The `cost` cell.
    pub cost: String,
    /// The `tokens` cell.
    pub tokens: String,
    /// The `models` cell.
    pub models: String,
}

impl From<&Row> for LiveRow {
    fn from(r: &Row) -> Self {
        LiveRow {
            run_id: r.run_id.clone(),
            status: r.status,
            cells: Cells {
                workflow: r.workflow.clone().unwrap_or_else(|| "?".to_owned()),
                status: r.status.to_owned(),
                started: r.started_at.clone().unwrap_or_else(|| "—".to_owned()),
                duration: show_duration(r.duration_ms),
                events: r.events.to_string(),
                cost: usd(r.cost_usd),
                tokens: r.tokens.to_string(),
                models: r.models.join(", "),
            },
        }
    }
}

/// Records `index` as the store's state (blocking: bills changed runs) and broadcasts the
/// rows of the runs that changed; returns the new version.
pub fn observe(state: &AppState, index: &Index) -> u64 {
    let (version, changed) = {
        let mut seen = state.snapshot.lock();
        seen.version += 1;
        let version = seen.version;
        let mut changed = Vec::new();
        for r in &index.runs {
            let now = (r.state, r.events);
            match seen.runs.get_mut(&r.run_id) {
                Some(entry) if (entry.0, entry.1) == now => {}
                Some(entry) => {
                    *entry = (now.0, now.1, version);
                    changed.push(r.run_id);
                }
                None => {
                    seen.runs.insert(r.run_id, (now.0, now.1, version));
                    // The first look knows no change: it is what the page shows.
                    if version > 1 {
                        changed.push(r.run_id);
                    }
                }
            }
        }
        (version, changed)
    };
    if state.snapshot.sender.receiver_count() > 0 {
        for id in changed {
            if let Some(json) = row_json(state, index, id) {
                let _ = state.snapshot.sender.send((version, json));
            }
        }
    }
    version
}

/// A run's row as the live list's event data (`None` when it cannot be billed now).
pub fn row_json(state: &AppState, index: &Index, id: RunId) -> Option<String> {
    let i = index.position(id)?;
    let row = index.row(state, i).ok()?;
    serde_json::to_string(&LiveRow::from(&row)).ok()
}
