//! A self-contained HTML page of an [`ExportDocument`]: inline CSS, no
//! scripts, no fonts or images from the network. The step tree is a
//! navigable outline (anchors), the conversation pairs tool calls with their
//! results, and each step shows its timing and token usage. The page opens with
//! the run's waterfall ([`crate::html_timeline`]) and, when it reported usage,
//! where the money went ([`crate::html_costs`]); their bars link to the same
//! `#n…` anchors, numbered in the same order as the sections below.

use std::fmt::Write as _;

use serde_json::Value;
use transcript_domain::Role;

use crate::html_costs::{COSTS_CSS, render_costs};
use crate::html_timeline::{TIMELINE_CSS, render_timeline};
use crate::model::{
    CostSummary, Entry, ExportBlock, ExportDocument, RunExport, StepExport, ToolCallExport,
};
use crate::render_util::{
    command_stderr, cost_note, duration, escape_html as esc, model_tokens, usage_line, usd,
};

const CSS: &str = r#"
:root { --fg:#1d2125; --muted:#6a737d; --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --bg:#fff; --panel:#f6f8fa; --line:#d0d7de; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); display:flex; }
nav { width: 320px; min-width: 240px; height: 100vh; overflow:auto; position:sticky; top:0; padding:16px; border-right:1px solid var(--line); background:var(--panel); }
nav ul { list-style:none; padding-left: 14px; margin: 2px 0; }
nav > ul { padding-left: 0; }
nav a { color: inherit; text-decoration:none; }
nav a:hover { text-decoration: underline; }
main { flex:1; padding: 16px 28px; max-width: 1100px; }
h1 { font-size: 20px; } h2, h3, h4, h5, h6 { font-size: 15px; margin: 18px 0 6px; }
section.step { border-left: 3px solid var(--line); padding-left: 12px; margin: 10px 0; }
section.run { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; margin: 10px 0; }
.succeeded { color: var(--ok); } .failed { color: var(--bad); } .incomplete { color: var(--warn); }
.meta { color: var(--muted); font-size: 12px; }
.msg { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
.msg .who { font-weight: 600; }
.text { white-space: pre-wrap; word-break: break-word; }
details.thinking { color: var(--muted); }
pre { background: #0d1117; color: #e6edf3; padding: 8px 10px; border-radius: 6px; overflow:auto; white-space: pre-wrap; word-break: break-word; }
.tool { border: 1px dashed var(--line); border-radius: 6px; padding: 6px 10px; margin: 8px 0; }
.error { color: var(--bad); font-weight: 600; }
.stderr pre { border-left: 3px solid var(--bad); }
"#;

/// Renders the document as one HTML page.
pub fn to_html(doc: &ExportDocument) -> String {
    let mut ids = 0usize;
    let mut nav = String::new();
    nav_run(&doc.run, &mut ids, &mut nav);
    let mut ids = 0usize;
    let mut body = String::new();
    render_timeline(doc, &mut body);
    render_costs(doc, &mut body);
    render_run(&doc.run, (1, doc.cost.is_some()), &mut ids, &mut body);
    if let Some(cost) = &doc.cost {
        render_cost(cost, &mut body);
    }
    let title = format!(
        "Run {} — {}",
        doc.run.workflow.as_deref().unwrap_or("?"),
        doc.run.status
    );
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <title>{}</title>\n<style>{CSS}{TIMELINE_CSS}{COSTS_CSS}</style>\n</head>\n<body>\n\
         <nav aria-label=\"Step tree\"><strong>Steps</strong>\n<ul>{nav}</ul></nav>\n\
         <main>\n{body}\n<p class=\"meta\">Exported by {} (schema {}){}{}.</p>\n</main>\n</body>\n</html>\n",
        esc(&title),
        esc(&doc.generator),
        esc(&doc.schema_version),
        if doc.options.reasoning_included {
            ""
        } else {
            "; reasoning omitted"
        },
        doc.options
            .truncate_outputs_bytes
            .map(|b| format!("; tool values truncated above {b} bytes"))
            .unwrap_or_default(),
    )
}

fn nav_run(run: &RunExport, ids: &mut usize, out: &mut String) {
    *ids += 1;
    let _ = write!(
        out,
        "<li><a href=\"#n{}\" class=\"{}\">run {}</a><ul>",
        ids,
        esc(&run.status),
        esc(run.workflow.as_deref().unwrap_or("?"))
    );
    for s in &run.steps {
        nav_step(s, ids, out);
    }
    out.push_str("</ul></li>");
}

fn nav_step(step: &StepExport, ids: &mut usize, out: &mut String) {
    *ids += 1;
    let _ = write!(
        out,
        "<li><a href=\"#n{}\" class=\"{}\">{}{}</a>",
        ids,
        esc(&step.status),
        esc(&step.name),
        if step.iteration > 0 || step.path.contains('.') {
            format!(" #{}", step.iteration)
        } else {
            String::new()
        }
    );
    if !step.steps.is_empty() || step.child_run.is_some() {
        out.push_str("<ul>");
        for s in &step.steps {
            nav_step(s, ids, out);
        }
        if let Some(child) = &step.child_run {
            nav_run(child, ids, out);
        }
        out.push_str("</ul>");
    }
    out.push_str("</li>");
}

fn h(level: usize) -> usize {
    level.clamp(1, 6)
}

/// The cost section of a priced document: one line per model, the total, the models
/// without a price.
fn render_cost(cost: &CostSummary, out: &mut String) {
    out.push_str("<section class=\"cost\"><h2>Cost by model</h2><ul>");
    for m in &cost.by_model {
        let _ = write!(
            out,
            "<li><code>{}</code>: {} turns · {} · cost {}</li>",
            esc(&m.model),
            m.turns,
            esc(&model_tokens(&m.usage)),
            esc(&cost_note(true, m.cost_usd, Some(&m.usage)).unwrap_or_default())
        );
    }
    let _ = write!(
        out,
        "<li>Total (with child runs): {} · the CLIs reported {}</li></ul>",
        esc(&usd(cost.total_usd)),
        esc(&usd(cost.reported_usd))
    );
    for m in &cost.unpriced_models {
        if m == transcript_domain::bill::NO_MODEL {
            // Not a gap of the table: the provider and the step named no model.
            out.push_str(
                "<p class=\"incomplete\">⚠ Some turns name no model (set the step's <code>model:</code>): their cost shows —, never $0</p>",
            );
            continue;
        }
        let _ = write!(
            out,
            "<p class=\"incomplete\">⚠ No price for <code>{}</code>: its cost shows —, never $0</p>",
            esc(m)
        );
    }
    let _ = writeln!(
        out,
        "<p class=\"meta\">Priced with {}.</p></section>",
        esc(&cost.price_table)
    );
}

/// ` · cost $0.1603` for a priced run or step with usage, else nothing.
fn cost_meta(priced: bool, cost: Option<f64>, usage: Option<&transcript_domain::Usage>) -> String {
    cost_note(priced, cost, usage)
        .map(|c| format!(" · cost {}", esc(&c)))
        .unwrap_or_default()
}

fn render_run(run: &RunExport, (level, priced): (usize, bool), ids: &mut usize, out: &mut String) {
    *ids += 1;
    let _ = write!(
        out,
        "<section class=\"run\" id=\"n{}\"><h{lv}>Run <code>{}</code> <span class=\"{}\">{}</span></h{lv}>\
         <p class=\"meta\">run {} · started {} · {}{}{}</p>",
        ids,
        esc(run.workflow.as_deref().unwrap_or("?")),
        esc(&run.status),
        esc(&run.status),
        esc(&run.run_id),
        esc(run.started_at.as_deref().unwrap_or("—")),
        esc(&duration(run.duration_ms)),
        run.usage
            .as_ref()
            .map(|u| format!(" · tokens {}", esc(&usage_line(u))))
            .unwrap_or_default(),
        cost_meta(priced, run.cost_usd, run.usage.as_ref()),
        lv = h(level),
    );
    if let Some(err) = &run.error {
        let _ = write!(out, "<p class=\"error\">Error: {}</p>", esc(err));
    }
    for p in &run.problems {
        let _ = write!(out, "<p class=\"incomplete\">⚠ {}</p>", esc(p));
    }
    render_entries(&run.entries, out);
    for s in &run.steps {
        render_step(s, (level + 1, priced), ids, out);
    }
    out.push_str("</section>\n");
}

fn render_step(
    step: &StepExport,
    (level, priced): (usize, bool),
    ids: &mut usize,
    out: &mut String,
) {
    *ids += 1;
    let _ = write!(
        out,
        "<section class=\"step\" id=\"n{}\"><h{lv}><span class=\"{}\">●</span> {} <span class=\"meta\">[{}] {}{}</span></h{lv}>\
         <p class=\"meta\">{} · {} · started {}{}{}</p>",
        ids,
        esc(&step.status),
        esc(&step.name),
        esc(&step.kind),
        esc(&step.path),
        if step.iteration > 0 || step.path.contains('.') {
            format!(" #{}", step.iteration)
        } else {
            String::new()
        },
        esc(&step.status),
        esc(&duration(step.duration_ms)),
        esc(&step.started_at),
        step.usage
            .as_ref()
            .map(|u| format!(" · tokens {}", esc(&usage_line(u))))
            .unwrap_or_default(),
        cost_meta(priced, step.cost_usd, step.usage.as_ref()),
        lv = h(level),
    );
    if let Some(err) = &step.error {
        let _ = write!(out, "<p class=\"error\">Error: {}</p>", esc(err));
    }
    if let Some(result) = &step.result {
        let _ = write!(
            out,
            "<details><summary>Result</summary>{}</details>",
            pre(result)
        );
    }
    // Shown open: what a command said on its standard error explains its failure.
    if let Some(stderr) = command_stderr(&step.kind, step.result.as_ref()) {
        let _ = write!(
            out,
            "<div class=\"stderr\"><span class=\"meta\">stderr</span>{}</div>",
            pre(stderr)
        );
    }
    render_entries(&step.entries, out);
    for s in &step.steps {
        render_step(s, (level + 1, priced), ids, out);
    }
    if let Some(child) = &step.child_run {
        render_run(child, (level + 1, priced), ids, out);
    } else if let Some(id) = &step.child_run_id {
        let _ = write!(
            out,
            "<p class=\"incomplete\">⚠ child run {} not found</p>",
            esc(id)
        );
    }
    out.push_str("</section>\n");
}

fn render_entries(entries: &[Entry], out: &mut String) {
    for e in entries {
        match e {
            Entry::Message(m) => {
                let mut who = if m.role_kind() == Some(Role::User) {
                    "Prompt".to_owned()
                } else {
                    "Assistant".to_owned()
                };
                for part in [&m.provider, &m.model].into_iter().flatten() {
                    who.push_str(&format!(" · {part}"));
                }
                let _ = write!(
                    out,
                    "<div class=\"msg\"><div class=\"who\">{}{}</div>",
                    esc(&who),
                    m.usage
                        .as_ref()
                        .map(|u| format!(" <span class=\"meta\">{}</span>", esc(&usage_line(u))))
                        .unwrap_or_default()
                );
                for (i, b) in m.blocks.iter().enumerate() {
                    render_block(b, m.role_kind() == Some(Role::User) && i > 0, out);
                }
                out.push_str("</div>\n");
            }
            Entry::ToolCall(c) => render_call(c, out),
        }
    }
}

fn render_block(block: &ExportBlock, system: bool, out: &mut String) {
    match block {
        ExportBlock::Text { text, .. } if system => {
            let _ = write!(
                out,
                "<details><summary>System prompt</summary><div class=\"text\">{}</div></details>",
                esc(text)
            );
        }
        ExportBlock::Text { text, .. } | ExportBlock::Stream { text, .. } => {
            let _ = write!(out, "<div class=\"text\">{}</div>", esc(text));
        }
        ExportBlock::Thinking { thinking, .. } => {
            let _ = write!(
                out,
                "<details class=\"thinking\"><summary>Thinking</summary><div class=\"text\">{}</div></details>",
                esc(thinking)
            );
        }
        ExportBlock::ToolUse {
            tool_name,
            tool_id,
            tool_input,
            fidelity,
        } => {
            let _ = write!(
                out,
                "<div class=\"tool\">tool use <strong>{}</strong> <span class=\"meta\">{} · {}</span>{}</div>",
                esc(tool_name),
                esc(tool_id),
                esc(fidelity),
                pre(tool_input)
            );
        }
        ExportBlock::ToolResult {
            tool_id,
            tool_content,
            ..
        } => {
            let _ = write!(
                out,
                "<div class=\"tool\">↳ result <span class=\"meta\">{}</span>{}</div>",
                esc(tool_id),
                pre(tool_content)
            );
        }
        ExportBlock::Command { command, .. } => {
            let _ = write!(out, "<pre>$ {}</pre>", esc(command));
        }
        ExportBlock::Other { original_type, .. } => {
            let _ = write!(
                out,
                "<p class=\"meta\">(block of unknown type {} not rendered)</p>",
                esc(original_type)
            );
        }
        ExportBlock::Unknown => {
            out.push_str("<p class=\"meta\">(block of a newer type not rendered)</p>")
        }
    }
}

fn render_call(call: &ToolCallExport, out: &mut String) {
    let status = match (&call.error, call.completed) {
        (Some(_), _) => "<span class=\"failed\">error</span>",
        (None, true) => "<span class=\"succeeded\">ok</span>",
        (None, false) => "<span class=\"incomplete\">no result</span>",
    };
    let _ = write!(
        out,
        "<div class=\"tool\">tool call <strong>{}</strong> <span class=\"meta\">{} · {}</span> {status}\
         <details open><summary>Input</summary>{}</details>",
        esc(&call.name),
        esc(&call.call_id),
        esc(&call.fidelity),
        pre(&call.input)
    );
    if call.completed {
        if let Some(err) = &call.error {
            let _ = write!(out, "<p class=\"error\">{}</p>", esc(err));
        }
        let _ = write!(
            out,
            "<details open><summary>Output</summary>{}</details>",
            pre(&call.output)
        );
    }
    out.push_str("</div>\n");
}

fn pre(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    };
    format!("<pre>{}</pre>", esc(&text))
}
