//! Agent spans (`invoke_agent`) and their per-call inference spans (`chat`): messages feed
//! the conversation and the GenAI usage and model attributes of the agent step's span, and
//! each assistant message (one provider turn) becomes a `chat` span under it.

use transcript_domain::bill::{billed_model, step_model};

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
        if let Some(model) = &msg.model
            && !agent.models.contains(model)
        {
            agent.models.push(model.clone());
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
            seq: event.seq,
            start,
            end: event.timestamp,
            provider,
            model: msg.model.clone(),
            usage: msg.usage.clone(),
            output,
            missing: None,
        };
        let Some(turn) = join_request(agent, turn) else {
            return;
        };
        if turn.model.is_none() {
            // Billed under its step's model, known when the step ends (`flush_agent`).
            agent.held.push(turn);
            return;
        }
        let cost = bill_turn(self.pricing.as_ref(), turn.model.as_deref(), &turn, agent);
        self.emit_chat(state, step_span, turn, cost);
    }

    /// At the end of an agent step: the `chat` spans of its turns that named no model,
    /// priced under the step's model (the domain's [`billed_model`]: the one model its other
    /// turns name, else none), before the agent span itself.
    /// Messages still waiting for a usage report (`pending`) are one request whose usage is
    /// unknown: one `chat` span saying why (`status`: the step's; a failed step ended first).
    pub(super) fn flush_agent(
        &mut self,
        state: &RunState,
        parent: SpanId,
        agent: &mut AgentInfo,
        status: Status,
    ) {
        if let Some(mut turn) = agent.pending.take() {
            turn.missing = Some(match status {
                Status::Error { .. } => {
                    "the agent step ended in an error before its provider reported this request's usage"
                }
                _ => "the provider reported no usage for this request",
            });
            if turn.provider.is_none() {
                turn.provider.clone_from(&agent.provider);
            }
            agent.held.push(turn);
        }
        let held = std::mem::take(&mut agent.held);
        if held.is_empty() {
            return;
        }
        let step = step_model(agent.models.iter().map(|m| Some(m.as_str()))).map(str::to_owned);
        for mut turn in held {
            if turn.provider.is_none() {
                turn.provider.clone_from(&agent.provider);
            }
            let model = billed_model(None, step.as_deref()).to_owned();
            let cost = bill_turn(self.pricing.as_ref(), Some(&model), &turn, agent);
            self.emit_chat(state, parent, turn, cost);
        }
    }

    /// One `chat` span per provider turn, from the agent's previous turn (or its step's
    /// start) to the turn's message.
    /// `cost`: the request's price (see [`bill_turn`]), under the names backends sum only.
    fn emit_chat(&mut self, state: &RunState, parent: SpanId, turn: Turn, cost: Option<f64>) {
        let mut attributes = vec![
            KeyValue::new(GEN_AI_OPERATION_NAME, OP_CHAT),
            KeyValue::new(OPENINFERENCE_SPAN_KIND, OI_LLM),
            KeyValue::new(GEN_AI_CONVERSATION_ID, state.run_id.to_string()),
            KeyValue::new(TRANSCRIPT_SEQ, to_i64(turn.seq)),
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
        if let Some(why) = turn.missing {
            attributes.push(KeyValue::new(TRANSCRIPT_USAGE_MISSING, why));
        }
        if let Some(cost) = cost {
            // The names Phoenix and Langfuse sum over a trace, on the request's span only; the
            // step's sum is on its agent span under `transcript.usage.cost_usd`.
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
                span_id: ids::chat_span_id(state.run_id, turn.seq),
                parent_span_id: parent,
                name,
                start: turn.start,
                end: turn.end,
                attributes,
                status: Status::Unset,
            },
        );
    }
}

/// Items the provider reports under one usage are one request: a message without usage
/// waits (in `agent.pending`) for the report that covers it ([`Turn::absorb`]); `Some` is a
/// whole request, with its usage.
fn join_request(agent: &mut AgentInfo, turn: Turn) -> Option<Turn> {
    let turn = match agent.pending.take() {
        Some(mut earlier) => {
            earlier.absorb(turn);
            earlier
        }
        None => turn,
    };
    if turn.usage.is_none() {
        agent.pending = Some(turn);
        return None;
    }
    Some(turn)
}

/// What one provider turn contributes to its `chat` span.
#[derive(Debug)]
pub(super) struct Turn {
    /// Seq of its `message.assistant` event (the span id derives from it).
    seq: Seq,
    /// The agent's previous turn, or the step's start.
    start: Timestamp,
    /// Its message.
    end: Timestamp,
    provider: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    output: Option<Vec<serde_json::Value>>,
    /// Why it carries no usage (see [`TRANSCRIPT_USAGE_MISSING`]).
    missing: Option<&'static str>,
}

impl Turn {
    /// Takes in `later`, the next item of the same request: the span runs on to its end
    /// under its seq (the message that reported the request's usage), with its usage, its
    /// model when it names one, and both outputs.
    fn absorb(&mut self, later: Turn) {
        self.seq = later.seq;
        self.end = later.end;
        self.usage = later.usage;
        if later.model.is_some() {
            self.model = later.model;
        }
        if later.provider.is_some() {
            self.provider = later.provider;
        }
        match (&mut self.output, later.output) {
            (Some(mine), Some(theirs)) => mine.extend(theirs),
            (None, theirs) => self.output = theirs,
            _ => {}
        }
    }
}

/// A turn's cost, priced under `model` (its billed model) with the pricing seam, and added
/// to its agent's sum: one request, one bill, the rule of `receipts`
/// ([`transcript_domain::bill`]). `None` for a turn that reported no usage (not billed), a
/// model without a price, or no pricing seam; the sum is then unknown, never a partial one.
/// What the provider reported itself (`usage.cost_usd`, e.g. Claude Code's run total on its
/// last turn) is no request's price: the agent span carries it apart.
fn bill_turn(
    pricing: Option<&Pricing>,
    model: Option<&str>,
    turn: &Turn,
    agent: &mut AgentInfo,
) -> Option<f64> {
    let usage = turn.usage.as_ref()?;
    let cost = pricing
        .zip(model)
        .and_then(|(pricing, model)| pricing(model, usage))
        .filter(|c| c.is_finite());
    agent.cost.add(cost);
    cost
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
    if let Some(cost) = agent.cost.get() {
        attributes.push(KeyValue::new(TRANSCRIPT_USAGE_COST_USD, cost));
    }
    if let Some(reported) = agent.usage.as_ref().and_then(|u| u.cost_usd) {
        attributes.push(KeyValue::new(TRANSCRIPT_USAGE_REPORTED_COST_USD, reported));
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
