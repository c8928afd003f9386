# Trims LiteLLM's model_prices_and_context_window.json to the providers
# transcript normalizes (Anthropic / Claude Code, OpenAI / Codex, Gemini)
# and the fields pricing reads. Run: jq -S -f trim.jq <litellm json>
with_entries(
  select(.value | type == "object")
  | select(.value.litellm_provider | IN("anthropic", "openai", "gemini", "vertex_ai-language-models"))
  | select(.value.mode | IN("chat", "responses", "completion"))
  | .value |= (
      with_entries(select(.key | test("^(input_cost_per_token|output_cost_per_token|output_cost_per_reasoning_token|cache_read_input_token_cost|cache_creation_input_token_cost|cache_creation_input_token_cost_above_1hr)(_above_[0-9]+k_tokens)?$")))
      + {litellm_provider: .litellm_provider}
    )
  | select(.value | has("input_cost_per_token") or has("output_cost_per_token"))
)
