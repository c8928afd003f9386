//! Comparing two [`RunRecord`]s into a [`DiffDocument`]: the trees aligned level by level
//! ([`crate::align`]), child runs under their `call_workflow` steps, and per aligned step the
//! fields that differ.
//!
//! Compared: status, error, exit code, command, output (with a line diff), every message
//! (role, model, provider, each block: text, thinking, tool calls by name and arguments, tool
//! results), the router's tool calls (name, input, output, error), tokens and priced cost.
//! Never compared: timestamps, durations, seqs. Ids (run ids, child run ids, call ids and the
//! ids of `tool_use` / `tool_result` blocks) only with [`DiffOptions::strict_ids`].

use serde::Serialize;
use serde_json::{Value, json};
use transcript_domain::Usage;

use crate::align::{Pair, align};
use crate::model::{
    Change, DIFF_SCHEMA_VERSION, DiffDocument, DiffOptionsRecord, DiffSummary, RunDiff, Side,
    StepDiff,
};
use crate::record::{BlockRecord, RunRecord, Spend, StepRecord, ToolCallRecord, TurnRecord};
use crate::text::hunks;

/// What to compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffOptions {
    /// Compare run ids, child run ids and call ids too (`--strict-ids`).
    pub strict_ids: bool,
}

/// Compares run A with run B.
pub fn diff(a: &RunRecord, b: &RunRecord, options: &DiffOptions) -> DiffDocument {
    let mut summary = DiffSummary::default();
    let run = diff_runs(a, b, options, &mut summary);
    DiffDocument {
        schema_version: DIFF_SCHEMA_VERSION.to_owned(),
        equal: run.equal,
        options: DiffOptionsRecord {
            strict_ids: options.strict_ids,
        },
        summary,
        run,
    }
}

fn diff_runs(
    a: &RunRecord,
    b: &RunRecord,
    options: &DiffOptions,
    summary: &mut DiffSummary,
) -> RunDiff {
    let mut c = Changes::default();
    if options.strict_ids {
        c.value("run_id", &a.run_id.to_string(), &b.run_id.to_string());
    }
    c.value("workflow", &a.workflow, &b.workflow);
    c.value("status", a.status.as_str(), b.status.as_str());
    c.text("error", a.error.as_deref(), b.error.as_deref());
    c.spend("", &a.spend, &b.spend);
    let steps = diff_steps(&a.steps, &b.steps, options, summary);
    RunDiff {
        a_run_id: a.run_id.to_string(),
        b_run_id: b.run_id.to_string(),
        a_workflow: a.workflow.clone(),
        b_workflow: b.workflow.clone(),
        a_status: a.status.as_str().to_owned(),
        b_status: b.status.as_str().to_owned(),
        equal: c.0.is_empty() && steps.iter().all(|s| s.equal),
        changes: c.0,
        steps,
    }
}

fn diff_steps(
    a: &[StepRecord],
    b: &[StepRecord],
    options: &DiffOptions,
    summary: &mut DiffSummary,
) -> Vec<StepDiff> {
    align(a, b)
        .into_iter()
        .map(|pair| match pair {
            Pair::Both(x, y, n) => diff_step(x, y, n, options, summary),
            Pair::OnlyA(x, n) => one_side(x, n, Side::OnlyA, summary),
            Pair::OnlyB(y, n) => one_side(y, n, Side::OnlyB, summary),
        })
        .collect()
}

fn one_side(s: &StepRecord, occurrence: u64, side: Side, summary: &mut DiffSummary) -> StepDiff {
    match side {
        Side::OnlyA => summary.only_in_a += 1,
        _ => summary.only_in_b += 1,
    }
    let status = Some(s.status.as_str().to_owned());
    let steps = {
        // Nested steps are on the same side only.
        let empty: [StepRecord; 0] = [];
        let (l, r) = match side {
            Side::OnlyA => (s.steps.as_slice(), &empty[..]),
            _ => (&empty[..], s.steps.as_slice()),
        };
        let mut nested = Vec::new();
        for p in align(l, r) {
            nested.push(match p {
                Pair::OnlyA(x, n) => one_side(x, n, Side::OnlyA, summary),
                Pair::OnlyB(y, n) => one_side(y, n, Side::OnlyB, summary),
                Pair::Both(..) => continue,
            });
        }
        nested
    };
    StepDiff {
        path: s.path.clone(),
        iteration: s.iteration,
        occurrence,
        name: s.name.clone(),
        kind: s.kind.clone(),
        side,
        a_status: (side == Side::OnlyA).then(|| status.clone()).flatten(),
        b_status: (side == Side::OnlyB).then_some(status).flatten(),
        equal: false,
        changes: Vec::new(),
        steps,
        child: None,
    }
}

fn diff_step(
    a: &StepRecord,
    b: &StepRecord,
    occurrence: u64,
    options: &DiffOptions,
    summary: &mut DiffSummary,
) -> StepDiff {
    summary.compared += 1;
    let mut c = Changes::default();
    c.value("name", &a.name, &b.name);
    c.value("kind", &a.kind, &b.kind);
    c.value("status", a.status.as_str(), b.status.as_str());
    c.value("exit_code", &a.exit_code, &b.exit_code);
    c.text("error", a.error.as_deref(), b.error.as_deref());
    c.value("command", &a.command, &b.command);
    c.text("output", a.output.as_deref(), b.output.as_deref());
    c.turns(&a.turns, &b.turns, options);
    c.tool_calls(&router(&a.tool_calls), &router(&b.tool_calls), options);
    c.spend("", &a.spend, &b.spend);
    if options.strict_ids {
        c.value(
            "child_run_id",
            &a.child_run_id.map(|i| i.to_string()),
            &b.child_run_id.map(|i| i.to_string()),
        );
    }
    if !c.0.is_empty() {
        summary.changed += 1;
    }
    let steps = diff_steps(&a.steps, &b.steps, options, summary);
    let child = match (&a.child, &b.child) {
        (Some(x), Some(y)) => Some(Box::new(diff_runs(x, y, options, summary))),
        (Some(_), None) | (None, Some(_)) => {
            c.value(
                "child",
                &a.child.as_ref().map(|r| r.run_id.to_string()),
                &b.child.as_ref().map(|r| r.run_id.to_string()),
            );
            None
        }
        (None, None) => None,
    };
    StepDiff {
        path: a.path.clone(),
        iteration: a.iteration,
        occurrence,
        name: a.name.clone(),
        kind: a.kind.clone(),
        side: Side::Both,
        a_status: Some(a.status.as_str().to_owned()),
        b_status: Some(b.status.as_str().to_owned()),
        equal: c.0.is_empty()
            && steps.iter().all(|s| s.equal)
            && child.as_ref().is_none_or(|r| r.equal),
        changes: c.0,
        steps,
        child,
    }
}

/// The calls the runner executed (agent-reported calls are compared as their turns'
/// `tool_use` blocks).
fn router(calls: &[ToolCallRecord]) -> Vec<&ToolCallRecord> {
    calls.iter().filter(|c| c.fidelity == "router").collect()
}

/// Reads one token count of a usage.
type TokenField = fn(&Usage) -> Option<u64>;

/// The changes of one step or run, in the order they are found.
#[derive(Default)]
struct Changes(Vec<Change>);

fn to_value<T: Serialize + ?Sized>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl Changes {
    fn value<T: Serialize + PartialEq + ?Sized>(&mut self, field: &str, a: &T, b: &T) {
        if a != b {
            self.0.push(Change {
                field: field.to_owned(),
                a: to_value(a),
                b: to_value(b),
                hunks: Vec::new(),
            });
        }
    }

    fn json(&mut self, field: &str, a: &Value, b: &Value) {
        if a != b {
            self.0.push(Change {
                field: field.to_owned(),
                a: a.clone(),
                b: b.clone(),
                hunks: Vec::new(),
            });
        }
    }

    fn text(&mut self, field: &str, a: Option<&str>, b: Option<&str>) {
        if a != b {
            self.0.push(Change {
                field: field.to_owned(),
                a: to_value(&a),
                b: to_value(&b),
                hunks: hunks(a.unwrap_or(""), b.unwrap_or("")),
            });
        }
    }

    fn spend(&mut self, prefix: &str, a: &Spend, b: &Spend) {
        let (ua, ub) = (&a.usage, &b.usage);
        let fields: [(&str, TokenField); 5] = [
            ("input_tokens", |u| u.input_tokens),
            ("output_tokens", |u| u.output_tokens),
            ("cache_read_tokens", |u| u.cache_read_tokens),
            ("cache_write_tokens", |u| u.cache_write_tokens),
            ("reasoning_tokens", |u| u.reasoning_tokens),
        ];
        for (name, get) in fields {
            self.value(&format!("{prefix}usage.{name}"), &get(ua), &get(ub));
        }
        self.value(
            &format!("{prefix}usage.reported_cost_usd"),
            &ua.cost_usd,
            &ub.cost_usd,
        );
        self.value(&format!("{prefix}cost_usd"), &a.cost_usd, &b.cost_usd);
    }

    fn turns(&mut self, a: &[TurnRecord], b: &[TurnRecord], options: &DiffOptions) {
        self.value("turns", &a.len(), &b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let at = format!("turns[{i}]");
            self.value(&format!("{at}.role"), &x.role, &y.role);
            self.value(&format!("{at}.provider"), &x.provider, &y.provider);
            self.value(&format!("{at}.model"), &x.model, &y.model);
            self.value(&format!("{at}.blocks"), &x.blocks.len(), &y.blocks.len());
            for (j, (p, q)) in x.blocks.iter().zip(&y.blocks).enumerate() {
                self.block(&format!("{at}.blocks[{j}]"), p, q, options);
            }
            for (j, extra) in x.blocks.iter().enumerate().skip(y.blocks.len()) {
                self.json(&format!("{at}.blocks[{j}]"), &to_value(extra), &Value::Null);
            }
            for (j, extra) in y.blocks.iter().enumerate().skip(x.blocks.len()) {
                self.json(&format!("{at}.blocks[{j}]"), &Value::Null, &to_value(extra));
            }
        }
        for (i, extra) in a.iter().enumerate().skip(b.len()) {
            self.json(&format!("turns[{i}]"), &turn_value(extra), &Value::Null);
        }
        for (i, extra) in b.iter().enumerate().skip(a.len()) {
            self.json(&format!("turns[{i}]"), &Value::Null, &turn_value(extra));
        }
    }

    fn block(&mut self, at: &str, a: &BlockRecord, b: &BlockRecord, options: &DiffOptions) {
        use BlockRecord as B;
        match (a, b) {
            (B::Text { text: x }, B::Text { text: y })
            | (B::Stream { text: x }, B::Stream { text: y }) => {
                self.text(&format!("{at}.text"), Some(x), Some(y));
            }
            (B::Thinking { thinking: x }, B::Thinking { thinking: y }) => {
                self.text(&format!("{at}.thinking"), Some(x), Some(y));
            }
            (B::Command { command: x }, B::Command { command: y }) => {
                self.text(&format!("{at}.command"), Some(x), Some(y));
            }
            (
                B::ToolUse {
                    name: n1,
                    id: i1,
                    input: v1,
                },
                B::ToolUse {
                    name: n2,
                    id: i2,
                    input: v2,
                },
            ) => {
                self.value(&format!("{at}.tool_use.name"), n1, n2);
                self.json(&format!("{at}.tool_use.input"), v1, v2);
                if options.strict_ids {
                    self.value(&format!("{at}.tool_use.id"), i1, i2);
                }
            }
            (
                B::ToolResult {
                    id: i1,
                    content: v1,
                },
                B::ToolResult {
                    id: i2,
                    content: v2,
                },
            ) => {
                self.content(&format!("{at}.tool_result.content"), v1, v2);
                if options.strict_ids {
                    self.value(&format!("{at}.tool_result.id"), i1, i2);
                }
            }
            (
                B::Unknown {
                    block_type: t1,
                    raw: r1,
                },
                B::Unknown {
                    block_type: t2,
                    raw: r2,
                },
            ) if t1 == t2 => self.json(&format!("{at}.raw"), r1, r2),
            _ => self.json(at, &to_value(a), &to_value(b)),
        }
    }

    /// A tool value: strings get a line diff, other values are shown whole.
    fn content(&mut self, field: &str, a: &Value, b: &Value) {
        match (a, b) {
            (Value::String(x), Value::String(y)) => self.text(field, Some(x), Some(y)),
            _ => self.json(field, a, b),
        }
    }

    fn tool_calls(&mut self, a: &[&ToolCallRecord], b: &[&ToolCallRecord], options: &DiffOptions) {
        self.value("tool_calls", &a.len(), &b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let at = format!("tool_calls[{i}]");
            self.value(&format!("{at}.name"), &x.name, &y.name);
            self.json(&format!("{at}.input"), &x.input, &y.input);
            let null = Value::Null;
            self.content(
                &format!("{at}.output"),
                x.output.as_ref().unwrap_or(&null),
                y.output.as_ref().unwrap_or(&null),
            );
            self.text(
                &format!("{at}.error"),
                x.error.as_deref(),
                y.error.as_deref(),
            );
            if options.strict_ids {
                self.value(&format!("{at}.call_id"), &x.call_id, &y.call_id);
            }
        }
        for (i, extra) in a.iter().enumerate().skip(b.len()) {
            self.json(
                &format!("tool_calls[{i}]"),
                &call_value(extra),
                &Value::Null,
            );
        }
        for (i, extra) in b.iter().enumerate().skip(a.len()) {
            self.json(
                &format!("tool_calls[{i}]"),
                &Value::Null,
                &call_value(extra),
            );
        }
    }
}

/// A turn on one side only, without its usage (the step's tokens say it).
fn turn_value(t: &TurnRecord) -> Value {
    json!({"role": t.role, "model": t.model, "blocks": t.blocks})
}

/// A call on one side only, without its id.
fn call_value(c: &ToolCallRecord) -> Value {
    json!({"name": c.name, "input": c.input, "output": c.output, "error": c.error})
}
