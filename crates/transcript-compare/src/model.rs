//! The diff model: what [`crate::diff`] returns and `transcript diff --json` prints. A public,
//! versioned document a team can render itself (its JSON Schema is
//! `schema/diff-document.schema.json`, from [`diff_schema`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the diff document (semver; see the crate docs' Versioning).
pub const DIFF_SCHEMA_VERSION: &str = "1.2.0";

/// The comparison of two runs, A and B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiffDocument {
    /// [`DIFF_SCHEMA_VERSION`] of the writer.
    pub schema_version: String,
    /// Whether the runs are equal (nothing compared differs, no step is on one side only).
    pub equal: bool,
    /// What was ignored.
    pub options: DiffOptionsRecord,
    /// Counts over every step execution, child runs included.
    pub summary: DiffSummary,
    /// Where B first differs from A (the step, and the turn when a turn differs); absent
    /// when they are equal (since 1.2.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<crate::Divergence>,
    /// The two root runs, aligned.
    pub run: RunDiff,
}

/// The options a document was made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiffOptionsRecord {
    /// Run ids, child run ids and call ids were compared (`--strict-ids`); otherwise they are
    /// ignored. Timestamps, durations and seqs are never compared.
    pub strict_ids: bool,
    /// Both runs' step definitions were given and compared (`definition.*` changes; since
    /// 1.1.0).
    #[serde(default)]
    pub definitions: bool,
}

/// How many step executions compared how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiffSummary {
    /// Step executions present in both runs.
    pub compared: u64,
    /// Of those, the ones whose own fields differ.
    pub changed: u64,
    /// Step executions only in A.
    pub only_in_a: u64,
    /// Step executions only in B.
    pub only_in_b: u64,
}

/// Two runs (the roots, or the child runs of two aligned `call_workflow` steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunDiff {
    /// Run A's id.
    pub a_run_id: String,
    /// Run B's id.
    pub b_run_id: String,
    /// Workflow of run A.
    pub a_workflow: Option<String>,
    /// Workflow of run B.
    pub b_workflow: Option<String>,
    /// Status of run A (`succeeded`, `failed`, `cancelled`, `incomplete`).
    pub a_status: String,
    /// Status of run B.
    pub b_status: String,
    /// Whether the runs and every step below are equal.
    pub equal: bool,
    /// Run-level differences (status, error, workflow, totals; the run id with strict ids).
    pub changes: Vec<Change>,
    /// The runs' top-level step executions, aligned by path, iteration and occurrence.
    pub steps: Vec<StepDiff>,
}

/// Where a step execution was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// In both runs: compared.
    Both,
    /// Only in run A.
    OnlyA,
    /// Only in run B.
    OnlyB,
}

/// One aligned step execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepDiff {
    /// Dot-separated path.
    pub path: String,
    /// Innermost loop iteration.
    pub iteration: u64,
    /// Among its siblings of the same path and iteration, which one (0 for the first; a
    /// re-run under one path and iteration is 1, …).
    pub occurrence: u64,
    /// Step name (A's when in both).
    pub name: String,
    /// Step kind (A's when in both).
    pub kind: String,
    /// Where it was found.
    pub side: Side,
    /// Status in A, when there.
    pub a_status: Option<String>,
    /// Status in B, when there.
    pub b_status: Option<String>,
    /// Whether this step, its nested steps and its child run are equal (false on one side
    /// only).
    pub equal: bool,
    /// This step's own differences (empty on one side only).
    pub changes: Vec<Change>,
    /// Nested step executions, aligned.
    pub steps: Vec<StepDiff>,
    /// The child runs of a `call_workflow` step, aligned (when both were found).
    pub child: Option<Box<RunDiff>>,
}

/// One field that differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    /// Which field, as a path: `status`, `exit_code`, `error`, `output`, `command`,
    /// `turns` (their count), `turns[i].role`, `turns[i].model`, `turns[i].blocks` (their
    /// count), `turns[i].blocks[j]` (a block of another type), `turns[i].blocks[j].text`,
    /// `….thinking`, `….tool_use.name`, `….tool_use.input`, `….tool_use.id`,
    /// `….tool_result.content`, `….tool_result.id`, `tool_calls` (their count),
    /// `tool_calls[i].name|input|output|error|call_id`, `usage.<field>`, `cost_usd`,
    /// `child_run_id`, `run_id`, `workflow`, `name`, `kind`. Indices count from 0.
    ///
    /// Since 1.1.0: turns are aligned by content, so a turn of A may meet a turn of B at
    /// another index: `turns[i→j]` is A's turn `i` against B's turn `j` (`turns[i]` when the
    /// indices are equal, and for a turn on one side only, its index on that side); tool
    /// calls of one turn meet as a set by name and arguments, so `blocks[j]` of B is the
    /// call (or result) paired with A's `blocks[j]`; `turns` with a [`Change::note`] is the
    /// summary of two unrelated sessions; `definition.<key>` (`definition.prompt`,
    /// `definition.model`, …) is a changed top-level key of the step's definition, and
    /// `definition` a step defined on one side only (see [`crate::StepDefinitions`]).
    /// Costs (`cost_usd`, `usage.reported_cost_usd`) differ only when they differ to the
    /// printed fraction of a cent ([`crate::MONEY_DECIMALS`] decimals).
    pub field: String,
    /// The value in A (`null` when absent).
    pub a: Value,
    /// The value in B (`null` when absent).
    pub b: Value,
    /// For texts with several lines: the line diff from A to B (3 lines of context per hunk).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hunks: Vec<Hunk>,
    /// What the values alone do not say: for `turns` of two unrelated sessions, how many turns
    /// they share ("sessions share 0 of 40 turns: 40 only in A, 35 only in B"; since 1.1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A run of changed lines with their context, as in a unified diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Hunk {
    /// First line of the hunk in A (1-based).
    pub a_start: u64,
    /// Lines of A in the hunk.
    pub a_lines: u64,
    /// First line of the hunk in B (1-based).
    pub b_start: u64,
    /// Lines of B in the hunk.
    pub b_lines: u64,
    /// The lines, in order.
    pub lines: Vec<DiffLine>,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiffLine {
    /// Kept, removed (A only) or added (B only).
    pub op: LineOp,
    /// The line, without its line break.
    pub text: String,
}

/// What happened to a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LineOp {
    /// In both.
    Equal,
    /// Only in A.
    Delete,
    /// Only in B.
    Insert,
}

impl DiffDocument {
    /// Every step execution that differs (its own fields, or on one side only), depth first,
    /// with its child-run prefix as [`crate::RunRecord::walk`] names steps.
    pub fn differing_steps(&self) -> Vec<(String, &StepDiff)> {
        fn go<'a>(steps: &'a [StepDiff], prefix: &str, out: &mut Vec<(String, &'a StepDiff)>) {
            for s in steps {
                let name = format!("{prefix}{}", s.path);
                if s.side != Side::Both || !s.changes.is_empty() {
                    out.push((name.clone(), s));
                }
                if let Some(child) = &s.child {
                    go(&child.steps, &format!("{name}/"), out);
                }
                go(&s.steps, prefix, out);
            }
        }
        let mut out = Vec::new();
        go(&self.run.steps, "", &mut out);
        out
    }
}

/// The JSON Schema of [`DiffDocument`] (checked in at `schema/diff-document.schema.json`).
pub fn diff_schema() -> Value {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<DiffDocument>()
        .to_value()
}
