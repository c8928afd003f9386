//! Agent spans (`invoke_agent`): messages feed the conversation and the GenAI usage and
//! model attributes of the agent step's span.

use super::*;

impl SpanMapper {
    pub(super) fn message(&mut self, state: &mut RunState, event: &DecodedEvent, kind: EventType) {
        let Some(msg) = event.message() else { return };
        let Some(index) = Self::owner(state, &event.path, event.iteration) else {
            return;
        };
        let capture = self.capture_content;
        let agent = state.steps[index].agent.get_or_insert_with(Box::default);
        if kind == EventType::MessageAssistant {
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
            if capture {
                agent.conversation.push_assistant(msg);
            }
        } else if capture {
            agent.conversation.push_user(msg);
        }
    }
}

pub(super) fn agent_attributes(agent: AgentInfo, attributes: &mut Vec<KeyValue>) {
    if let Some(provider) = agent.provider {
        attributes.push(KeyValue::new(GEN_AI_PROVIDER_NAME, provider));
    }
    if let Some(model) = agent.request_model {
        attributes.push(KeyValue::new(GEN_AI_REQUEST_MODEL, model));
    }
    if let Some(model) = agent.response_model {
        attributes.push(KeyValue::new(GEN_AI_RESPONSE_MODEL, model));
    }
    if let Some(usage) = agent.usage {
        let counts = [
            (GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens),
            (GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens),
            (
                GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
                usage.cache_read_tokens,
            ),
            (
                GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
                usage.cache_write_tokens,
            ),
            (TRANSCRIPT_USAGE_REASONING_TOKENS, usage.reasoning_tokens),
        ];
        for (key, value) in counts {
            if let Some(value) = value {
                attributes.push(KeyValue::new(key, to_i64(value)));
            }
        }
        if let Some(cost) = usage.cost_usd {
            attributes.push(KeyValue::new(TRANSCRIPT_USAGE_COST_USD, cost));
        }
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
