//! Attribute names and values used on the exported spans.
//!
//! ## Pinned version
//!
//! The `gen_ai.*` names and rules follow the GenAI semantic conventions as kept in
//! [open-telemetry/semantic-conventions-genai](https://github.com/open-telemetry/semantic-conventions-genai),
//! which has no release yet: they are checked against **[`SEMCONV_GENAI_COMMIT`]**
//! (`model/gen-ai/registry.yaml`: attribute names, `gen_ai.provider.name` and
//! `gen_ai.operation.name` well-known values; `docs/gen-ai/anthropic.md`: the input-token
//! rule), whose documents reference the core conventions **v1.41.1** for `error.type`
//! ([`SEMCONV_CORE_VERSION`]). Upstream marks them *Development*, so they are defined here
//! rather than taken from the deprecated constants of `opentelemetry-semantic-conventions`;
//! a rename upstream is a one-line change in this file. The `transcript.*` names are this
//! project's own namespace for what the conventions do not cover (paths, iterations,
//! fidelity, cost); `openinference.span.kind` is OpenInference's (Arize Phoenix), set beside
//! the GenAI names, not instead of them.
//!
//! ## Rules applied (each with a test in `tests/conventions.rs`)
//!
//! * `gen_ai.provider.name`: the registry's well-known value for the provider that served
//!   the agent CLI ([`provider_name`]); the transcript's own name stays in
//!   `transcript.provider`.
//! * `gen_ai.usage.input_tokens` includes cached tokens: the transcript counts input
//!   *excluding* cache reads and writes for every provider (the normalizers subtract them),
//!   so the attribute is `input + cache_read + cache_creation` (Anthropic's rule, and the
//!   registry's "SHOULD include all types of input tokens" for the others).
//! * `gen_ai.usage.reasoning.output_tokens` for reasoning tokens, which the registry says
//!   SHOULD be included in `gen_ai.usage.output_tokens`: Gemini counts them apart, so its
//!   output is `output + reasoning`; the others already include them.
//! * `error.type` on every span that ends in error: [`ERROR_TYPE_OTHER`] for a recorded
//!   failure (free text, not a low-cardinality class), [`INCOMPLETE`] for a span whose run
//!   or step never completed.
//! * `gen_ai.tool.call.id` is the provider's call id: the `<path>#<iteration>/` prefix the
//!   executor adds to keep agent executions apart is removed (the recorded id stays in
//!   `transcript.call_id`).
//! * Cost is counted once per request: each `chat` span carries its request's price under the
//!   names backends sum over a trace ([`LLM_COST_TOTAL`], [`GEN_AI_USAGE_COST`]); the agent
//!   span carries its step's sum under [`TRANSCRIPT_USAGE_COST_USD`] only, and what the CLI
//!   reported itself under [`TRANSCRIPT_USAGE_REPORTED_COST_USD`] (a run total, no request's
//!   price).
//! * `gen_ai.workflow.name` is low-cardinality: an imported run (`import <file>`, as
//!   `transcript import` names it) is `import`; the full name stays in `transcript.name`.

/// The operation a span stands for (`invoke_workflow`, `invoke_agent`, `execute_tool`).
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// Workflow name on the `invoke_workflow` span.
pub const GEN_AI_WORKFLOW_NAME: &str = "gen_ai.workflow.name";
/// Conversation id: the transcript's run id.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// Agent (step) name on `invoke_agent` spans.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// Provider registry name reported on `message.assistant` (decision 10).
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// Model the agent was asked to use, when the provider reported one.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// Model that answered, when the provider reported one.
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// Input tokens summed over the step's provider turns.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Output tokens summed over the step's provider turns.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Input tokens served from the provider's prompt cache.
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// Input tokens written to the provider's prompt cache.
pub const GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: &str =
    "gen_ai.usage.cache_creation.input_tokens";
/// Chat history sent to the agent (opt-in content), JSON.
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// Messages the agent produced (opt-in content), JSON.
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// System prompt (opt-in content), JSON array of parts.
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// Tool name on `execute_tool` spans.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// The provider's tool call id (the recorded `call_id` without the executor's prefix).
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// Tool arguments (opt-in content), JSON.
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// Tool result (opt-in content), JSON.
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";

/// `gen_ai.operation.name` of a run span.
pub const OP_INVOKE_WORKFLOW: &str = "invoke_workflow";
/// `gen_ai.operation.name` of an agent step span.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
/// `gen_ai.operation.name` of a tool call span.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.operation.name` of a per-call inference span (one per provider turn).
pub const OP_CHAT: &str = "chat";

/// Step kind (`agent`, `command`, `call_workflow`, …; `workflow` on run spans).
pub const TRANSCRIPT_KIND: &str = "transcript.kind";
/// Step name from the workflow definition.
pub const TRANSCRIPT_NAME: &str = "transcript.name";
/// Dot-separated step path.
pub const TRANSCRIPT_PATH: &str = "transcript.path";
/// Innermost loop iteration of the step.
pub const TRANSCRIPT_ITERATION: &str = "transcript.iteration";
/// Run id of the transcript the span came from.
pub const TRANSCRIPT_RUN_ID: &str = "transcript.run_id";
/// Parent run id, on the run span of a child run.
pub const TRANSCRIPT_PARENT_RUN_ID: &str = "transcript.parent_run_id";
/// Child run id, on a `call_workflow` step span.
pub const TRANSCRIPT_CHILD_RUN_ID: &str = "transcript.child_run_id";
/// Who captured a tool call: `router` or `agent_emitted`.
pub const TRANSCRIPT_FIDELITY: &str = "transcript.fidelity";
/// Output tokens used for reasoning.
pub const GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
/// Class of the error a span ended with (core conventions, stable).
pub const ERROR_TYPE: &str = "error.type";
/// `error.type` of a recorded failure: the conventions' fallback value.
pub const ERROR_TYPE_OTHER: &str = "_OTHER";
/// The transcript's provider name (`claude`, `codex`, …) beside `gen_ai.provider.name`.
pub const TRANSCRIPT_PROVIDER: &str = "transcript.provider";
/// The recorded `call_id` of a tool span, when `gen_ai.tool.call.id` had its prefix removed.
pub const TRANSCRIPT_CALL_ID: &str = "transcript.call_id";
/// OpenInference span kind (Arize Phoenix): `CHAIN`, `AGENT`, `TOOL`, `LLM`.
pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
/// OpenInference kind of workflow and step spans.
pub const OI_CHAIN: &str = "CHAIN";
/// OpenInference kind of agent spans.
pub const OI_AGENT: &str = "AGENT";
/// OpenInference kind of tool spans.
pub const OI_TOOL: &str = "TOOL";
/// OpenInference kind of per-call inference spans.
pub const OI_LLM: &str = "LLM";
/// OpenInference model name (Phoenix charts tokens and cost by it), on inference spans.
pub const LLM_MODEL_NAME: &str = "llm.model_name";
/// OpenInference provider, on inference spans.
pub const LLM_PROVIDER: &str = "llm.provider";
/// OpenInference prompt tokens (cache included), on inference spans.
pub const LLM_TOKEN_COUNT_PROMPT: &str = "llm.token_count.prompt";
/// OpenInference completion tokens, on inference spans.
pub const LLM_TOKEN_COUNT_COMPLETION: &str = "llm.token_count.completion";
/// OpenInference total tokens, on inference spans.
pub const LLM_TOKEN_COUNT_TOTAL: &str = "llm.token_count.total";
/// OpenInference total cost in US dollars (what Phoenix shows and sums as "Total Cost"), on
/// inference spans only (agent spans would count it twice).
pub const LLM_COST_TOTAL: &str = "llm.cost.total";
/// Cost in US dollars under the name Langfuse's OTLP ingestion maps to a generation's cost
/// (also read by OpenLIT-style tools); on inference spans only.
pub const GEN_AI_USAGE_COST: &str = "gen_ai.usage.cost";
/// An agent step's cost in US dollars, on agent spans only: the sum of its turns' prices from
/// the [`crate::MapOptions::pricing`] seam (each turn's is on its `chat` span as
/// [`LLM_COST_TOTAL`] and [`GEN_AI_USAGE_COST`]), absent when a billed turn has no price.
/// Like the step's token sums it is under a `transcript.*` name that no backend adds up, so
/// a trace's cost is counted once (no GenAI name yet).
pub const TRANSCRIPT_USAGE_COST_USD: &str = "transcript.usage.cost_usd";
/// What the agent CLI reported itself for an agent step, in US dollars (Claude Code's
/// `total_cost_usd`, summed), on agent spans only. It covers the CLI's whole invocation
/// (helper-model calls included, priced by the CLI's own table), so it is no request's price
/// and never sits on a `chat` span; it may differ from [`TRANSCRIPT_USAGE_COST_USD`].
pub const TRANSCRIPT_USAGE_REPORTED_COST_USD: &str = "transcript.usage.reported_cost_usd";
/// Why a `chat` span carries no usage (its provider reported none for the request, or the
/// step ended before it did): a span never claims a request without saying why its tokens
/// are unknown.
pub const TRANSCRIPT_USAGE_MISSING: &str = "transcript.usage.missing";
/// An agent step's summed input tokens as the transcript counts them (cache reads and
/// writes excluded), on agent spans. Agent spans carry their step's sums under these
/// `transcript.usage.*` names only, never under the names backends sum over a trace
/// (`gen_ai.usage.*`, `llm.token_count.*`, `llm.cost.total`, `gen_ai.usage.cost`): the
/// step's `chat` spans carry those, once per API request, so Langfuse and Phoenix count each
/// request once.
pub const TRANSCRIPT_USAGE_INPUT_TOKENS: &str = "transcript.usage.input_tokens";
/// An agent step's summed output tokens (as reported), on agent spans.
pub const TRANSCRIPT_USAGE_OUTPUT_TOKENS: &str = "transcript.usage.output_tokens";
/// An agent step's summed cache-read tokens, on agent spans.
pub const TRANSCRIPT_USAGE_CACHE_READ_TOKENS: &str = "transcript.usage.cache_read_tokens";
/// An agent step's summed cache-write tokens, on agent spans.
pub const TRANSCRIPT_USAGE_CACHE_WRITE_TOKENS: &str = "transcript.usage.cache_write_tokens";
/// An agent step's summed reasoning tokens, on agent spans.
pub const TRANSCRIPT_USAGE_REASONING_TOKENS: &str = "transcript.usage.reasoning_tokens";
/// Seq of the event that opened the span (run.started, step.*.started, tool.call).
pub const TRANSCRIPT_SEQ: &str = "transcript.seq";

/// Status description (and `error.type`) of a span whose run or step never completed.
pub const INCOMPLETE: &str = "incomplete";

/// The semantic-conventions-genai commit whose registry these names were checked against.
pub const SEMCONV_GENAI_COMMIT: &str = "002c8a6ea1c8a42b14a4527db83b3cabcded610a";
/// The core semantic conventions version the GenAI documents reference (`error.type`).
pub const SEMCONV_CORE_VERSION: &str = "1.41.1";

/// The registry's well-known `gen_ai.provider.name` for a transcript provider name:
/// `claude`/`anthropic` → `anthropic`, `codex`/`openai` → `openai`, `gemini` → `gcp.gemini`
/// (the Gemini CLI calls `generativelanguage.googleapis.com`). A provider the registry has no
/// value for (`copilot`: GitHub Copilot serves several vendors' models) keeps its name, as the
/// conventions allow a custom value.
pub fn provider_name(transcript_provider: &str) -> &str {
    match transcript_provider {
        "claude" | "anthropic" => "anthropic",
        "codex" | "openai" => "openai",
        "gemini" => "gcp.gemini",
        other => other,
    }
}

/// Whether the provider counts reasoning tokens apart from output tokens (Gemini), so that
/// `gen_ai.usage.output_tokens` must add them.
pub fn reasoning_outside_output(transcript_provider: &str) -> bool {
    transcript_provider == "gemini"
}

/// The provider's call id inside a recorded `call_id`: the executor records an agent's call
/// ids as `<path>#<iteration>[~<n>]/<id>`; exactly that prefix, for the event's own path and
/// iteration, is removed. Anything else is returned whole.
pub fn provider_call_id<'a>(call_id: &'a str, path: &str, iteration: u64) -> &'a str {
    let Some(rest) = call_id
        .strip_prefix(path)
        .and_then(|r| r.strip_prefix('#'))
        .filter(|_| !path.is_empty())
    else {
        return call_id;
    };
    let digits = iteration.to_string();
    let Some(rest) = rest.strip_prefix(digits.as_str()) else {
        return call_id;
    };
    let rest = match rest.strip_prefix('~') {
        Some(r) => {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                return call_id;
            }
            &r[n..]
        }
        None => rest,
    };
    match rest.strip_prefix('/') {
        Some(id) if !id.is_empty() => id,
        _ => call_id,
    }
}

/// A low-cardinality `gen_ai.workflow.name`: `import` for an imported run (`import <file>`).
pub fn workflow_name(name: &str) -> &str {
    if name.starts_with("import ") {
        "import"
    } else {
        name
    }
}
