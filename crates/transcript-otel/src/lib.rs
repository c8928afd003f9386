//! # transcript-otel: transcripts as OpenTelemetry GenAI spans
//!
//! An adapter from the transcript wire format (`transcript-domain`) to
//! OpenTelemetry traces, so runs flow into the observability stack a team
//! already runs (an OpenTelemetry Collector, Jaeger, Arize Phoenix, Langfuse:
//! anything that accepts OTLP). The transcript file stays the source of
//! truth; spans are a derived view, rebuilt from events alone, and exporting
//! them never changes or waits on the transcript.
//!
//! ## Model
//!
//! Events become [`opentelemetry_sdk::trace::SpanData`] directly, without a
//! tracer or span processor: the mapping is pure, deterministic and fast
//! (the `mapping` bench compares it with decoding the same lines). One
//! [`SpanMapper`] state machine serves both modes:
//!
//! * **offline** ([`map_run`]): a stored run and, through a lookup, its child
//!   runs (the contract of `transcript_domain::tree::build_run_tree`), then
//!   [`export_otlp_http`] (OTLP/HTTP protobuf) or [`write_otlp_json`]
//!   (OTLP/JSON lines for file-based collectors and inspection);
//! * **live** ([`LiveExporter`]): events pushed as they are recorded, spans
//!   sent in batches as they finish.
//!
//! ## Mapping
//!
//! Attribute names follow the OpenTelemetry GenAI semantic conventions at the
//! version pinned in [`semconv`] (upstream status: development), which also
//! lists the rules applied (provider names, token counts, `error.type`, tool
//! call ids, workflow names). Every span also carries OpenInference's
//! `openinference.span.kind` (`CHAIN`, `AGENT`, `TOOL`, `LLM`), which Arize
//! Phoenix reads, beside the GenAI names.
//!
//! | transcript | span name | attributes |
//! |---|---|---|
//! | run (`run.started` … `run.completed`) | `invoke_workflow {workflow}` | `gen_ai.operation.name`, `gen_ai.workflow.name` (low-cardinality: `import` for imported runs), `gen_ai.conversation.id` = run id, `transcript.name`, `transcript.run_id`, `transcript.parent_run_id` (child runs) |
//! | step execution (`step.started` … `step.completed`) | `{kind} {name}` | `transcript.kind`, `transcript.name`, `transcript.path`, `transcript.iteration`, `transcript.seq` |
//! | agent step (kind `agent`) | `invoke_agent {name}` | the step's, plus `gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.conversation.id`, and from its `message.assistant` payloads (decision 10) `gen_ai.provider.name` (well-known value) and `transcript.provider`, `gen_ai.request.model` / `gen_ai.response.model` (first / last reported), the step's sums under our names only: `transcript.usage.{input,output,cache_read,cache_write,reasoning}_tokens` (the transcript's counts), `transcript.usage.cost_usd` (the sum of its turns' prices, absent when one has no price) and `transcript.usage.reported_cost_usd` (what the CLI reported itself, e.g. Claude Code's `total_cost_usd`: never on a `chat` span, where it would count as a request's price) |
//! | provider turn (`message.assistant` in an agent step) | `chat {model}` | child of its agent span, from the agent's previous turn (or the step's start) to the message: `gen_ai.operation.name` = `chat`, provider, model, the turn's `gen_ai.usage.input_tokens` (cache included), `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`, `gen_ai.usage.reasoning.output_tokens`, its price from the [`MapOptions::pricing`] seam under the names backends sum (`llm.cost.total`, `gen_ai.usage.cost`), priced under its model, else its step's (the one model the step's turns name: `transcript_domain::bill`, the rule of `receipts`; such a turn's span is emitted when its step ends), OpenInference `llm.model_name`, `llm.provider`, `llm.token_count.{prompt,completion,total}` |
//! | `call_workflow` step | `call_workflow {name}` | the step's, plus `transcript.child_run_id`; the child run's `invoke_workflow` span is its child, in the same trace |
//! | tool call (`tool.call` … `tool.result`, paired by `call_id` and fidelity) | `execute_tool {tool}` | `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id` (the provider's id), `transcript.call_id` (the recorded id, when it differs), `transcript.fidelity` |
//!
//! Any span that ends in error also carries `error.type`.
//!
//! Counted once: a backend that sums token or cost attributes over every span of a trace
//! (Langfuse's `gen_ai.usage.*` and `gen_ai.usage.cost`, Phoenix's `llm.token_count.*` and
//! `llm.cost.total`) finds them on the `chat` spans only, one per API request; agent spans
//! keep their step's sums under `transcript.usage.*`, which no backend adds up, and a CLI's
//! own run total never poses as a request's price
//! (`transcript-cli/tests/otlp_counts.rs` and `otlp_cost.rs` sum every name over real
//! captures' exports).
//!
//! * **Structure**: one trace per root run. Steps nest by path (decision 4:
//!   `a.b` under the open `a`); messages and tools belong to the open step
//!   with their path and iteration (decision 5), else to the run span.
//! * **Times** are the events' timestamps (millisecond precision); a tool
//!   span runs from its call to its result.
//! * **Status**: a recorded error (`run.completed`/`step.completed` `error`,
//!   `tool.result` `error`) sets status Error with that message; success
//!   leaves status Unset, as instrumentation should. A run, step or tool call
//!   that never completed (a crashed run, a lost result) ends at its run's
//!   last event (or the last event of a descendant run) with status Error
//!   `"incomplete"`.
//! * **Tolerance**: unknown event types only advance the clock; a completion
//!   without a start, a result without a call, a missing or cyclic child run
//!   are reported as [`MapProblem`]s, never as failures.
//!
//! ## Determinism of ids
//!
//! Trace and span ids are SHA-256 prefixes of domain-separated keys: the
//! trace from the root run id; a run span from its run id; a step span from
//! run id, path, iteration and start seq; a tool span from run id, call id
//! and call seq. Exporting the same transcript twice, offline or live, yields
//! the same ids, so a backend sees the same spans again rather than a second
//! trace. Ids are derived, not secret: they reveal nothing a run id does not.
//! A backend that keeps the first span of an id (Phoenix does, across its
//! projects) therefore keeps a run where it was first exported: exporting it
//! again under another project changes nothing there. To re-export anyway,
//! delete the run's traces in the backend first, or export to another one.
//!
//! ## Content capture and privacy
//!
//! By default no content leaves the machine: spans carry names, kinds,
//! paths, models, token counts, tool names, ids and error messages. With
//! [`MapOptions::capture_content`] (the CLI's `--capture-content`) agent
//! spans also carry `gen_ai.input.messages`, `gen_ai.output.messages` and
//! `gen_ai.system_instructions`, and tool spans `gen_ai.tool.call.arguments`
//! and `gen_ai.tool.call.result`, as JSON in the conventions' message schema
//! (`{"role", "parts": [...]}` with parts of type `text`, `reasoning`,
//! `tool_call`, `tool_call_response`; other blocks keep their type). The
//! prompt is the first text block of a `message.user`, further text blocks
//! are the system prompt (decision 11). Content is exported verbatim: prompts
//! and tool output may hold secrets, so enable it only towards a backend
//! trusted with them, or mask at record time (`EventMask`). Error messages
//! are always exported; they come from the tools and agents as recorded.
//!
//! ## Transport
//!
//! [`export_otlp_http`] and [`LiveExporter`] send OTLP/gRPC when
//! [`OtlpHttpConfig::protocol`] is `grpc` (tonic's channel on a current-thread runtime of
//! the export thread; Mozilla's roots plus the private CA; headers as metadata; the
//! endpoint is the server's origin), else OTLP/HTTP (protobuf, or the
//! OTLP JSON encoding when `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or
//! `OTEL_EXPORTER_OTLP_PROTOCOL` says `http/json`) with
//! reqwest's blocking client over `http://` or `https://` (rustls: the
//! platform's roots, plus the PEM file of [`OtlpHttpConfig::certificate`] for
//! a private CA), with the configured headers, one deadline per export and
//! retries of transient failures (connection, 429, 502, 503, 504; a `Retry-After`
//! in seconds is honoured within the deadline, its HTTP-date form is not: that
//! retry waits the usual backoff). The client must not be created or dropped
//! inside a tokio runtime: both run it on a dedicated thread of their own, so
//! callers may be async or not. A base endpoint (`https://host:4318`) gets
//! `/v1/traces` appended; a URL with a path is used as given.
//!
//! [`OtlpHttpConfig::resolve`] reads the standard `OTEL_*` environment with the
//! specification's precedence (see [`config`]): endpoint, headers, timeout,
//! certificate, protocol, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`. Header values
//! are secrets: `Debug` shows names only, configuration errors name the
//! setting and the entry's position, and every export error is masked
//! ([`config::Secrets`]) so that a backend echoing a credential in its answer
//! does not put it in a log.
//!
//! ## Live mode guarantees
//!
//! * [`LiveSender::push`] never blocks: a bounded queue feeds the export
//!   thread; when it is full the event is dropped and counted.
//! * Mapping and network I/O happen on the export thread; the recorder
//!   never waits on the network.
//! * Failures (unreachable endpoint, rejected request, exporter that cannot
//!   be built) are counted in the [`ExportReport`] returned by
//!   [`LiveExporter::finish`]; nothing fails the run. After
//!   [`MAX_CONSECUTIVE_FAILURES`] failed requests in a row the exporter stops
//!   sending and only counts, so a hanging endpoint costs a bounded number of
//!   timeouts, at most, however long the run.
//! * Child runs' events may arrive before the parent's call_workflow step
//!   (separate subscriptions): they are held until it arrives, so the tree
//!   is the same as offline.
//!
//! ## Versioning
//!
//! The span shape (names, attribute keys, id derivation) is part of this
//! crate's contract: a change is a semver-breaking change and is listed in
//! the changelog, as dashboards and queries depend on it. The GenAI names
//! track the conventions' version named in [`semconv`]; moving to a newer
//! version is such a change. The `opentelemetry*` crates are pinned to the
//! 0.33 line; their types appear in this API (`SpanData`), so moving to a
//! new line is breaking too.
//!
//! ## Example
//!
//! ```
//! use transcript_domain::{DecodedEvent, EventDraft, Payload, RunId, StepPayload, Timestamp};
//! use transcript_otel::{map_run, MapOptions};
//!
//! let run = RunId::from_bytes([7; 16]);
//! let at = |ms| Timestamp::from_unix_millis(ms).unwrap();
//! let events: Vec<DecodedEvent> = [
//!     EventDraft::run_level(Payload::RunStarted(StepPayload::new("review", "workflow"))),
//!     EventDraft::run_level(Payload::RunCompleted(StepPayload::new("review", "workflow"))),
//! ]
//! .into_iter()
//! .enumerate()
//! .map(|(i, d)| d.into_event(i as u64 + 1, run, None, at(1_000 + i as i64)).into())
//! .collect();
//! let trace = map_run(&events, &mut |_| None, MapOptions::default());
//! assert_eq!(trace.spans.len(), 1);
//! assert_eq!(trace.spans[0].name, "invoke_workflow review");
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod config;
mod content;
mod export;
mod grpc;
pub mod ids;
mod live;
mod mapping;
mod outcome;
mod request;
pub mod semconv;
mod transport;

pub use config::{DEFAULT_BATCH_SIZE, DEFAULT_SERVICE_NAME, OtlpFlags, OtlpHttpConfig};
pub use export::{export_otlp_http, write_otlp_json, write_otlp_json_with_resource};
pub use live::{
    LiveConfig, LiveExporter, LiveProgress, LiveProgressHandle, LiveSender,
    MAX_CONSECUTIVE_FAILURES, forward,
};
pub use mapping::{
    MapOptions, MapProblem, MappedTrace, Pricing, SCOPE_NAME, SpanMapper, map_run, span_time,
};
pub use outcome::{Delivered, ExportError, ExportReport, SpanSink};
pub use request::to_otlp_request;

/// Re-exported OTLP message types (for decoding requests in tests and tools).
pub use opentelemetry_proto::tonic as otlp_proto;
/// Re-exported so callers can name the span type without depending on the SDK.
pub use opentelemetry_sdk::trace::SpanData;
