//! Agent spans (`invoke_agent`) and their per-call inference spans (`chat`): messages feed
//! the conversation and the GenAI usage and model attributes of the agent step's span, and
//! each assistant message (one provider turn) becomes a `chat` span under it.

use super::*;

impl SpanMapper {
    pub(super) fn message(&mut self, state: &mut RunState, event: &DecodedEvent, kind: EventType) {
        let Some(msg) = event.message() else { return };
        let Some(index) = Self::owner(state, &event.path, event.iteration) else {
            return;
        };
        let capture = self.capture_content;
        let step_start = state.steps[index].start;
        let step_span = state.steps[index].span_id;
        let agent = state.steps[index].agent.get_or_insert_with(Box::default);
        if kind != EventType::MessageAssistant {
            if capture {
                agent
                    .conversation
                    .push_user(msg, (&event.path, event.iteration));
            }
            return;
        }
        if agent.provider.is_none() {
            agent.provider.clone_from(&msg.provider);
        }
        if let Some(model) = &msg.model {
            if agent.request_model.is_none() {
                agent.request_model = Some(model.clone());
            }
            agent.response_model = Some(model.clone());
        }
        if let Some(usage) = &msg.usage {
            agent
                .usage
                .get_or_insert_with(Usage::default)
                .accumulate(usage);
        }
        let cost = turn_cost(
            self.pricing.as_ref(),
            msg.model.as_deref(),
            msg.usage.as_ref(),
        );
        if let Some(cost) = cost {
            *agent.cost_usd.get_or_insert(0.0) += cost;
        }
        let start = agent.last_turn.unwrap_or(step_start);
        agent.last_turn = Some(event.timestamp);
        let output = capture.then(|| {
            let mut turn = Conversation::default();
            turn.push_assistant(msg, (&event.path, event.iteration));
            turn.output
        });
        if capture {
            agent
                .conversation
                .push_assistant(msg, (&event.path, event.iteration));
        }
        // The provider of this turn, else the agent's (an earlier turn named it).
        let provider = msg.provider.clone().or_else(|| agent.provider.clone());
        let turn = Turn {
            provider,
            model: msg.model.clone(),
            usage: msg.usage.clone(),
            cost,
            output,
        };
        self.emit_chat(state, event, step_span, start, turn);
    }

    /// One `chat` span per provider turn, from the agent's previous turn (or its step's
    /// start) to the turn's message.
    fn emit_chat(
        &mut self,
        state: &RunState,
        event: &DecodedEvent,
        parent: SpanId,
        start: Timestamp,
        turn: Turn,
    ) {
        let mut attributes = vec![
            KeyValue::new(GEN_AI_OPERATION_NAME, OP_CHAT),
            KeyValue::new(OPENINFERENCE_SPAN_KIND, OI_LLM),
            KeyValue::new(GEN_AI_CONVERSATION_ID, state.run_id.to_string()),
            KeyValue::new(TRANSCRIPT_SEQ, to_i64(event.seq)),
        ];
        let name = match &turn.model {
            Some(model) => format!("{OP_CHAT} {model}"),
            None => OP_CHAT.to_owned(),
        };
        if let Some(provider) = &turn.provider {
            attributes.push(KeyValue::new(
                GEN_AI_PROVIDER_NAME,
                provider_name(provider).to_owned(),
            ));
            attributes.push(KeyValue::new(
                LLM_PROVIDER,
                provider_name(provider).to_owned(),
            ));
            attributes.push(KeyValue::new(TRANSCRIPT_PROVIDER, provider.clone()));
        }
        if let Some(model) = &turn.model {
            attributes.push(KeyValue::new(GEN_AI_REQUEST_MODEL, model.clone()));
            attributes.push(KeyValue::new(GEN_AI_RESPONSE_MODEL, model.clone()));
            attributes.push(KeyValue::new(LLM_MODEL_NAME, model.clone()));
        }
        if let Some(usage) = &turn.usage {
            let counts = usage_attributes(turn.provider.as_deref(), usage, &mut attributes);
            let oi = [
                (LLM_TOKEN_COUNT_PROMPT, counts.input),
                (LLM_TOKEN_COUNT_COMPLETION, counts.output),
                (
                    LLM_TOKEN_COUNT_TOTAL,
                    match (counts.input, counts.output) {
                        (None, None) => None,
                        (i, o) => Some(i.unwrap_or(0).saturating_add(o.unwrap_or(0))),
                    },
                ),
            ];
            for (key, value) in oi {
                if let Some(value) = value {
                    attributes.push(KeyValue::new(key, to_i64(value)));
                }
            }
        }
        if let Some(cost) = turn.cost {
            attributes.push(KeyValue::new(TRANSCRIPT_USAGE_COST_USD, cost));
            // The names Phoenix and Langfuse read, beside ours (inference spans only).
            attributes.push(KeyValue::new(LLM_COST_TOTAL, cost));
            attributes.push(KeyValue::new(GEN_AI_USAGE_COST, cost));
        }
        if let Some(output) = turn.output.filter(|o| !o.is_empty()) {
            attributes.push(KeyValue::new(
                GEN_AI_OUTPUT_MESSAGES,
                serde_json::Value::Array(output).to_string(),
            ));
        }
        self.push_span_of_kind(
            SpanKind::Client,
            NewSpan {
                trace_id: state.link.trace_id,
                span_id: ids::chat_span_id(state.run_id, event.seq),
                parent_span_id: parent,
                name,
                start,
                end: event.timestamp,
                attributes,
                status: Status::Unset,
            },
        );
    }
}

/// What one provider turn contributes to its `chat` span.
struct Turn {
    provider: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    cost: Option<f64>,
    output: Option<Vec<serde_json::Value>>,
}

/// A turn's cost: reported by the provider, else from the pricing seam (when the model is
/// known and usage was reported). Non-finite values are dropped.
fn turn_cost(pricing: Option<&Pricing>, model: Option<&str>, usage: Option<&Usage>) -> Option<f64> {
    let reported = usage.and_then(|u| u.cost_usd);
    let cost = reported.or_else(|| {
        let (pricing, model, usage) = (pricing?, model?, usage?);
        pricing(model, usage)
    });
    cost.filter(|c| c.is_finite())
}

/// Token counts as the conventions define them.
struct Counts {
    input: Option<u64>,
    output: Option<u64>,
}

/// Pushes the GenAI usage attributes of `usage` (see [`crate::semconv`] for the rules) and
/// returns the conventions' input and output counts.
fn usage_attributes(
    provider: Option<&str>,
    usage: &Usage,
    attributes: &mut Vec<KeyValue>,
) -> Counts {
    let input = match (
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    ) {
        (None, None, None) => None,
        (i, r, w) => Some(
            i.unwrap_or(0)
                .saturating_add(r.unwrap_or(0))
                .saturating_add(w.unwrap_or(0)),
        ),
    };
    let output = if provider.is_some_and(reasoning_outside_output) {
        match (usage.output_tokens, usage.reasoning_tokens) {
            (None, None) => None,
            (o, r) => Some(o.unwrap_or(0).saturating_add(r.unwrap_or(0))),
        }
    } else {
        usage.output_tokens
    };
    let counts = [
        (GEN_AI_USAGE_INPUT_TOKENS, input),
        (GEN_AI_USAGE_OUTPUT_TOKENS, output),
        (
            GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            usage.cache_read_tokens,
        ),
        (
            GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
            usage.cache_write_tokens,
        ),
        (GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, usage.reasoning_tokens),
    ];
    for (key, value) in counts {
        if let Some(value) = value {
            attributes.push(KeyValue::new(key, to_i64(value)));
        }
    }
    Counts { input, output }
}

/// An agent step's summed usage under this project's `transcript.usage.*` names (the
/// transcript's own counts), never the `gen_ai.usage.*` names backends sum over a trace: the
/// step's `chat` spans carry those, one per request, and a backend summing every span
/// (Langfuse, Phoenix) would count each request twice.
fn step_usage_attributes(usage: &Usage, attributes: &mut Vec<KeyValue>) {
    let counts = [
        (TRANSCRIPT_USAGE_INPUT_TOKENS, usage.input_tokens),
        (TRANSCRIPT_USAGE_OUTPUT_TOKENS, usage.output_tokens),
        (TRANSCRIPT_USAGE_CACHE_READ_TOKENS, usage.cache_read_tokens),
        (
            TRANSCRIPT_USAGE_CACHE_WRITE_TOKENS,
            usage.cache_write_tokens,
        ),
        (TRANSCRIPT_USAGE_REASONING_TOKENS, usage.reasoning_tokens),
    ];
    for (key, value) in counts {
        if let Some(value) = value {
            attributes.push(KeyValue::new(key, to_i64(value)));
        }
    }
}

pub(super) fn agent_attributes(agent: AgentInfo, attributes: &mut Vec<KeyValue>) {
    if let Some(provider) = &agent.provider {
        attributes.push(KeyValue::new(
            GEN_AI_PROVIDER_NAME,
            provider_name(provider).to_owned(),
        ));
        attributes.push(KeyValue::new(TRANSCRIPT_PROVIDER, provider.clone()));
    }
    if let Some(model) = agent.request_model {
        attributes.push(KeyValue::new(GEN_AI_REQUEST_MODEL, model));
    }
    if let Some(model) = agent.response_model {
        attributes.push(KeyValue::new(GEN_AI_RESPONSE_MODEL, model));
    }
    if let Some(usage) = &agent.usage {
        step_usage_attributes(usage, attributes);
    }
    if let Some(cost) = agent.cost_usd {
        attributes.push(KeyValue::new(TRANSCRIPT_USAGE_COST_USD, cost));
    }
    let conversation = agent.conversation;
    let json = |messages: Vec<serde_json::Value>| serde_json::Value::Array(messages).to_string();
    if !conversation.system.is_empty() {
        attributes.push(KeyValue::new(
            GEN_AI_SYSTEM_INSTRUCTIONS,
            json(conversation.system),
        ));
    }
    if !conversation.input.is_empty() {
        attributes.push(KeyValue::new(
            GEN_AI_INPUT_MESSAGES,
            json(conversation.input),
        ));
    }
    if !conversation.output.is_empty() {
        attributes.push(KeyValue::new(
            GEN_AI_OUTPUT_MESSAGES,
            json(conversation.output),
        ));
    }
}
