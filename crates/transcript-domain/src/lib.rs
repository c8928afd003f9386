//! # transcript-domain: the wire contract of canonical agent exchange transcripts
//!
//! Every run of an AI-agent workflow writes one append-only JSON Lines file,
//! `storage/transcripts/<run-id>.jsonl`. Each line is one [`ExchangeEvent`]:
//! the step lifecycle, the prompts sent to agents, the agents' normalized
//! replies and every tool call, identical in shape whichever provider produced
//! them. This crate owns that format and nothing else: it is the vocabulary
//! every other crate of the workspace speaks (as `tracing-core` is to its
//! adapters). It performs no I/O, uses no async runtime, reads no clock and
//! draws no random numbers; time and ids reach it through the [`Clock`] and
//! [`RunIdGenerator`] ports.
//!
//! ## The model
//!
//! ```text
//! {"seq":1,"run_id":"…","type":"run.started","path":"","iteration":0,
//!  "timestamp":"2026-06-08T08:14:42.123Z","payload":{"name":"review","kind":"workflow"}}
//! ```
//!
//! * **Envelope** ([`ExchangeEvent`]): `seq`, `run_id`, `parent_run_id` and
//!   `child_run_id` (omitted when absent), `type`, `path` (always present,
//!   `""` at run level), `iteration`, `timestamp`, `payload` (always present),
//!   serialized in exactly that order.
//! * **Event types** ([`EventType`], closed, ten values): `run.started`,
//!   `run.completed`, `step.started`, `step.completed`,
//!   `step.call_workflow.started`, `step.call_workflow.completed`,
//!   `message.user`, `message.assistant`, `tool.call`, `tool.result`.
//! * **Payloads**: [`StepPayload`] for `run.*` / `step.*`, [`MessagePayload`]
//!   for `message.*`, [`ToolPayload`] for `tool.*`. The writer-side
//!   [`Payload`] enum has one variant per event type, so an event type and its
//!   payload cannot disagree.
//! * **Content blocks** ([`ContentBlock`], six types: `text`, `thinking`,
//!   `tool_use`, `tool_result`, `command`, `stream`): a [`Fidelity`] plus a
//!   [`BlockBody`] variant per type, so a block cannot carry another type's
//!   fields. On the wire a block is 000's flat object.
//! * **Fidelity**: `router` (synthesized at the tools router seam) or
//!   `agent_emitted` (reported by the agent), on every block and tool payload,
//!   so consumers never count one call twice.
//!
//! ## Writer side and reader side
//!
//! The writer is strict, the reader tolerant. [`ExchangeEvent`] and friends can
//! only express the closed vocabularies. The reader side is a separate set of
//! types: [`decode_line`] returns a [`DecodedEvent`] whose [`EventKind`] keeps
//! an unknown type string, whose [`DecodedPayload`] keeps a payload that fits
//! no known shape verbatim, and whose [`DecodedBlock`]s keep unknown blocks
//! verbatim. Each such case is reported as a matchable [`DecodeWarning`]
//! (`UnknownEventType`, `UnknownBlockType`, `InvalidBlock`,
//! `PayloadMismatch`): never a parse failure, never dropped. A line that is not
//! an event at all (truncated JSON, wrong field types, non-UTF-8, a `run_id`
//! that is not a UUID) is a typed [`DecodeError`] naming the cause.
//! [`DecodedEvent::to_event`] converts back to the writer side when every part
//! is canonical.
//!
//! ## Invariants (each enforced by a test)
//!
//! * `decode(encode(e)) == e` for every valid event, including strings with
//!   NUL, control characters, non-ASCII and U+2028
//!   (`tests/wire.rs::decode_of_encode_is_identity`, proptest).
//! * A line we wrote re-encodes byte for byte: opaque values (tool
//!   input/output, step results, `tool_input`, `tool_content`, unknown
//!   payloads) are [`RawJson`], kept as received
//!   (`tests/wire.rs::golden_wire_examples_cover_every_type_and_reencode_byte_for_byte`
//!   over `fixtures/golden/wire-examples.jsonl`).
//! * [`PreEncoded`] (serialize outside a writer's lock, splice `seq` and
//!   `timestamp` inside it) yields exactly the bytes of
//!   [`ExchangeEvent::encode_line`] (`tests/wire.rs::pre_encoded_lines_equal_full_encoding`).
//! * The decoder never panics, whatever the bytes
//!   (`tests/wire.rs::decoder_never_panics_on_arbitrary_bytes`), and on structured near-valid
//!   lines (a field removed, retyped, wrapped, nested thousands deep, cut) it either accepts a
//!   line that re-encodes stably or returns a typed error
//!   (`tests/wire.rs::decoder_handles_structured_near_valid_lines`).
//! * One event is one line: every [`RawJson`] is compact by construction (whitespace between
//!   tokens dropped, strings untouched), so no value can carry a line break into a writer
//!   (`raw::tests::pretty_printed_values_become_one_line_with_strings_untouched`). A value
//!   deeper than serde_json's recursion limit is kept verbatim, never turned into `null`
//!   (`raw::tests::values_too_deep_for_serde_json_are_kept_verbatim_never_null`).
//! * The writer never writes what the reader flags: [`EventDraft::validate`] enforces the
//!   structural rules the types cannot express (`child_run_id` exactly on
//!   `step.call_workflow.*`, run-level path and iteration, non-empty `kind` / `name` /
//!   `call_id`, role matching the type, agent metadata on assistant turns only, decision 6's
//!   null sides) and returns a typed [`InvalidDraft`] naming the field; recorders call it
//!   before assigning a seq (`validate::tests`). Lines longer than [`MAX_LINE_BYTES`] are
//!   refused by writers and skipped (reported) by readers: one cap for both.
//! * The step tree rebuilt from events alone ([`tree::build_run_tree`])
//!   nests steps by path and iteration, follows child runs and reports, rather
//!   than fails on, inconsistencies (`tree::tests`). Work is linear in the number of runs: a
//!   child run linked from two steps is expanded once and reported under the second
//!   (`tree::tests::shared_children_are_expanded_once_so_work_stays_linear`).
//! * No I/O, clock or randomness in this crate (`cargo xtask arch-check`).
//!
//! ## Wire decisions implemented here
//!
//! These settle what the seed contract leaves open
//! (`shared/notes/wire-decisions.md`); they are stable.
//!
//! 1. `stream` blocks carry their chunk in `text`; readers also accept `chunk`.
//! 2. `run.started` / `run.completed` carry a [`StepPayload`] with `name` = the
//!    workflow and `kind` = `"workflow"`; `run.completed` sets `error` on
//!    failure or cancellation. Our writer never writes `null` there (the
//!    writer-side [`Payload::RunStarted`] cannot hold it); readers accept it.
//! 3. Timestamps are written as UTC with exactly three fractional digits and
//!    `Z`; any RFC 3339 form is read ([`Timestamp`]; finer precision is
//!    truncated to milliseconds).
//! 6. [`ToolPayload::input`] and `output` are always present (`null` on the
//!    side that has none).
//! 8. Fields outside the schema are ignored on read; the writer adds only
//!    decision 10's fields.
//! 9. [`RunId`] parses only from the 36-character hyphenated UUID form and
//!    prints lowercase, so one run has one file name, and no run id can carry
//!    a path separator to the filesystem.
//! 10. `message.assistant` may carry `provider`, `model` and [`Usage`]
//!     (`input_tokens`, `output_tokens`, `cache_read_tokens`,
//!     `cache_write_tokens`, `reasoning_tokens`, `cost_usd`; each omitted when
//!     not reported). Every line decodes back to the payload that wrote it:
//!     an empty `error` (which reads as absent, Go's `omitempty`) and a
//!     non-finite `cost_usd` (JSON has no NaN) are written as absent, and
//!     [`Payload::canonicalize`] makes a draft equal to its decoded line.
//! 14. Decoding is type-directed; a payload that does not fit its type, and
//!     any unknown type, falls back to 000's shape probe (array → blocks,
//!     `role` → message, `call_id` → tool, `kind` → step, else raw).
//! 15. `seq` and `timestamp` are assigned together by the recorder (the
//!     [`Recorder`] port takes an [`EventDraft`] without either).
//!
//!
//! Further decisions, settled as the format met real agents and real faults (the writers
//! that make them name them in their own crate docs):
//!
//! 16. **Null run payloads** from foreign files convert to [`Payload::RunNull`] and re-encode
//!     as `null`; our writers never write it ([`EventDraft::validate`]).
//! 17. **Call ids are unique per run file.** Providers number their ids per execution (Codex
//!     `item_1`, …), so the agent seam records `<path>#<iteration>/<provider id>` (with `~n`
//!     when the same path and iteration ran before) on `tool.*` events and
//!     `tool_use` / `tool_result` blocks alike; router calls keep `router-N`. Ids an importer
//!     has to invent are `synth:<where>` and never equal a real id.
//! 18. **Values are bounded.** No line exceeds [`MAX_LINE_BYTES`]; writers cut large values
//!     first with the truncation stub (a string keeps a prefix and ends with
//!     `…[truncated: N bytes, sha256 H]`; other values become
//!     `{"_truncated": true, "original_size_bytes": N, "sha256": H, "preview": …}`, N and H
//!     of the original bytes). A parent step's `result` refers to its children
//!     (`{"branches": {name: status}}`, `{"iterations": n}`) instead of repeating their
//!     outputs, so a file grows linearly in what was produced.
//! 19. **A command step's result** is `{"command", "stdout", "exit_code"}` (`command` as run:
//!     the rendered string, or the argv list). No `command` block is written: blocks live in
//!     messages, and a command step has none.
//! 20. **Imported runs** say where their times come from and what the importer saw: the agent
//!     step's `step.completed` result carries `{"clock": "provider"|"duration"|"import",
//!     "diagnostics": {kind: {"count", "first"}}, …}`, and a capture without its provider's
//!     terminal record gets no `run.completed` (the run reads as incomplete).
//!
//! Block fields that 000 marks `omitempty` are read as empty when absent, and
//! our writer always writes the active fields of a block's type (an empty
//! `text` is written as `""`), which Go readers accept.
//!
//! ## Ports
//!
//! * [`Recorder`] (async-trait, object safe): `record(EventDraft) -> Seq`,
//!   `subscribe(Option<Seq>) -> Box<dyn Subscription>` (replay from a seq, then
//!   live), idempotent `close`. The recorder, not the caller, assigns `seq`,
//!   `timestamp`, `run_id` and `parent_run_id`. No tokio type appears here.
//! * [`RecorderFactory`]: one recorder per run, so each child run of a
//!   `call_workflow` step gets its own file and seq series (decision 7).
//! * [`EventMask`]: the opt-in masking hook, applied to a draft before it is
//!   encoded, written or broadcast.
//! * [`Clock`] and [`RunIdGenerator`], with [`ManualClock`] and
//!   [`SequentialRunIds`] for byte-stable goldens (real implementations live
//!   in `transcript-infra`).
//! * [`run_store::RunStore`], the read port (synchronous, object safe): list a storage's
//!   runs, resolve a run argument (full id, unique prefix, `latest`), read a run as
//!   recorded (a stream of its bytes and its [`run_store::RunState`]), follow it as it
//!   grows. Adapters: a directory (`transcript-infra`), the JetStream store
//!   (`transcript-nats`). [`replays::replayed_runs`] says which runs are replays (not
//!   spend).
//!
//! ## One home for shared rules
//!
//! * The transcript file name, both ways: [`RunId::file_name`] and
//!   [`RunId::from_file_name`] (`<run-id>.jsonl`).
//! * [`text::lower_hex`] (digests) and [`text::error_chain`] (an error with
//!   its causes, each once), for every crate that prints one.
//!
//! ## Threat model
//!
//! * Content is recorded **verbatim**: prompts, system prompts, tool inputs
//!   and outputs may contain secrets. Nothing is masked by default; masking is
//!   opt-in through [`EventMask`], which a recorder applies before the event
//!   exists anywhere outside the caller's memory (disk or subscribers).
//! * Files are created `0o600` in a `0o700` directory by the infra recorder;
//!   this crate guarantees the name part: a [`RunId`] is hex and hyphens only.
//! * Untrusted transcripts are safe to read: decoding never panics, allocates
//!   in proportion to the line, and nested child-run links are followed with
//!   cycle and depth guards ([`tree::MAX_DEPTH`]).
//!
//! ## Versioning and forward compatibility
//!
//! The wire format follows seed 000. Adding an envelope or payload field is
//! compatible (readers ignore unknown fields). Adding an event or block type
//! is compatible for readers of this crate (they surface it as a warning with
//! the raw content); writers of an older version will never emit it. Removing
//! or renaming a value, or changing a field's type, is a breaking change of
//! the format and requires a coordinated schema bump. The crate's Rust API
//! follows semver; [`RecordError`] is `#[non_exhaustive]`.
//!
//! The JSON Schema of the writer's output is generated from these types
//! (feature `schema`, `cargo xtask schema`) into
//! `schema/exchange-event.schema.json`.
#![forbid(unsafe_code)]

pub mod bill;
mod block;
mod decode;
mod event;
mod file_name;
pub mod fork;
mod ids;
pub mod money;
mod payload;
mod port;
mod raw;
pub mod replays;
pub mod run_store;
#[cfg(feature = "schema")]
pub mod schema;
mod strict;
pub mod text;
mod timestamp;
pub mod tree;
pub mod truncate;
mod validate;
mod vocab;

pub use block::{BlockBody, ContentBlock};
pub use decode::{
    DecodeError, DecodeWarning, Decoded, DecodedBlock, DecodedEvent, DecodedMessage,
    DecodedPayload, EventKind, NotCanonical, UnknownBlock, decode_line, decode_str,
};
pub use event::{EncodedParts, EventDraft, ExchangeEvent, PreEncoded};
pub use ids::{InvalidRunId, RunId, Seq};
pub use payload::{
    MessagePayload, NetworkRefused, Payload, RunEdge, StepPayload, ToolPayload, Usage,
    WORKFLOW_TEXT_MAX, WorkflowSource,
};
pub use port::{
    Clock, EventMask, ManualClock, RecordError, Recorder, RecorderFactory, RunIdGenerator,
    SequentialRunIds, Subscription,
};
pub use raw::RawJson;
pub use timestamp::{InvalidTimestamp, Timestamp};
pub use validate::InvalidDraft;
pub use vocab::{BlockType, EventType, Fidelity, PayloadKind, Role};

/// The largest transcript line, in bytes (newline excluded), that writers may write and readers
/// must accept: 16 MiB.
///
/// One number shared by every writer (the recorder refuses or truncates anything larger), every
/// reader (longer lines are reported and skipped without being buffered whole) and every framer
/// of provider output, so that the writer can never produce a line its own reader refuses.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
