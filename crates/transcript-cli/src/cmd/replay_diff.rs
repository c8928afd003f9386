//! The comparison `transcript replay` prints: transcript-compare's [`DiffDocument`] of the
//! recording (A) and the replay (B), as text. Every recorded value is escaped before it
//! reaches the terminal (`style::clean`).

use std::fmt::Write as _;

use serde_json::Value;
use transcript_compare::{Change, DiffDocument, LineOp, Side};

use crate::style::clean;

/// The comparison as lines: a summary, then per differing step its changes (multi-line texts
/// as unified hunks).
pub fn render(doc: &DiffDocument, recorded: &str) -> String {
    let s = &doc.summary;
    let mut out = String::new();
    if doc.equal {
        let _ = writeln!(
            out,
            "replay: equal to {} ({} step(s) compared)",
            clean(recorded),
            s.compared
        );
        return out;
    }
    let _ = writeln!(
        out,
        "replay: differs from {} ({} step(s) compared, {} changed, {} only in the recording, {} only in the replay)",
        clean(recorded),
        s.compared,
        s.changed,
        s.only_in_a,
        s.only_in_b
    );
    for change in &doc.run.changes {
        change_lines(&mut out, "run", change);
    }
    for (name, step) in doc.differing_steps() {
        let name = match step.iteration {
            0 => name,
            i => format!("{name}[{i}]"),
        };
        match step.side {
            Side::OnlyA => {
                let _ = writeln!(out, "  step {}: only in the recording", clean(&name));
            }
            Side::OnlyB => {
                let _ = writeln!(out, "  step {}: only in the replay", clean(&name));
            }
            Side::Both => {
                for change in &step.changes {
                    change_lines(&mut out, &format!("step {name}"), change);
                }
            }
        }
    }
    out
}

fn change_lines(out: &mut String, what: &str, change: &Change) {
    if change.hunks.is_empty() {
        let _ = writeln!(
            out,
            "  {}: {}: recorded {}, replay {}",
            clean(what),
            clean(&change.field),
            clean(&value(&change.a)),
            clean(&value(&change.b))
        );
        return;
    }
    let _ = writeln!(out, "  {}: {}:", clean(what), clean(&change.field));
    let _ = writeln!(out, "    --- recorded\n    +++ replay");
    for hunk in &change.hunks {
        let _ = writeln!(
            out,
            "    @@ -{},{} +{},{} @@",
            hunk.a_start, hunk.a_lines, hunk.b_start, hunk.b_lines
        );
        for line in &hunk.lines {
            let op = match line.op {
                LineOp::Equal => ' ',
                LineOp::Delete => '-',
                LineOp::Insert => '+',
            };
            let _ = writeln!(out, "    {op}{}", clean(&line.text));
        }
    }
}

/// A value on one line: a string as written (quoted), anything else as JSON.
fn value(v: &Value) -> String {
    match v {
        Value::Null => "absent".to_owned(),
        other => other.to_string(),
    }
}
