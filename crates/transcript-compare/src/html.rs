//! One self-contained HTML page of a [`DiffDocument`], A and B side by side: inline CSS, no
//! script, no link, a Content-Security-Policy that loads nothing, as the export's page. Every
//! recorded value (paths, names, kinds, outputs, messages, tool arguments) goes through the
//! export's escaper (`transcript_export::escape_html`); only this module's own tags and class
//! names are markup. A change's field name is marked (`field changed`), A's value and B's
//! are tinted (`was`, `now`), an object's top-level keys whose values differ are marked
//! (`key`), and costs print as `transcript receipts` prints them ([`crate::usd`]).

use std::fmt::Write as _;

use serde_json::Value;
use transcript_export::escape_html as esc;

use crate::model::{Change, DiffDocument, LineOp, RunDiff, Side, StepDiff};
use crate::values::{as_money, json_eq};

const CSS: &str = r#"
:root { --fg:#1d2125; --muted:#6a737d; --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --panel:#f6f8fa; --line:#d0d7de; --del:#ffebe9; --ins:#dafbe1; }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 28px; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); }
h1 { font-size: 20px; } h2 { font-size: 16px; margin: 18px 0 6px; }
.meta { color: var(--muted); font-size: 12px; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; }
.head { font-weight: 600; }
section.step { border-left: 3px solid var(--line); padding-left: 12px; margin: 8px 0; }
section.step.differs { border-left-color: var(--bad); }
section.step.only { border-left-color: var(--warn); }
section.run { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; margin: 10px 0; }
.change { margin: 6px 0; }
.field { font-family: ui-monospace, monospace; font-size: 12px; color: var(--muted); }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; margin: 2px 0; white-space: pre-wrap; word-break: break-word; font-size: 12px; }
.del { background: var(--del); display: block; }
.ins { background: var(--ins); display: block; }
.eq { display: block; }
.absent { color: var(--muted); font-style: italic; }
.field.changed { color: var(--bad); font-weight: 600; }
.field.changed::before { content: "changed: "; color: var(--muted); font-weight: 400; }
pre.was { background: var(--del); border-color: var(--bad); }
pre.now { background: var(--ins); border-color: var(--ok); }
.key { display: block; outline: 2px solid var(--warn); background: #fff8c5; font-weight: 600; }
.equal { color: var(--ok); } .differs { color: var(--bad); }
.divergence { font-weight: 600; } #first-divergence { outline: 2px solid var(--bad); }
"#;

/// Renders the document as one HTML page; `a` and `b` name the two runs as the caller gave
/// them (file names or run ids).
pub fn render_html(doc: &DiffDocument, a: &str, b: &str) -> String {
    let mut body = String::new();
    let verdict = if doc.equal {
        "<p class=\"equal\">The runs are equal.</p>".to_owned()
    } else {
        format!(
            "<p class=\"differs\">The runs differ: {} of {} compared steps changed, {} only in A, {} only in B.</p>",
            doc.summary.changed, doc.summary.compared, doc.summary.only_in_a, doc.summary.only_in_b
        )
    };
    let _ = write!(
        body,
        "<h1>transcript diff</h1>\n<div class=\"sides\"><div class=\"head\">A: {}</div><div class=\"head\">B: {}</div></div>\n{verdict}\n",
        esc(a),
        esc(b)
    );
    if let Some(d) = &doc.divergence {
        // What a reader looks for first (#61): the step and turn, linked to its section.
        let turn = d.turn.map_or(String::new(), |t| format!(" turn {}", t + 1));
        let _ = writeln!(
            body,
            "<p class=\"divergence\">First divergence: <a href=\"#first-divergence\">step {}{turn}</a> ({})</p>",
            esc(&d.step),
            esc(&d.field)
        );
    }
    let mut target = doc.divergence.as_ref().map(|d| d.step.clone());
    render_run(&doc.run, "", &mut target, &mut body);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <title>transcript diff: {} vs {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\
         <p class=\"meta\">Diff document schema {}; ids {}; timestamps, durations and seqs are not compared.</p>\n\
         </body>\n</html>\n",
        esc(a),
        esc(b),
        esc(&doc.schema_version),
        if doc.options.strict_ids {
            "compared"
        } else {
            "ignored"
        }
    )
}

/// `target`: the first divergence's step name, taken by the section that carries its anchor.
fn render_run(run: &RunDiff, prefix: &str, target: &mut Option<String>, out: &mut String) {
    let _ = write!(
        out,
        "<section class=\"run\">\n<div class=\"sides\"><div>run {} {} <strong>{}</strong></div><div>run {} {} <strong>{}</strong></div></div>\n",
        esc(&run.a_run_id),
        esc(run.a_workflow.as_deref().unwrap_or("?")),
        esc(&run.a_status),
        esc(&run.b_run_id),
        esc(run.b_workflow.as_deref().unwrap_or("?")),
        esc(&run.b_status),
    );
    for c in &run.changes {
        render_change(c, out);
    }
    for s in &run.steps {
        render_step(s, prefix, target, out);
    }
    out.push_str("</section>\n");
}

fn render_step(step: &StepDiff, prefix: &str, target: &mut Option<String>, out: &mut String) {
    // Named as `first_divergence` names steps: the child-run prefix, the path, `#N` past 0.
    let name = match step.iteration {
        0 => format!("{prefix}{}", step.path),
        n => format!("{prefix}{}#{n}", step.path),
    };
    let anchor = if !step.equal && target.as_deref() == Some(name.as_str()) {
        *target = None;
        " id=\"first-divergence\""
    } else {
        ""
    };
    let class = match step.side {
        Side::Both if step.changes.is_empty() => "step",
        Side::Both => "step differs",
        _ => "step only",
    };
    let title = format!(
        "{} [{}] {} #{}{}",
        step.path,
        step.kind,
        step.name,
        step.iteration,
        if step.occurrence > 0 {
            format!(" (run {})", step.occurrence + 1)
        } else {
            String::new()
        }
    );
    let cell = |status: &Option<String>| match status {
        Some(s) => format!("<strong>{}</strong>", esc(s)),
        None => "<span class=\"absent\">not in this run</span>".to_owned(),
    };
    let _ = write!(
        out,
        "<section class=\"{class}\"{anchor}>\n<h2>{}</h2>\n<div class=\"sides\"><div>{}</div><div>{}</div></div>\n",
        esc(&title),
        cell(&step.a_status),
        cell(&step.b_status),
    );
    if step.side == Side::Both && step.changes.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"meta\">{}</p>",
            if step.equal {
                "equal"
            } else {
                "equal itself; nested steps differ"
            }
        );
    }
    for c in &step.changes {
        render_change(c, out);
    }
    for s in &step.steps {
        render_step(s, prefix, target, out);
    }
    if let Some(child) = &step.child {
        render_run(child, &format!("{name}/"), target, out);
    }
    out.push_str("</section>\n");
}

/// A value as text: a cost as receipts print it, a string as itself, other JSON pretty.
fn shown(field: &str, v: &Value) -> String {
    if let Some(money) = as_money(field, v) {
        return money;
    }
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// One side's value, escaped: an object beside an object shows each top-level key on its own
/// line, the keys whose values differ from the other side's marked (`key`).
fn value_html(field: &str, v: &Value, other: &Value) -> String {
    let (Value::Object(map), Value::Object(theirs)) = (v, other) else {
        return esc(&shown(field, v));
    };
    let mut out = String::from("{\n");
    let last = map.len().saturating_sub(1);
    for (i, (key, value)) in map.iter().enumerate() {
        let comma = if i < last { "," } else { "" };
        let line = format!(
            "  {}: {}{comma}",
            Value::String(key.clone()),
            serde_json::to_string(value).unwrap_or_default()
        );
        if theirs.get(key).is_some_and(|t| json_eq(t, value)) {
            let _ = writeln!(out, "{}", esc(&line));
        } else {
            let _ = write!(out, "<span class=\"key\">{}</span>", esc(&line));
        }
    }
    out.push('}');
    out
}

fn render_change(c: &Change, out: &mut String) {
    let _ = write!(
        out,
        "<div class=\"change\"><div class=\"field changed\">{}</div>\n<div class=\"sides\">",
        esc(&c.field)
    );
    if c.hunks.is_empty() {
        for (v, other, class) in [(&c.a, &c.b, "was"), (&c.b, &c.a, "now")] {
            if v.is_null() {
                out.push_str("<div><pre><span class=\"absent\">absent</span></pre></div>");
            } else {
                let _ = write!(
                    out,
                    "<div><pre class=\"{class}\">{}</pre></div>",
                    value_html(&c.field, v, other)
                );
            }
        }
    } else {
        render_hunks(c, out);
    }
    out.push_str("</div>");
    if let Some(note) = &c.note {
        let _ = write!(out, "<p class=\"meta\">{}</p>", esc(note));
    }
    out.push_str("</div>\n");
}

/// A multi-line text's line diff, A's lines left and B's right.
fn render_hunks(c: &Change, out: &mut String) {
    let (mut left, mut right) = (String::new(), String::new());
    for h in &c.hunks {
        let _ = writeln!(
            left,
            "<span class=\"field\">@@ line {} ({} lines)</span>",
            h.a_start, h.a_lines
        );
        let _ = writeln!(
            right,
            "<span class=\"field\">@@ line {} ({} lines)</span>",
            h.b_start, h.b_lines
        );
        for l in &h.lines {
            let line = esc(&l.text);
            match l.op {
                LineOp::Equal => {
                    let _ = write!(left, "<span class=\"eq\">{line}</span>");
                    let _ = write!(right, "<span class=\"eq\">{line}</span>");
                }
                LineOp::Delete => {
                    let _ = write!(left, "<span class=\"del\">{line}</span>");
                }
                LineOp::Insert => {
                    let _ = write!(right, "<span class=\"ins\">{line}</span>");
                }
            }
        }
    }
    let _ = write!(
        out,
        "<div><pre>{left}</pre></div><div><pre>{right}</pre></div>"
    );
}
