//! Attribute names and values used on the exported spans.
//!
//! The `gen_ai.*` names follow the OpenTelemetry semantic conventions
//! **v1.41.0** for generative AI (`docs/gen-ai/gen-ai-spans.md` and
//! `gen-ai-agent-spans.md`), the last release before the GenAI conventions
//! moved to their own repository. Upstream marks them *Development*, so they
//! are defined here rather than taken from the deprecated constants of
//! `opentelemetry-semantic-conventions`; a rename upstream is a one-line change
//! in this file. The `transcript.*` names are this project's own namespace for
//! what the conventions do not cover (paths, iterations, fidelity).

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
/// Tool call correlation id (`call_id`).
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
/// Reasoning tokens (no stable GenAI name yet).
pub const TRANSCRIPT_USAGE_REASONING_TOKENS: &str = "transcript.usage.reasoning_tokens";
/// Cost in US dollars reported by the provider (no GenAI name yet).
pub const TRANSCRIPT_USAGE_COST_USD: &str = "transcript.usage.cost_usd";
/// Seq of the event that opened the span (run.started, step.*.started, tool.call).
pub const TRANSCRIPT_SEQ: &str = "transcript.seq";

/// Status description of a span whose run or step never completed.
pub const INCOMPLETE: &str = "incomplete";
