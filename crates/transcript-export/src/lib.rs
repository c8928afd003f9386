//! # transcript-export: derived views of a transcript
//!
//! The transcript file is the single source of truth; everything here is
//! derived from its events and can be regenerated at any time. This crate
//! depends on `transcript-domain` only and does no I/O: callers (the CLI)
//! read the files and pass the events, plus a lookup for child runs.
//!
//! ## Views
//!
//! * [`build_document`] → [`ExportDocument`]: one self-describing JSON
//!   document with `schema_version` (semver, starting at [`SCHEMA_VERSION`]
//!   `1.0.0`) holding the run, its child runs (nested under their
//!   `call_workflow` steps), the step tree and typed content blocks. Its JSON
//!   Schema comes from the types ([`export_schema`]) and is checked in at
//!   `schema/export-document.schema.json`.
//! * [`to_markdown`]: a readable document; step headings follow the tree,
//!   thinking sits in collapsible `<details>`, tool calls show inputs and
//!   outputs in fenced code (fences longer than any backtick run inside).
//! * [`to_html`]: one self-contained page (inline CSS, no scripts, a
//!   Content-Security-Policy that forbids loading anything), with the step
//!   tree as a navigable outline, the conversation with tool calls paired to
//!   results, timing and token usage per step.
//! * [`billed_turns`]: the billed requests of a step, each under the model
//!   that served it (its own, else its step's one model, else `(none)`):
//!   the one rule every report below prices by, so their totals agree.
//! * [`receipts`]: one receipt per agent step (provider, model, timing,
//!   status, tokens, cost) with totals per run and over child runs;
//!   [`Groups`] sums billed turns by a caller's key (day, month, session,
//!   project, model), and [`Receipts::render`] / [`render_groups`] are the
//!   one home of the receipts tables' layout.
//! * [`requests`]: one request, one bill across runs (#51): the billed turns
//!   of many runs, keyed by their `request_id` (wire decision 17), each
//!   request billed from one copy (ccusage's rules), the others set aside and
//!   counted; `receipts` and every `receipts --by` grouping read through it.
//! * [`group_runs`]: many runs' bill grouped by day, month, session, project,
//!   model or workflow (each run read once into a [`RunTurns`]): spend only (a
//!   replay and the runs under it left out; a trial, a replay forked at a
//!   step, billed for its live part), each request once; `receipts --by` and
//!   the viewer's `/receipts` both call it, so they cannot disagree.
//! * [`price_document`]: prices a document with the receipts' own code (one
//!   request, one bill; the caller's price function, e.g. the providers
//!   crate's `Pricing::cost`): each billed turn, step and run gets its
//!   `cost_usd`, and [`ExportDocument::cost`] holds the per-model totals,
//!   the total, what the CLIs reported themselves beside it, and the models
//!   without a price (their cost is unknown, shown `—`, never $0). Markdown
//!   and HTML show these beside the token counts (schema 1.1).
//!
//! ## Options
//!
//! [`ExportOptions::include_reasoning`] = false drops thinking blocks
//! everywhere. [`ExportOptions::truncate_outputs`] shortens tool inputs and
//! outputs (tool events and tool_use / tool_result blocks) above a byte
//! limit: strings are cut on a UTF-8 boundary and marked with the original
//! size and sha256; other values become a stub
//! `{"_truncated": true, "original_size_bytes", "sha256", "preview"}` whose
//! hash is of the value's bytes as recorded ([`truncate_raw`]).
//!
//! ## Invariants
//!
//! * Exported JSON validates against the checked-in schema
//!   (`tests/export.rs::json_export_validates_against_checked_in_schema`).
//! * Readers accept unknown fields and unknown block types of later 1.x
//!   writers (`tests/export.rs::reader_accepts_newer_minor_versions`).
//! * With reasoning off, no thinking text appears in any format
//!   (`tests/export.rs::no_reasoning_leaves_no_thinking_text`).
//! * Recorded content cannot inject markup: HTML and Markdown escape every
//!   field (`tests/export.rs::content_is_escaped`, and
//!   `tests/injection.rs`, which renders the Markdown with `pulldown-cmark`
//!   and parses both outputs' tags for hostile values in every field).
//! * Bare URLs and e-mail addresses in recorded text make no link when the
//!   Markdown is rendered as GFM with autolinks (`tests/autolink.rs`, with
//!   comrak, in 48 shapes).
//!
//! ## Versioning
//!
//! `schema_version` follows semver: a minor bump adds optional fields or
//! block types (readers of the same major version must ignore what they do
//! not know; [`ExportBlock::Unknown`] absorbs unknown block types); a major
//! bump changes or removes something.
#![forbid(unsafe_code)]

mod billed;
mod build;
mod cost;
mod grouped;
mod groups;
mod html;
mod html_costs;
mod html_timeline;
mod markdown;
mod md_escape;
mod model;
mod receipts;
mod render_util;
pub mod requests;
mod run_turns;
pub mod spend;
mod truncate;

pub use billed::{BilledTurn, assistant_turns, billed_turns, each_step};
pub use build::{ExportOptions, build_document};
pub use cost::price_document;
pub use grouped::{
    GroupKey, GroupTotal, Grouped, ImportedFrom, Origin, RunTurn, RunTurns, group_runs,
    imported_from, spend_runs,
};
pub use groups::{Group, Groups, render_groups};
pub use html::to_html;
pub use markdown::to_markdown;
pub use model::{
    CostSummary, Entry, ExportBlock, ExportDocument, ExportOptionsRecord, MessageExport, ModelCost,
    NetworkRefusedSchema, RunExport, SCHEMA_VERSION, StepExport, ToolCallExport, UsageSchema,
    export_schema,
};
pub use receipts::{
    ModelTotal, PriceFn, Receipt, Receipts, RunTotal, TurnCost, priced_receipts, receipts,
};
/// The HTML page's escaper (`& < > " '`, pulldown-cmark's), public so other pages of
/// recorded values (transcript-compare's diff page) escape by the same rules.
pub use render_util::{command_stderr, escape_html};
pub use truncate::{PREVIEW_CHARS, sha256_hex, truncate_raw, truncate_value};
