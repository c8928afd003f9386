//! Comparing two [`RunRecord`]s into a [`DiffDocument`]: the trees aligned level by level
//! ([`crate::align`]), child runs under their `call_workflow` steps, and per aligned step the
//! fields that differ.
//!
//! Compared: status, error, exit code, command, output (with a line diff), every message
//! (aligned by content, [`crate::turns`]: role, model, provider, each block: text, thinking,
//! tool calls by name and arguments as a set per turn, tool results without the CLI's
//! envelope), the router's tool calls (name, input, output, error; the calls after one turn
//! as a set), tokens and priced cost (to the printed fraction of a cent), and, when the caller
//! gives both runs' [`StepDefinitions`], each step's definition. Numbers compare as numbers.
//! Never compared: timestamps, durations, seqs. Ids (run ids, child run ids, call ids and the
//! ids of `tool_use` / `tool_result` blocks) only with [`DiffOptions::strict_ids`]. Of two
//! imported sessions ([`RunRecord::is_import`]), neither the workflow name (the log file's
//! name) nor, when one of them is an open session run (a store import leaves its runs
//! open), the status, error and output are compared: those say how it was imported, not
//! what the session did.

use transcript_domain::tree::Status;

use crate::align::{Pair, align};
use crate::changes::Changes;
use crate::definitions::{Definitions, StepDefinitions};
use crate::model::{
    DIFF_SCHEMA_VERSION, DiffDocument, DiffOptionsRecord, DiffSummary, RunDiff, Side, StepDiff,
};
use crate::record::{RunRecord, StepRecord, ToolCallRecord};
use crate::turns;

/// What to compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffOptions {
    /// Compare run ids, child run ids and call ids too (`--strict-ids`).
    pub strict_ids: bool,
}

/// Compares run A with run B.
pub fn diff(a: &RunRecord, b: &RunRecord, options: &DiffOptions) -> DiffDocument {
    let none = StepDefinitions::default();
    diff_with_definitions(a, b, options, (&none, &none))
}

/// Compares run A with run B and each step's definition in A's workflow with the one in B's
/// (`definitions.0` is A's, `.1` B's): a step whose definition changed has a
/// `definition.<key>` change per changed top-level key, even when what it recorded is equal.
/// A side without definitions (an empty [`StepDefinitions`]: its workflow is not known) is
/// not compared, so this is then [`diff`].
pub fn diff_with_definitions(
    a: &RunRecord,
    b: &RunRecord,
    options: &DiffOptions,
    definitions: (&StepDefinitions, &StepDefinitions),
) -> DiffDocument {
    let mut ctx = Ctx {
        options: *options,
        definitions: Definitions::known(definitions.0, definitions.1),
        imports: a.is_import() && b.is_import(),
        summary: DiffSummary::default(),
    };
    let run = ctx.runs(a, b, "");
    DiffDocument {
        schema_version: DIFF_SCHEMA_VERSION.to_owned(),
        equal: run.equal,
        options: DiffOptionsRecord {
            strict_ids: options.strict_ids,
            definitions: ctx.definitions.is_some(),
        },
        summary: ctx.summary,
        divergence: crate::first_divergence(&run),
        run,
    }
}

/// One comparison in progress.
struct Ctx<'d> {
    options: DiffOptions,
    definitions: Option<Definitions<'d>>,
    /// Both runs are imported sessions.
    imports: bool,
    summary: DiffSummary,
}

/// Whether the status, error and output of two executions are compared: not when one is an
/// imported session's open run.
fn outcome_compared(imports: bool, a: Status, b: Status) -> bool {
    !(imports && (a == Status::Incomplete || b == Status::Incomplete))
}

/// A run's error unless it only repeats the failure of one of its steps (`step 'x' failed:
/// …`, as the engine writes it), which that step's own `error` change shows: a replay's
/// mismatch is then printed once, at its step.
fn own_error(run: &RunRecord) -> Option<&str> {
    let error = run.error.as_deref()?;
    let repeated = error
        .strip_prefix("step '")
        .and_then(|rest| rest.split_once("' failed: "))
        .is_some_and(|(name, cause)| {
            run.steps
                .iter()
                .any(|s| s.path == name && s.error.as_deref() == Some(cause))
        });
    (!repeated).then_some(error)
}

impl Ctx<'_> {
    /// Two runs; `prefix` names their steps (`<call path>/` in a child run).
    fn runs(&mut self, a: &RunRecord, b: &RunRecord, prefix: &str) -> RunDiff {
        let mut c = Changes::default();
        if self.options.strict_ids {
            c.value("run_id", &a.run_id.to_string(), &b.run_id.to_string());
        }
        if !self.imports {
            c.value("workflow", &a.workflow, &b.workflow);
        }
        if outcome_compared(self.imports, a.status, b.status) {
            c.value("status", a.status.as_str(), b.status.as_str());
            c.text("error", own_error(a), own_error(b));
        }
        c.spend(&a.spend, &b.spend);
        let steps = self.steps(&a.steps, &b.steps, prefix);
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

    fn steps(&mut self, a: &[StepRecord], b: &[StepRecord], prefix: &str) -> Vec<StepDiff> {
        align(a, b)
            .into_iter()
            .map(|pair| match pair {
                Pair::Both(x, y, n) => self.step(x, y, n, prefix),
                Pair::OnlyA(x, n) => one_side(x, n, Side::OnlyA, &mut self.summary),
                Pair::OnlyB(y, n) => one_side(y, n, Side::OnlyB, &mut self.summary),
            })
            .collect()
    }

    /// What a step execution recorded, field by field.
    fn fields(&self, a: &StepRecord, b: &StepRecord) -> Changes {
        let mut c = Changes::default();
        c.value("name", &a.name, &b.name);
        c.value("kind", &a.kind, &b.kind);
        let outcome = outcome_compared(self.imports, a.status, b.status);
        if outcome {
            c.value("status", a.status.as_str(), b.status.as_str());
        }
        c.value("exit_code", &a.exit_code, &b.exit_code);
        if outcome {
            c.text("error", a.error.as_deref(), b.error.as_deref());
        }
        c.json(
            "command",
            a.command.as_ref().unwrap_or(&serde_json::Value::Null),
            b.command.as_ref().unwrap_or(&serde_json::Value::Null),
        );
        if outcome {
            c.text("output", a.output.as_deref(), b.output.as_deref());
        }
        let strict = self.options.strict_ids;
        c.turns(
            &turns::Side::of(&a.turns),
            &turns::Side::of(&b.turns),
            strict,
        );
        c.tool_calls(&router(&a.tool_calls), &router(&b.tool_calls), strict);
        c.spend(&a.spend, &b.spend);
        if strict {
            c.value(
                "child_run_id",
                &a.child_run_id.map(|i| i.to_string()),
                &b.child_run_id.map(|i| i.to_string()),
            );
        }
        c
    }

    fn step(&mut self, a: &StepRecord, b: &StepRecord, occurrence: u64, prefix: &str) -> StepDiff {
        self.summary.compared += 1;
        let name = format!("{prefix}{}", a.path);
        let mut c = self.fields(a, b);
        if let Some(defs) = self.definitions {
            c.definition(&name, defs);
        }
        let steps = self.steps(&a.steps, &b.steps, prefix);
        let child = match (&a.child, &b.child) {
            (Some(x), Some(y)) => Some(Box::new(self.runs(x, y, &format!("{name}/")))),
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
        if !c.0.is_empty() {
            self.summary.changed += 1;
        }
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
}

fn one_side(s: &StepRecord, occurrence: u64, side: Side, summary: &mut DiffSummary) -> StepDiff {
    match side {
        Side::OnlyA => summary.only_in_a += 1,
        _ => summary.only_in_b += 1,
    }
    let status = Some(s.status.as_str().to_owned());
    // Nested steps are on the same side only.
    let steps = s
        .steps
        .iter()
        .zip(occurrences(&s.steps))
        .map(|(x, n)| one_side(x, n, side, summary))
        .collect();
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

/// Each step's occurrence among its siblings of the same path and iteration.
fn occurrences(steps: &[StepRecord]) -> Vec<u64> {
    let mut seen = std::collections::HashMap::new();
    steps
        .iter()
        .map(|s| {
            let n = seen.entry((s.path.as_str(), s.iteration)).or_insert(0u64);
            *n += 1;
            *n - 1
        })
        .collect()
}

/// The calls the runner executed (agent-reported calls are compared as their turns'
/// `tool_use` blocks).
fn router(calls: &[ToolCallRecord]) -> Vec<&ToolCallRecord> {
    calls.iter().filter(|c| c.fidelity == "router").collect()
}
