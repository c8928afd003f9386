//! # transcript-compare: what changed between two runs, and did a run do what it should
//!
//! A transcript tells what happened. This crate answers the two questions a team asks of
//! recorded runs in CI, offline and exactly, from the events alone: what changed between run
//! A and run B ([`diff`]), and whether a run met its expectations ([`check`]). The CLI's
//! `transcript diff` and `transcript check` parse arguments and print what this crate returns.
//!
//! ## Model
//!
//! * [`RunRecord::build`] reads a run: the domain's step tree
//!   ([`transcript_domain::tree::build_run_tree`], child runs included) with, on each step
//!   execution ([`StepRecord`]), its status, exit code, command, output ([`output_of`]),
//!   its own messages ([`TurnRecord`]: text, thinking, tool calls and results as
//!   [`BlockRecord`]s), its `tool.*` calls ([`ToolCallRecord`]) and its bill ([`Spend`], the
//!   domain's one-request-one-bill [`transcript_domain::bill::Bill`], priced by the caller's
//!   price function).
//! * [`diff`] aligns two records level by level by path, iteration and occurrence (parallel
//!   branches that started in another order still meet; child runs are aligned under their
//!   `call_workflow` steps) and returns a [`DiffDocument`]: per aligned step its [`Change`]s
//!   (the field, A's value, B's value, and for multi-line texts a line diff in [`Hunk`]s), and
//!   the steps found on one side only. The document is the public, versioned model a team
//!   renders; [`render_html`] is one rendering (one self-contained page, side by side, the
//!   changed field and the changed keys of an object marked), [`render_diff_text`] another (a
//!   terminal: only the branches that differ); both print costs as `transcript receipts`
//!   does ([`usd`]).
//! * What the tools did, not how it was recorded: a step's messages align by content (a
//!   longest common subsequence over its turns, so one inserted turn is one added turn; two
//!   unrelated sessions are one summary change, see [`UNRELATED_MIN_TURNS`]); the tool calls
//!   of one turn and their results meet as a set by name and arguments (an agent CLI hands
//!   back parallel results in the order they finished), router calls after one turn likewise;
//!   a tool result is compared without its agent CLI's envelope (`transcript_providers::envelope`,
//!   the CLI named by the turn's `provider`); numbers compare as numbers (`1.0` is `1`) and
//!   costs to the fraction of a cent receipts print ([`MONEY_DECIMALS`]).
//! * [`diff_with_definitions`] also compares each step's definition in A's workflow with the
//!   one in B's ([`StepDefinitions`], computed by the caller): a changed definition is a
//!   `definition.<key>` change at that step even when its events are equal.
//! * [`Expectations::parse`] reads a YAML expectations file (run status, cost, tokens,
//!   duration; per step path: status, tools used and not used, an ordered tool subsequence,
//!   tool arguments, failed tools, output, turns, cost; on either, a judge's rubric);
//!   [`check`] holds a run to them and returns one [`Outcome`] per expectation (passed,
//!   failed, or errored: not decided), which [`junit_xml`] writes as JUnit XML and
//!   [`render_outcomes_text`] as one line each.
//! * [`judge`]: `judge: {rubric: "…"}` on the run or a step asks a model to grade what the
//!   transcript shows. [`check_judged`] builds the prompts, cuts a transcript larger than the
//!   model's context into chunks (graded in order, notes carried, "graded in N chunks") or
//!   reports it too large, and reads the strict JSON verdict; the model is behind the
//!   [`Grader`] port (the CLI composes transcript-exec's Chat Completions client).
//!
//! ## Invariants
//!
//! * Never compared: timestamps, durations, seqs; ids (run ids, child run ids, call ids,
//!   block ids) only with [`DiffOptions::strict_ids`]. Two runs of one deterministic workflow
//!   diff equal (`transcript-cli/tests/diff_check.rs`), and so do they when an agent CLI
//!   returned parallel results in another order, wrapped a result in another envelope, or
//!   summed a cost to another last digit (`tests/tool_activity.rs`). Two imports of one
//!   session log diff equal: of two imported sessions ([`RunRecord::is_import`]) the log
//!   file's name (the workflow name) and a store import's open run are not content
//!   (`tests/sessions.rs`).
//! * A difference names the step it is in and only that step
//!   (`tests/diff.rs`, `transcript-cli/tests/diff_check.rs`).
//! * A cost that cannot be priced is unknown, never $0: a `max_cost_usd` over an unknown cost
//!   fails, naming each model without a price and its step (`tests/expect.rs`,
//!   `tests/money.rs`); Claude Code's `<synthetic>` turns (no API request) cost 0 whatever
//!   the price function, so they never make a cost unknown.
//! * An expectations file with an unknown key, a misspelled one included, is refused naming
//!   the key and its line (`tests/expect.rs`); nothing is ignored silently.
//! * A judge never passes what it did not grade: a failed request, an answer that is not
//!   exactly the verdict object, or a transcript too large for `max_chunks` chunks is an
//!   error outcome ([`Outcome::errored`]) naming the judge and the cause (`tests/judge.rs`).
//! * Pure: depends on `transcript-domain`, `transcript-providers` (the CLIs' envelope rules)
//!   and `transcript-export` (its HTML escaper) only among workspace crates, does no I/O
//!   (`cargo xtask arch-check`); the caller reads the files (and the workflows whose
//!   [`StepDefinitions`] it passes) and the [`Grader`] talks to the model.
//!
//! ## Threat model
//!
//! Every recorded value is untrusted: step names, outputs, tool arguments and model text can
//! hold markup, control characters or anything else. This crate never interprets them: the
//! HTML page escapes every value with the export's escaper (`transcript_export::escape_html`,
//! the same rules as `export --format html`, tested with its attack strings in
//! `tests/html.rs`), JUnit XML is written by `quick-xml`'s writer (no hand escaping), and the
//! diff document carries values as JSON data. The text views hand every recorded value to the
//! caller's [`Painter`], whose contract is to make it safe for its terminal (the CLI's escapes
//! control characters and bidirectional overrides, `style::clean`); they add no escape codes of
//! their own.
//! A judge's model reads recorded text, which can try to instruct it (prompt injection): the
//! transcript goes only into the user message, between fence lines it does not contain, as
//! data; the rubric and the instructions are the system message; only the exact verdict
//! object counts. No model is immune: a judge's pass is an opinion, never a guarantee
//! ([`judge`]). The API key is the grader's business and never reaches this crate.
//! Expectations files are trusted configuration, but a regex in them is compiled by `regex`
//! (linear time, no backtracking) and a text diff is skipped above [`text::MAX_DIFF_LINES`]
//! lines and turns align by position above [`MAX_ALIGNED_TURNS`], so neither a file nor a
//! transcript can make the work explode.
//!
//! ## Versioning
//!
//! [`DiffDocument::schema_version`] follows semver ([`DIFF_SCHEMA_VERSION`]; `1.1.0` added
//! [`Change::note`], `options.definitions`, the `definition.<key>` and `turns[i→j]` field
//! names, and compares tool calls as sets and costs at receipts' precision; `1.2.0` added
//! [`DiffDocument::divergence`]): a minor version adds optional fields or new `field` names of a [`Change`]
//! (readers ignore what they do not know); a major version changes or removes something. The
//! JSON Schema is checked in at `schema/diff-document.schema.json` and kept current by
//! `tests/schema.rs`. The expectations format is versioned by its keys: new keys are added,
//! none changes meaning.
#![forbid(unsafe_code)]

mod align;
mod calls;
mod changes;
mod definitions;
mod diff;
mod divergence;
mod envelope;
mod expect;
mod html;
pub mod judge;
mod judge_settings;
mod model;
mod pairing;
mod record;
mod record_turns;
pub mod text;
mod text_view;
pub mod trials;
mod turns;
mod values;

pub use calls::CallView;
pub use definitions::StepDefinitions;
pub use diff::{DiffOptions, diff, diff_with_definitions};
pub use divergence::{Divergence, first_divergence};
pub use expect::{
    ArgMatcher, ExpectError, Expectation, Expectations, Outcome, Rule, Summary, TextMatcher, check,
    junit_xml,
};
pub use html::render_html;
pub use judge::{GradePrompt, Grader, JudgeSettings, check_judged};
pub use model::{
    Change, DIFF_SCHEMA_VERSION, DiffDocument, DiffLine, DiffOptionsRecord, DiffSummary, Hunk,
    LineOp, RunDiff, Side, StepDiff, diff_schema,
};
pub use record::{
    BlockRecord, RunRecord, Spend, StepRecord, ToolCallRecord, TurnRecord, output_of,
};
pub use text_view::{Painter, SHOWN_CHARS, Tone, render_diff_text, render_outcomes_text};
pub use turns::{MAX_ALIGNED_TURNS, UNRELATED_MIN_TURNS, UNRELATED_SHARE};
pub use values::{MONEY_DECIMALS, usd};
