//! Opt-in message content in the GenAI conventions' message schema.
//!
//! A message is `{"role": …, "parts": [...]}`; a part is one of
//! `{"type":"text","content":…}`, `{"type":"reasoning","content":…}`,
//! `{"type":"tool_call","id":…,"name":…,"arguments":…}` and
//! `{"type":"tool_call_response","id":…,"response":…}`. Blocks the schema has
//! no type for (`command`, unknown blocks) become generic parts that keep the
//! block's type string, as the schema allows.

use serde_json::{Map, Value, json};
use transcript_domain::{BlockBody, DecodedBlock, DecodedMessage, RawJson};

use crate::semconv::provider_call_id;

/// Messages gathered for one agent step.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    pub(crate) input: Vec<Value>,
    pub(crate) output: Vec<Value>,
    pub(crate) system: Vec<Value>,
}

/// Parses verbatim JSON; text that is not JSON (it always is, coming from
/// the decoder) degrades to a string rather than failing the export.
pub(crate) fn raw_value(raw: &RawJson) -> Value {
    serde_json::from_str(raw.get()).unwrap_or_else(|_| Value::String(raw.get().to_owned()))
}

fn text_part(kind: &str, content: &str) -> Value {
    json!({"type": kind, "content": content})
}

/// Where a message was recorded (its step's path and iteration): tool ids lose the
/// executor's prefix for that step ([`crate::semconv::provider_call_id`]).
pub(crate) type At<'a> = (&'a str, u64);

fn block_part(block: &DecodedBlock, (path, iteration): At<'_>) -> Part {
    let id = |tool_id: &str| provider_call_id(tool_id, path, iteration).to_owned();
    match block {
        DecodedBlock::Known(b) => match &b.body {
            BlockBody::Text { text } | BlockBody::Stream { text } => {
                Part::Message(text_part("text", text))
            }
            BlockBody::Thinking { thinking } => Part::Message(text_part("reasoning", thinking)),
            BlockBody::Command { command } => Part::Message(text_part("command", command)),
            BlockBody::ToolUse {
                tool_name,
                tool_id,
                tool_input,
            } => Part::Message(json!({
                "type": "tool_call",
                "id": id(tool_id),
                "name": tool_name,
                "arguments": raw_value(tool_input),
            })),
            BlockBody::ToolResult {
                tool_id,
                tool_content,
            } => Part::ToolResponse(json!({
                "type": "tool_call_response",
                "id": id(tool_id),
                "response": raw_value(tool_content),
            })),
        },
        DecodedBlock::Unknown(u) => {
            let mut part = Map::new();
            part.insert("type".into(), Value::String(u.block_type.clone()));
            part.insert("content".into(), raw_value(&u.raw));
            Part::Message(Value::Object(part))
        }
    }
}

enum Part {
    Message(Value),
    /// Tool responses travel in a message of role `tool`.
    ToolResponse(Value),
}

fn message(role: &str, parts: Vec<Value>) -> Value {
    json!({"role": role, "parts": parts})
}

impl Conversation {
    /// A `message.user`: the first text block is the prompt, further text
    /// blocks are the system prompt (decision 11: `[text(prompt),
    /// text(system_prompt)?]`).
    pub(crate) fn push_user(&mut self, msg: &DecodedMessage, at: At<'_>) {
        let mut parts = Vec::new();
        let mut tool_parts = Vec::new();
        let mut seen_text = false;
        for block in &msg.blocks {
            if let DecodedBlock::Known(b) = block
                && let BlockBody::Text { text } = &b.body
            {
                if seen_text {
                    self.system.push(text_part("text", text));
                    continue;
                }
                seen_text = true;
            }
            match block_part(block, at) {
                Part::Message(p) => parts.push(p),
                Part::ToolResponse(p) => tool_parts.push(p),
            }
        }
        if !parts.is_empty() {
            self.input.push(message(&msg.role, parts));
        }
        if !tool_parts.is_empty() {
            self.input.push(message("tool", tool_parts));
        }
    }

    /// A `message.assistant`: its parts in order; the `tool_result` blocks
    /// that answer its tool calls follow as a `tool` message.
    pub(crate) fn push_assistant(&mut self, msg: &DecodedMessage, at: At<'_>) {
        let mut parts = Vec::new();
        let mut tool_parts = Vec::new();
        for block in &msg.blocks {
            match block_part(block, at) {
                Part::Message(p) => parts.push(p),
                Part::ToolResponse(p) => tool_parts.push(p),
            }
        }
        if !parts.is_empty() {
            self.output.push(message(&msg.role, parts));
        }
        if !tool_parts.is_empty() {
            self.output.push(message("tool", tool_parts));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript_domain::{ContentBlock, Fidelity};

    fn msg(role: &str, blocks: Vec<ContentBlock>) -> DecodedMessage {
        DecodedMessage {
            role: role.into(),
            blocks: blocks.into_iter().map(DecodedBlock::Known).collect(),
            provider: None,
            model: None,
            usage: None,
            request_id: None,
        }
    }

    #[test]
    fn user_prompt_and_system_prompt_are_split() {
        let mut c = Conversation::default();
        let f = Fidelity::Router;
        c.push_user(
            &msg(
                "user",
                vec![
                    ContentBlock::text(f, "hi"),
                    ContentBlock::text(f, "be brief"),
                ],
            ),
            ("", 0),
        );
        assert_eq!(
            Value::Array(c.input),
            json!([{"role":"user","parts":[{"type":"text","content":"hi"}]}])
        );
        assert_eq!(
            Value::Array(c.system),
            json!([{"type":"text","content":"be brief"}])
        );
    }

    #[test]
    fn assistant_parts_map_to_schema_types() {
        let mut c = Conversation::default();
        let f = Fidelity::AgentEmitted;
        let input = RawJson::from_json(r#"{"q":1}"#.into()).unwrap();
        c.push_assistant(
            &msg(
                "assistant",
                vec![
                    ContentBlock::thinking(f, "hmm"),
                    ContentBlock::text(f, "ok"),
                    ContentBlock::tool_use(f, "grep", "t1", input),
                    ContentBlock::tool_result(f, "t1", RawJson::string("found")),
                    ContentBlock::command(f, "ls"),
                ],
            ),
            ("", 0),
        );
        let mut unknown = msg("assistant", vec![]);
        unknown
            .blocks
            .push(DecodedBlock::Unknown(transcript_domain::UnknownBlock {
                block_type: "image".into(),
                raw: RawJson::from_json(r#"{"type":"image"}"#.into()).unwrap(),
            }));
        c.push_assistant(&unknown, ("", 0));
        assert_eq!(
            Value::Array(c.output),
            json!([
                {"role":"assistant","parts":[
                    {"type":"reasoning","content":"hmm"},
                    {"type":"text","content":"ok"},
                    {"type":"tool_call","id":"t1","name":"grep","arguments":{"q":1}},
                    {"type":"command","content":"ls"}
                ]},
                {"role":"tool","parts":[
                    {"type":"tool_call_response","id":"t1","response":"found"}
                ]},
                {"role":"assistant","parts":[{"type":"image","content":{"type":"image"}}]}
            ])
        );
    }
}
