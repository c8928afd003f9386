//! JSON Schema of the wire form (feature `schema`), generated from the Rust
//! types with schemars. Types whose serializer is hand-written get a
//! hand-written schema here, so the schema describes the real wire bytes.
//!
//! The schema is strict: it describes what our writer emits (closed
//! vocabularies, no extra fields). Readers are more tolerant than the schema.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

use crate::block::ContentBlock;
use crate::event::ExchangeEvent;
use crate::ids::RunId;
use crate::payload::{MessagePayload, StepPayload, ToolPayload};
use crate::raw::RawJson;
use crate::timestamp::Timestamp;
use crate::vocab::{BlockType, EventType, Fidelity, PayloadKind, Role};

/// The JSON Schema (draft 2020-12) of one transcript line.
pub fn exchange_event_schema() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<ExchangeEvent>();
    schema.to_value()
}

impl JsonSchema for RunId {
    fn schema_name() -> Cow<'static, str> {
        "RunId".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A run id: 36-character hyphenated UUID, lowercase (decision 9).",
            "type": "string",
            "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
        })
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        "Timestamp".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "UTC timestamp with exactly three fractional digits and Z (decision 3).",
            "type": "string",
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$"
        })
    }
}

impl JsonSchema for RawJson {
    fn schema_name() -> Cow<'static, str> {
        "AnyValue".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "description": "Any JSON value, kept verbatim." })
    }
}

fn enum_schema(description: &str, values: &[&str]) -> Schema {
    json_schema!({ "description": description, "type": "string", "enum": values })
}

impl JsonSchema for EventType {
    fn schema_name() -> Cow<'static, str> {
        "EventType".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let values: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
        enum_schema("The closed event-type vocabulary.", &values)
    }
}

impl JsonSchema for BlockType {
    fn schema_name() -> Cow<'static, str> {
        "BlockType".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let values: Vec<&str> = BlockType::ALL.iter().map(|t| t.as_str()).collect();
        enum_schema("The closed block-type vocabulary.", &values)
    }
}

impl JsonSchema for Fidelity {
    fn schema_name() -> Cow<'static, str> {
        "Fidelity".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        enum_schema(
            "Who produced a block or tool event.",
            &["router", "agent_emitted"],
        )
    }
}

impl JsonSchema for Role {
    fn schema_name() -> Cow<'static, str> {
        "Role".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        enum_schema("Message role.", &["user", "assistant"])
    }
}

impl JsonSchema for ContentBlock {
    fn schema_name() -> Cow<'static, str> {
        "ContentBlock".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let fidelity = generator.subschema_for::<Fidelity>().to_value();
        let any = generator.subschema_for::<RawJson>().to_value();
        let string = serde_json::json!({ "type": "string" });
        let variant = |block: BlockType, fields: &[(&str, &Value)]| {
            let mut properties = serde_json::Map::new();
            properties.insert(
                "type".into(),
                serde_json::json!({ "const": block.as_str() }),
            );
            properties.insert("fidelity".into(), fidelity.clone());
            let mut required = vec!["type".to_owned(), "fidelity".to_owned()];
            for (name, schema) in fields {
                properties.insert((*name).into(), (*schema).clone());
                required.push((*name).to_owned());
            }
            serde_json::json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false
            })
        };
        let variants = vec![
            variant(BlockType::Text, &[("text", &string)]),
            variant(BlockType::Thinking, &[("thinking", &string)]),
            variant(
                BlockType::ToolUse,
                &[
                    ("tool_name", &string),
                    ("tool_id", &string),
                    ("tool_input", &any),
                ],
            ),
            variant(
                BlockType::ToolResult,
                &[("tool_id", &string), ("tool_content", &any)],
            ),
            variant(BlockType::Command, &[("command", &string)]),
            variant(BlockType::Stream, &[("text", &string)]),
        ];
        json_schema!({
            "description": "A typed content block: type, fidelity and the active fields of its type.",
            "oneOf": variants
        })
    }
}

impl JsonSchema for ExchangeEvent {
    fn schema_name() -> Cow<'static, str> {
        "ExchangeEvent".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let run_id = generator.subschema_for::<RunId>().to_value();
        let step = generator.subschema_for::<StepPayload>().to_value();
        let message = generator.subschema_for::<MessagePayload>().to_value();
        let tool = generator.subschema_for::<ToolPayload>().to_value();
        let dispatch: Vec<Value> = EventType::ALL
            .iter()
            .map(|t| {
                let payload = match t.payload_kind() {
                    PayloadKind::StepOrNull | PayloadKind::Step => step.clone(),
                    PayloadKind::Message => message.clone(),
                    PayloadKind::Tool => tool.clone(),
                };
                serde_json::json!({
                    "if": { "properties": { "type": { "const": t.as_str() } } },
                    "then": { "properties": { "payload": payload } }
                })
            })
            .collect();
        json_schema!({
            "title": "ExchangeEvent",
            "description": "One line of a canonical agent exchange transcript, as our writer emits it.",
            "type": "object",
            "properties": {
                "seq": { "type": "integer", "minimum": 1 },
                "run_id": run_id,
                "parent_run_id": run_id,
                "child_run_id": run_id,
                "type": generator.subschema_for::<EventType>().to_value(),
                "path": { "type": "string" },
                "iteration": { "type": "integer", "minimum": 0 },
                "timestamp": generator.subschema_for::<Timestamp>().to_value(),
                "payload": {}
            },
            "required": ["seq", "run_id", "type", "path", "iteration", "timestamp", "payload"],
            "additionalProperties": false,
            "allOf": dispatch
        })
    }
}
