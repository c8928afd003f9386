//! Provider normalizers: agent CLI and API output to canonical content blocks.
//!
//! The canonical transcript absorbs provider divergence in exactly one place
//! (US2, FR-010): this crate. It turns what an agent prints (Claude Code,
//! Codex, Gemini CLI, Copilot CLI) or what an HTTP API returns (OpenAI,
//! Anthropic) into the wire contract's vocabulary: `message.assistant`
//! payloads of [`transcript_domain::ContentBlock`]s and agent-emitted
//! `tool.call` / `tool.result` payloads.
//!
//! # Model
//!
//! A [`Normalizer`] is an incremental state machine fed bytes as the agent
//! produces them ([`Normalizer::feed`], any chunking) and closed with
//! [`Normalizer::finish`]. It appends [`Output`] items as soon as they are
//! known:
//!
//! - [`Output::ToolCall`] when a tool_use is seen (`tool.call`, output `null`),
//! - [`Output::ToolResult`] when its result is seen (`tool.result`, input `null`),
//! - [`Output::Turn`] when a turn is complete (decision 11): its thinking /
//!   text / tool_use blocks in order, then the tool_result blocks answering
//!   them, with `provider`, `model` and `usage` (decision 10). A turn is
//!   complete when the next one starts (a new provider message id, or model
//!   output arriving after tool results) or when the stream ends.
//! - [`Output::Diagnostic`] for everything else (see below).
//!
//! Inside, every parser is the same pipeline: [`frame::Framer`] (bytes →
//! JSON records: NDJSON, pretty-printed documents, top-level arrays, SSE
//! events) → a provider mapper (records → blocks and tool events) → a shared
//! turn assembler. The [`Provider`] registry looks parsers up by name
//! (`claude`, `codex`, `gemini`, `copilot`, `openai`, `anthropic`) and
//! [`detect`] / [`AutoNormalizer`] recognise a stream from its first records
//! (within [`DETECT_MAX_RECORDS`] records and [`DETECT_MAX_BYTES`] bytes,
//! each byte framed once; then a diagnosed fallback).
//!
//! # Imports
//!
//! [`Normalizer::feed_items`] / [`Normalizer::finish_items`] interleave
//! [`Fact`]s with the same outputs: the provider's time of each record
//! ([`Fact::Time`], monotonic, an earlier record yields a `warning`
//! diagnostic), user prompts ([`Fact::Prompt`]; on the plain path they stay
//! `extra` diagnostics, the live seam writes `message.user` itself), the
//! run's duration and final answer, the missing terminal record
//! ([`Fact::Unfinished`]) and a torn last line ([`Fact::Torn`]). Which clock
//! an import uses is [`ClockSource`] (module `facts`). Terminal records:
//! Claude stream-json `result` (session logs, which carry `timestamp`, have
//! none), Codex `turn.completed`/`turn.failed` and legacy `task_complete`
//! (rollouts have none), Gemini stream-json `result`, Copilot `result` or
//! `session.shutdown`, OpenAI a chunk with `finish_reason` or
//! `response.completed`/`.failed`/`.incomplete`, Anthropic `message_stop`;
//! complete JSON documents need none.
//!
//! # Invariants
//!
//! - **Pure**: no I/O, no clock, no randomness; depends on `transcript-domain`
//!   only (checked by `cargo xtask arch-check`).
//! - **Never panics, never drops silently**: every record or event that does
//!   not become a block or tool event yields a [`Diagnostic`] with its
//!   [`Position`] (line, byte offset, array element) and provider type.
//!   Tested by `tests/robustness.rs` (proptest: arbitrary, JSON-ish and
//!   mutated inputs with arbitrary chunk boundaries).
//! - **Chunking invariant**: output is identical whether the input is fed
//!   whole, by line, in random byte chunks or byte by byte (every own and
//!   real fixture, `assert_chunking_invariant`).
//! - **Valid JSON out**: raw control bytes inside strings (Codex has been
//!   seen emitting 0x00) are escaped, so U+0000 is preserved; invalid UTF-8
//!   becomes U+FFFD; both are flagged [`DiagnosticKind::Repaired`].
//! - **Ids preserved, never empty**: provider call ids are kept (`tool_id`
//!   links tool_use and tool_result; `call_id` pairs the events). Where a
//!   provider has no call id the item id is used; where it has neither, an
//!   id is synthesized from the position and marked so: `synth:<where>`
//!   (`synth:item@line2`, `synth:line3#0`, `synth:<record uuid>#<block>`).
//!   Positions are unique within a file and no provider's ids begin with
//!   `synth:`, so a synthesized id never equals a real one (issue #18).
//! - **Dangling calls stay**: a tool_use without result stays in its turn
//!   and its `tool.call` is still emitted. A result without a known call is
//!   kept and flagged [`DiagnosticKind::Orphan`].
//! - **Usage per provider message**: a later usage report for the same
//!   message replaces the earlier one (Claude repeats it on every line of a
//!   split message), so summing `usage` over turns never double counts.
//!   **One request, one bill** (issue #29): Claude usage is keyed by the
//!   API request (`message.id` + `requestId`); the request's last record
//!   carries its final `output_tokens`. A message whose records are split
//!   by the `tool_result` records of its own parallel calls stays one turn
//!   (later blocks go before the results), and a request resumed after
//!   another turn was emitted (an interleaved sidechain) adds only what grew
//!   on a later turn, never its input and cache counts again.
//!   Each turn names its request on the wire (`request_id`, decision 17):
//!   Claude `<message.id>/<requestId>` (the message id alone in stream-json),
//!   an OpenAI Responses response id, a Gemini session file's message id, a
//!   Copilot message id; every turn of one request carries the same value, so
//!   readers of many runs bill a request once across them.
//!   `input_tokens` excludes cache reads for every provider (OpenAI, Codex
//!   and Gemini counts are converted by subtracting cached tokens).
//! - **Claude Code usage is what was billed** (issue #16): its `assistant`
//!   lines carry the usage snapshot taken at `message_start` (an output
//!   count of 1 or so), while the `result` line that ends a run carries the
//!   run's totals (`usage`, else the `modelUsage` entries summed, and
//!   `total_cost_usd`). At `result`, each count the totals have is settled
//!   on the run's last turn: it gets the total minus what the run's earlier
//!   turns already carry, so summing `usage` over a run's turns equals the
//!   result's totals exactly (earlier turns keep their own snapshot; a
//!   result with no turn before it yields a usage-only turn). The last turn
//!   is emitted at `result`, and the next run (a file may hold several)
//!   starts its sum afresh. A model name `claude-opus-4-8[1m]` (init
//!   `model`, `modelUsage` keys) is the model id plus a context-window tag:
//!   turns carry `claude-opus-4-8`.
//! - **Any nesting depth, bounded stack**: no walk recurses once per level
//!   of the input. Opaque values are copied as text, never walked; a small
//!   record nested deeper than serde_json's limit (128) is parsed lazily
//!   instead of being refused; error texts look through at most
//!   16 nested `error` objects and give the rest as JSON text; a recorded
//!   exchange inside a response body is reported, not read. Tested with
//!   ~200 KB of nesting in every provider's records (`tests/deep_nesting.rs`,
//!   `robustness.rs::deep_nesting_never_panics`, the fuzz seeds).
//! - **Opaque values keep their key order**, and in records over
//!   [`json::EAGER_LIMIT`] bytes they are copied verbatim from the input
//!   (number spelling, escapes, spacing; decision 14's spirit); when they
//!   span several lines, which a JSON Lines transcript cannot carry, only the
//!   whitespace between their tokens is removed; small
//!   records are parsed eagerly and their opaque values re-serialized
//!   compactly (same value, same key order). [`json::Value`] keeps the
//!   containers of large records as raw text until a mapper reads them,
//!   without serde_json's workspace-wide `preserve_order` feature. The
//!   eager/lazy choice is made on the record's bytes with trailing
//!   whitespace trimmed on every path, so it cannot depend on chunking
//!   (`frame::tests::eager_lazy_choice_does_not_depend_on_chunking`).
//!
//! # Performance
//!
//! `benches/normalize.rs` (`cargo xtask bench`) normalizes a ≥ 10 MB stream
//! per format built from real captured lines and reports throughput as a
//! ratio to parsing the same payloads into `serde_json::Value` in the same
//! run (target ≥ 0.5×). Single-line records inside a chunk take a fast path
//! (one serde parse, no byte-by-byte scan), newlines are searched eight bytes
//! at a time, and the repair pass only runs when a plain parse fails.
//!
//! # Threat model
//!
//! Input is untrusted agent output. The framer buffers at most one record
//! (or one SSE event) at a time, of at most
//! [`transcript_domain::MAX_LINE_BYTES`] (larger ones are reported and
//! skipped; auto-detection holds at most [`DETECT_MAX_BYTES`]); a record that never closes is salvaged line
//! by line at the end of the stream, and a raw newline inside a string or a
//! column-0 `{` inside an open object ends a truncated record early, so one
//! broken line cannot swallow the rest of an NDJSON stream. Nothing is
//! executed or resolved; strings are carried verbatim (no secret masking
//! here, as the seed's Limitations state).
//!
//! # Mapping table
//!
//! Diagnostic kinds: **M** metadata, **P** progress (superseded by a mapped
//! record), **X** extra (no block type for it), **U** unknown type, **E**
//! provider error, **W** warning (an error the provider survived), **R** refusal, **I** incomplete, **O** orphan, **F**
//! malformed, **Rp** repaired; **prompt** a user prompt ([`Fact::Prompt`]
//! with `feed_items`, the import's `message.user`; X on the plain path). "use/result" means a `tool_use` block plus
//! `tool.call`, and a `tool_result` block plus `tool.result`.
//!
//! | provider | record / event / item | becomes |
//! |---|---|---|
//! | claude | `system/init` | M; its `model` is the default model of turns |
//! | claude | `system/api_error`, `system/error` | E |
//! | claude | `system/api_refusal`, `system/model_refusal_fallback` | R |
//! | claude | other `system/*` (compact_boundary, turn_duration, hooks…) | M |
//! | claude | `assistant` (one API message may span several lines sharing `message.id`: one turn) | its content blocks below; `message.usage` → turn usage (last report per `message.id` + `requestId`, billed once); `message.model` → model |
//! | claude | block `text` / `thinking` | text / thinking |
//! | claude | thinking `signature` (non-empty) | X `thinking/signature` (blocks have no field for it) |
//! | claude | block `redacted_thinking` | X |
//! | claude | block `tool_use`, `server_tool_use`, `mcp_tool_use` (MCP: `server/name`) | use; MCP tools named `mcp__*` are ordinary tool_use |
//! | claude | assistant block `*_tool_result` (server-side tools: web search, code execution) | result, inside the same turn |
//! | claude | block `fallback` | M |
//! | claude | `user` tool_result (id `tool_use_id`, else record `sourceToolUseID`) | result; `is_error` → `error` = its text |
//! | claude | `user` string content, text blocks (not `isMeta`, not `isCompactSummary`, no tool_result) | prompt (import: `message.user`; else X) |
//! | claude | `user` image blocks, meta / compact-summary content | X |
//! | claude | `result` success | M; `usage` (else `modelUsage` summed) settles the run's last turn so turns sum to it; `total_cost_usd` → `cost_usd` of that turn; ends the turn |
//! | claude | `result` error (`is_error`, `error_max_turns`, `error_during_execution`) | E |
//! | claude | `stream_event` (partial messages) | P |
//! | claude | session records (`summary`, `attachment`, `file-history-snapshot`, `progress`, `queue-operation`, titles, modes, links, `worktree-state`…) | M |
//! | codex | `thread.started`, `turn.started` | M (turn.started closes the open turn) |
//! | codex | `turn.completed` | `usage` → the open turn's usage (covers the whole Codex turn); closes it |
//! | codex | `turn.failed`, `error` | E |
//! | codex | item `error` | W when its turn then completes (`turn.completed`), else E (turn failed, new turn, end of stream) |
//! | codex | item `agent_message` / `assistant_message` (0.42–0.43) | text (on `item.completed`; started/updated P) |
//! | codex | item `reasoning` | thinking |
//! | codex | item `command_execution` | use on start (name `command_execution`, input `{command}`), result on completion (`aggregated_output`; non-zero `exit_code` / `failed` → error) |
//! | codex | item `file_change` (file changes) | use `file_change` `{changes}` + result `{status}` |
//! | codex | item `mcp_tool_call` (MCP calls) | use `server/tool` with `arguments`, result `result` / `error` |
//! | codex | item `web_search` | use `{query}` + result (`{status}`) |
//! | codex | item `todo_list` (todo lists) | X on every event (plan state, not a tool exchange) |
//! | codex | item `function_call` (0.42 form) | use (arguments decoded when JSON) |
//! | codex | any `item.updated` | P |
//! | codex | legacy config header (`model`) / `{"prompt"}` line | M (model) / prompt |
//! | codex | rollout `event_msg/user_message` | prompt (import), else P |
//! | codex | legacy `task_started`, `task_complete` | M (close the turn) |
//! | codex | legacy `agent_message`, `agent_reasoning` | text, thinking |
//! | codex | legacy `exec_command_begin`/`_end`, `patch_apply_begin`/`_end` (`apply_patch`), `mcp_tool_call_begin`/`_end`, `web_search_begin`/`_end` | use / result by `call_id` |
//! | codex | legacy `token_count` | usage (with `info`: as the rollout's) |
//! | codex | legacy deltas, `exec_command_output_delta` | P |
//! | codex | legacy `error`, `stream_error`, `turn_aborted` | E |
//! | codex | rollout `session_meta`, `turn_context` (model), `compacted`, `world_state` | M |
//! | codex | rollout `response_item` | as the OpenAI Responses items below |
//! | codex | rollout `event_msg/token_count` | `info.total_token_usage` is cumulative: what it grew by since the previous one is added to the open turn's usage (an unchanged total bills nothing: M); the first total, or one that shrank, bills `info.last_token_usage` |
//! | codex | rollout `event_msg` duplicating a response item (`agent_message`, `exec_command_end`, `mcp_tool_call_end`, `user_message`…) | P |
//! | codex | rollout `event_msg` bookkeeping (approvals, review mode, thread settings, `collab_*`, notices) / deltas | M / P |
//! | codex | other rollout `event_msg` | U |
//! | gemini | `init` | M (detail: its `session_id`, [`gemini_session_id`]); model |
//! | gemini | `message` role user, `user` record | prompt |
//! | gemini | `message` role assistant (`delta: true` pieces accumulate into one text block) | text |
//! | gemini | `tool_use` / `tool_result` by `tool_id` | use / result (`status: error` → error) |
//! | gemini | `error` | E |
//! | gemini | `result` | `stats.models` (the models a run used; `init` may name the router `auto`): one model → model and usage of the open turn, several → one usage-only turn per model; else `stats` → usage of the open turn (whole run): thought tokens (`thoughts`, or `total_tokens` − `input_tokens` − `output_tokens` where the CLI omits them) → reasoning, not part of output (Gemini counts them apart); non-success status → E. A live run's turns get each message's model and usage from the CLI's session file instead: [`gemini_turns_from_session`] |
//! | gemini | `--output-format json` document | `response` → text; `stats.models.*.tokens` → usage per model (`prompt` − `cached` + `tool` → input, `candidates` → output, `cached` → cache read, `thoughts` → reasoning; one model: the text turn's; several: a usage-only turn each); `stats.tools` calls → X (no content); `error` → E |
//! | gemini | thinking | none in stream-json: the documented extra of the equivalence test |
//! | gemini | saved session (`chats/session-*.jsonl`: metadata, then message records appended again whole under their `id` as they grow; `$set` / `$rewindTo` ignored) | `user` text → prompt; `gemini` → one turn per `id`, its last record: `thoughts` → thinking, `content` → text, `toolCalls` → use / result (each `tool.*` once, as soon as a record shows it), `tokens` → usage (`input` − `cached` + `tool` → input, `output`, `cached` → cache read, `thoughts` → reasoning), `model`; `info` → M, `warning` / `error` → W |
//! | copilot | `assistant.message` | turn per `messageId`: `reasoningText` → thinking, `content` → text, `toolRequests` → use, `outputTokens` → usage (last report per `messageId`, billed once) |
//! | copilot | `reasoningOpaque` / `encryptedContent` | X |
//! | copilot | `assistant.reasoning` | thinking |
//! | copilot | `tool.execution_start` | P when the call was requested, else use |
//! | copilot | `tool.execution_complete` by `toolCallId` | result (`success: false` → error) |
//! | copilot | `assistant.message_delta`, `reasoning_delta`, partial results (ephemeral) | P |
//! | copilot | `assistant.turn_start` / `turn_end` | M (turn_end closes the turn) |
//! | copilot | `user.message` (with the preceding `system.message` as its system prompt) | prompt |
//! | copilot | `session.*` `model` / `newModel` / `currentModel` / `selectedModel` / `chosenModel` | the model of later turns |
//! | copilot | a line that is not JSON starting `Error:` (`Error: Not authenticated`) | F, and quoted in the failing `result`'s E (else its own E at the end) |
//! | copilot | `session.error`, `abort`, `result` with non-zero `exitCode` | E |
//! | copilot | `session.shutdown` `modelMetrics.<model>.usage` (session-state `events.jsonl`) | M; per model, what its messages did not bill (`inputTokens` minus the cache reads and writes, the cache counts, `outputTokens` minus the messages' own) → a usage-only turn of that model; one shutdown per resumed segment, each for its segment |
//! | copilot | `result`, `session.*`, `hook.*`, `subagent.*`, `system.notification` | M |
//! | openai | `chat.completion` | turn per response id: `reasoning_content` → thinking, `content` → text, `refusal` → text + R, `tool_calls` → use; choices after the first X; `usage` |
//! | openai | `chat.completion.chunk` SSE | accumulated per id, blocks in stream order (text before and after a tool call keeps its place); tool calls assembled by `index`; flushed at `finish_reason` (`length` I, `content_filter` R); content after `finish_reason` kept (flushed later) + F; usage chunk → usage; unparsable arguments → string input + I |
//! | openai | `data: [DONE]`, SSE comments | M |
//! | openai | chat `messages` (role `assistant` / `tool`) | turns / result by `tool_call_id`; role `user` prompt (with the preceding `system`/`developer` text) |
//! | openai | Responses `response` | turn per id; `usage` (cached and reasoning tokens) |
//! | openai | item `message` / `output_text` / `refusal` | text (refusal + R); other parts X |
//! | openai | item `reasoning` | one thinking block per summary / content text; none readable (encrypted only) → X |
//! | openai | item `function_call`, `custom_tool_call`, `local_shell_call`, `tool_search_call` | use (`call_id`, else item id) |
//! | openai | item `*_output` | result |
//! | openai | item `web_search_call`, `image_generation_call`, `mcp_call`, `file_search_call`, `code_interpreter_call` (server-side tools) | use + result in the same turn |
//! | openai | Responses SSE `response.output_item.done` / `response.completed` | item as above / usage; deltas, parts and server-tool progress of the documented families P; other `response.*` U |
//! | anthropic | `message` response | as the claude assistant content; usage; `stop_reason: refusal` → R |
//! | anthropic | `message_start` | opens a turn per message id; usage |
//! | anthropic | `content_block_start` / `_delta` / `_stop` | the block, emitted at stop; `input_json_delta` assembled; a second start on an open index closes the first block (kept) + I |
//! | anthropic | `signature_delta` | X `thinking/signature` |
//! | anthropic | `server_tool_use` + `*_tool_result` blocks | use + result in the same turn |
//! | anthropic | block never stopped (stream cut, `max_tokens`) | the block is kept + I; incomplete tool JSON → input kept as a JSON string |
//! | anthropic | `message_delta` | stop reason (`refusal` → R), cumulative usage |
//! | anthropic | `ping` | P |
//! | anthropic | `error` | E |
//! | anthropic | recorded exchange `{request, response}` | the request's last user message's `tool_result` blocks → results (answering the previous response), else its text is the prompt (with `system`), else X; body JSON or SSE text as above; HTTP ≥ 400 → E |
//! | all | not JSON / truncated record / record over the line cap | F (with the line's start) |
//! | all | a text, thinking or message field that is not a string | its JSON text + F |
//! | all | unknown record, event or block type | U |
//!
//! # Versioning
//!
//! Provider formats change without notice; unknown types are counted (U),
//! never fatal, so a new CLI version degrades to diagnostics rather than
//! errors. Changing what a record maps to changes the goldens in
//! `fixtures/providers/` (reviewed by reading) and, for real captures, the
//! jq-computed manifest in `fixtures/real-manifest/` (regenerated with its
//! `generate.sh`, never from this parser). The public API ([`Normalizer`],
//! [`Output`], [`Diagnostic`], [`Provider`]) follows the workspace version;
//! new [`DiagnosticKind`]s or providers are additive.
//!
//! # Example
//!
//! ```
//! use transcript_providers::{Normalizer, Output, Provider};
//!
//! let mut n = Provider::Codex.normalizer();
//! let mut out = Vec::new();
//! n.feed(br#"{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"PING"}}"#, &mut out);
//! n.feed(b"\n", &mut out);
//! n.finish(&mut out);
//! let Output::Turn(turn) = &out[0] else { panic!() };
//! assert_eq!(turn.blocks[0].as_text(), Some("PING"));
//! assert_eq!(turn.provider.as_deref(), Some("codex"));
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod anthropic;
mod claude;
mod codex;
mod copilot;
pub mod envelope;
mod facts;
pub mod frame;
mod gemini;
mod gemini_chats;
mod gemini_session;
pub mod json;
mod openai;
mod output;
pub mod pricing;
mod registry;
mod turns;
mod util;

pub use facts::{ClockSource, Fact, Item};
pub use gemini_session::{SessionMismatch, gemini_session_id, gemini_turns_from_session};
pub use output::{Diagnostic, DiagnosticKind, Output, Position, Summary, turn_block_types};
pub use pricing::{Cost, LITELLM_VERSION, Pricing, PricingError, SYNTHETIC_MODEL};
pub use registry::{
    AutoNormalizer, DETECT_MAX_BYTES, DETECT_MAX_RECORDS, Provider, UnknownProvider, detect,
};

/// An incremental normalizer for one provider stream.
///
/// Feed it the agent's output bytes in any chunking, then call
/// [`Normalizer::finish`] once at the end of the stream. Outputs are appended
/// to `out` as soon as they are known. It never panics and never performs
/// I/O; input it cannot map becomes [`Output::Diagnostic`]s.
pub trait Normalizer: Send {
    /// The provider this normalizer parses.
    fn provider(&self) -> Provider;
    /// Consumes the next chunk of the stream.
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Output>);
    /// Ends the stream: flushes pending records, partial blocks and the last turn.
    fn finish(&mut self, out: &mut Vec<Output>);
    /// Like [`Normalizer::feed`], with the [`Fact`]s an import needs
    /// (provider times, user prompts, …) interleaved, each before the first
    /// output it applies to. Use either this pair or `feed`/`finish` on one
    /// normalizer, not both. The default has no facts.
    fn feed_items(&mut self, bytes: &[u8], out: &mut Vec<Item>) {
        let mut outputs = Vec::new();
        self.feed(bytes, &mut outputs);
        out.extend(outputs.into_iter().map(Item::Output));
    }
    /// Like [`Normalizer::finish`], for [`Normalizer::feed_items`]; adds
    /// [`Fact::Torn`] and [`Fact::Unfinished`] when the capture is cut off.
    fn finish_items(&mut self, out: &mut Vec<Item>) {
        let mut outputs = Vec::new();
        self.finish(&mut outputs);
        out.extend(outputs.into_iter().map(Item::Output));
    }
}

/// Normalizes a complete input in one call, with the import's facts.
pub fn normalize_items(provider: Provider, input: &[u8]) -> Vec<Item> {
    let mut n = provider.normalizer();
    let mut out = Vec::new();
    n.feed_items(input, &mut out);
    n.finish_items(&mut out);
    out
}

/// Normalizes a complete input in one call.
pub fn normalize(provider: Provider, input: &[u8]) -> Vec<Output> {
    let mut n = provider.normalizer();
    let mut out = Vec::new();
    n.feed(input, &mut out);
    n.finish(&mut out);
    out
}
