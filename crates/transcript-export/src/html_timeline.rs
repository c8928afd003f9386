//! The waterfall at the top of the HTML page (issue #42): every run, step, agent turn and
//! tool call as a bar on one time axis, nested under its parent (parallel branches and
//! `for_each` iterations are their own rows, so they show as overlapping lanes; a child run
//! sits under its `call_workflow` step). No script: each bar is a link to its step's detail
//! (`#n…`, the anchors of the page's sections, numbered in the same order), placed with
//! inline percentage styles; its details (status, duration, tokens, cost) are its own text,
//! shown on hover and keyboard focus by CSS alone. Every recorded value goes through the
//! page's escaper: a hostile name is text, never markup or a link.

use std::fmt::Write as _;

use transcript_domain::{Timestamp, Usage};

use crate::model::{Entry, ExportDocument, RunExport, StepExport};
use crate::render_util::{cost_note, duration, escape_html as esc, usage_line};

/// The CSS of the timeline (and the `cancelled` status the page lacked).
pub const TIMELINE_CSS: &str = r#"
.cancelled { color: var(--muted); text-decoration: line-through; }
section.timeline { margin: 6px 0 18px; }
.tl-axis { display:flex; justify-content:space-between; color:var(--muted); font-size:11px; margin-left:34%; }
.tl-row { display:grid; grid-template-columns: 34% 66%; align-items:center; min-height:18px; font-size:12px; }
.tl-row:nth-child(even) { background: var(--panel); }
.tl-label { display:flex; gap:4px; align-items:baseline; white-space:nowrap; padding-right:6px; min-width:0; }
.tl-name { overflow:hidden; text-overflow:ellipsis; min-width:0; }
.tl-label .st { font-size:11px; flex:none; }
.tl-track { position:relative; height:14px; }
a.bar { position:absolute; top:2px; height:10px; min-width:2px; border-radius:2px; background:#8c959f; display:block; }
a.bar.k-run { background:#57606a; }
a.bar.k-step.succeeded { background:#2da44e; } a.bar.k-turn { background:#8250df; } a.bar.k-tool { background:#0969da; }
a.bar.failed { background: var(--bad); outline: 1px solid #82071e; }
a.bar.incomplete { background: repeating-linear-gradient(45deg, var(--warn), var(--warn) 3px, #fff8c5 3px, #fff8c5 6px); }
a.bar.cancelled { background: repeating-linear-gradient(45deg, #6e7781, #6e7781 3px, #eaeef2 3px, #eaeef2 6px); }
a.bar .tip { position:absolute; left:0; top:12px; z-index:2; white-space:nowrap; background:#0d1117; color:#e6edf3; padding:2px 6px; border-radius:4px; font-size:11px; display:none; }
a.bar:hover .tip, a.bar:focus .tip { display:block; }
a.bar:focus { outline: 2px solid #0969da; outline-offset: 1px; }
"#;

/// One bar of the waterfall.
struct Bar {
    depth: usize,
    /// `k-run`, `k-step`, `k-turn` or `k-tool` (not the page's `.tool` box).
    class: &'static str,
    label: String,
    status: String,
    start: Option<i64>,
    end: Option<i64>,
    anchor: usize,
    run_id: String,
    path: String,
    usage: Option<Usage>,
    cost: Option<f64>,
}

fn ms(t: Option<&str>) -> Option<i64> {
    t.and_then(|t| Timestamp::parse(t).ok())
        .map(Timestamp::unix_millis)
}

/// Collects the bars in the page's section order (the anchors' numbering of `to_html`).
struct Collector {
    bars: Vec<Bar>,
    ids: usize,
}

impl Collector {
    fn run(&mut self, run: &RunExport, depth: usize) {
        self.ids += 1;
        self.bars.push(Bar {
            depth,
            class: "k-run",
            label: format!("run {}", run.workflow.as_deref().unwrap_or("?")),
            status: run.status.clone(),
            start: ms(run.started_at.as_deref()),
            end: ms(run.completed_at.as_deref()),
            anchor: self.ids,
            run_id: run.run_id.clone(),
            path: String::new(),
            usage: run.usage.clone(),
            cost: run.cost_usd,
        });
        for s in &run.steps {
            self.step(run, s, depth + 1);
        }
    }

    fn step(&mut self, run: &RunExport, step: &StepExport, depth: usize) {
        self.ids += 1;
        let anchor = self.ids;
        let iteration = if step.iteration > 0 || step.path.contains('.') {
            format!(" #{}", step.iteration)
        } else {
            String::new()
        };
        let start = ms(Some(&step.started_at));
        self.bars.push(Bar {
            depth,
            class: "k-step",
            label: format!("{}{iteration} [{}]", step.name, step.kind),
            status: step.status.clone(),
            start,
            end: ms(step.completed_at.as_deref()),
            anchor,
            run_id: run.run_id.clone(),
            path: step.path.clone(),
            usage: step.usage.clone(),
            cost: step.cost_usd,
        });
        self.entries(run, step, anchor, depth + 1, start);
        for s in &step.steps {
            self.step(run, s, depth + 1);
        }
        if let Some(child) = &step.child_run {
            self.run(child, depth + 1);
        }
    }

    /// Agent turns (from the event before each assistant message to the message) and tool
    /// calls (call to result) of one step, linked to the step's detail.
    fn entries(
        &mut self,
        run: &RunExport,
        step: &StepExport,
        anchor: usize,
        depth: usize,
        mut last: Option<i64>,
    ) {
        for e in &step.entries {
            match e {
                Entry::Message(m) if m.role == "assistant" => {
                    let at = ms(Some(&m.timestamp));
                    self.bars.push(Bar {
                        depth,
                        class: "k-turn",
                        label: format!(
                            "turn {}",
                            m.model.as_deref().or(m.provider.as_deref()).unwrap_or("")
                        ),
                        status: "succeeded".to_owned(),
                        start: last.or(at),
                        end: at,
                        anchor,
                        run_id: run.run_id.clone(),
                        path: step.path.clone(),
                        usage: m.usage.clone(),
                        cost: m.cost_usd,
                    });
                    last = at.or(last);
                }
                Entry::Message(m) => last = ms(Some(&m.timestamp)).or(last),
                Entry::ToolCall(c) => {
                    let status = match (&c.error, c.completed) {
                        (Some(_), _) => "failed",
                        (None, true) => "succeeded",
                        (None, false) => "incomplete",
                    };
                    let start = ms(Some(&c.started_at));
                    let end = ms(c.completed_at.as_deref());
                    self.bars.push(Bar {
                        depth,
                        class: "k-tool",
                        label: format!("tool {}", c.name),
                        status: status.to_owned(),
                        start,
                        end,
                        anchor,
                        run_id: run.run_id.clone(),
                        path: step.path.clone(),
                        usage: None,
                        cost: None,
                    });
                    last = end.or(start).or(last);
                }
            }
        }
    }
}

/// Renders the timeline section of `doc` (empty when no bar has a time).
pub fn render_timeline(doc: &ExportDocument, out: &mut String) {
    let mut c = Collector {
        bars: Vec::new(),
        ids: 0,
    };
    c.run(&doc.run, 0);
    let times = c.bars.iter().flat_map(|b| [b.start, b.end]).flatten();
    let (Some(origin), Some(last)) = (times.clone().min(), times.max()) else {
        return;
    };
    let span = (last - origin).max(1) as f64;
    let priced = doc.cost.is_some();
    let _ = write!(
        out,
        "<section class=\"timeline\" aria-label=\"Timeline\"><h2>Timeline</h2>\
         <div class=\"tl-axis\" aria-hidden=\"true\"><span>0</span><span>{}</span></div>",
        esc(&duration(Some(last - origin)))
    );
    for b in &c.bars {
        bar_row(b, (origin, last, span), priced, out);
    }
    out.push_str("</section>\n");
}

fn bar_row(b: &Bar, (origin, last, span): (i64, i64, f64), priced: bool, out: &mut String) {
    let start = b.start.or(b.end).unwrap_or(origin);
    // A bar with no end (incomplete) runs to the last instant recorded.
    let end = b.end.unwrap_or(last).max(start);
    let left = (start - origin) as f64 / span * 100.0;
    let width = (end - start) as f64 / span * 100.0;
    let mut tip = format!(
        "{} · {} · {}",
        b.label,
        b.status,
        duration(b.end.map(|_| end - start))
    );
    if let Some(u) = &b.usage {
        let _ = write!(tip, " · tokens {}", usage_line(u));
    }
    if let Some(c) = cost_note(priced, b.cost, b.usage.as_ref()) {
        let _ = write!(tip, " · cost {c}");
    }
    let _ = write!(
        out,
        "<div class=\"tl-row\"><div class=\"tl-label\" style=\"padding-left:{}px\"><span class=\"tl-name\">{}</span> <span class=\"st {}\">{}</span></div>\
         <div class=\"tl-track\"><a class=\"bar {} {}\" href=\"#n{}\" aria-label=\"{}\" data-run=\"{}\" data-path=\"{}\" \
         style=\"left:{left:.4}%;width:{width:.4}%\"><span class=\"tip\">{}</span></a></div></div>",
        b.depth * 12,
        esc(&b.label),
        esc(&b.status),
        esc(&b.status),
        b.class,
        esc(&b.status),
        b.anchor,
        esc(&tip),
        esc(&b.run_id),
        esc(&b.path),
        esc(&tip),
    );
}
