//! Requests a CLI makes beside its conversation that ask for a structured answer: a router
//! or classifier (Gemini CLI without a `model:` asks which model to use before the
//! conversation's turns). Such a request asks for its answer in a JSON schema and offers no
//! tools, which an agent's turn never does; it is beside the conversation whatever it
//! carries, and gets the smallest answer its schema accepts, so the CLI goes on.
//!
//! Where a request names its schema: Gemini `generationConfig.responseJsonSchema` (or
//! `responseSchema`), OpenAI Responses `text.format.schema`, Chat Completions
//! `response_format.json_schema.schema`, Anthropic `output_format.schema`.
//!
//! The answer ([`answer`]): an object with its required properties (all of them when none is
//! required); a string enum picks the value the recording's model name contains (a router's
//! `"flash"` / `"pro"` choice follows the recording), else its first; other strings
//! `"replay"`; a number the schema's `maximum` (else 100) when the recording's model is a
//! `pro` one and its `minimum` (else 1) otherwise (Gemini CLI's numerical router sends a
//! score at or above its threshold to its pro model); booleans `false`; arrays empty.
//! Measured with Gemini CLI 0.61.0 (its `NumericalClassifierStrategy`).

use serde_json::{Map, Value, json};

use super::record::Provider;

/// The JSON schema a request of `provider` asks its answer in, when it offers no tools.
pub(crate) fn schema(provider: Provider, body: &Value) -> Option<&Value> {
    let offers_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    if offers_tools {
        return None;
    }
    let found = match provider {
        Provider::Gemini => {
            let config = &body["generationConfig"];
            [&config["responseJsonSchema"], &config["responseSchema"]]
                .into_iter()
                .find(|s| s.is_object())
        }
        Provider::OpenAiResponses => Some(&body["text"]["format"]["schema"]),
        Provider::OpenAiChat => Some(&body["response_format"]["json_schema"]["schema"]),
        Provider::Anthropic => Some(&body["output_format"]["schema"]),
    };
    found.filter(|s| s.is_object())
}

/// The smallest answer `schema` accepts, as JSON text, following `recorded_model` where the
/// schema offers a choice (see the module docs).
pub(crate) fn answer(schema: &Value, recorded_model: Option<&str>) -> String {
    instance(
        schema,
        &recorded_model.unwrap_or("").to_ascii_lowercase(),
        0,
    )
    .to_string()
}

/// How deep a schema is followed; deeper values are `null`.
const MAX_DEPTH: usize = 16;

fn instance(schema: &Value, model: &str, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(choices) = schema["enum"].as_array() {
        let named = choices
            .iter()
            .filter(|c| {
                c.as_str()
                    .is_some_and(|c| !c.is_empty() && model.contains(&c.to_ascii_lowercase()))
            })
            .max_by_key(|c| c.as_str().map_or(0, str::len));
        return named.or(choices.first()).cloned().unwrap_or(Value::Null);
    }
    let kind = schema["type"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    let pro = model.contains("pro");
    match kind.as_str() {
        "string" => json!("replay"),
        "integer" | "number" => {
            let bound = if pro {
                &schema["maximum"]
            } else {
                &schema["minimum"]
            };
            bound
                .as_f64()
                .map_or(json!(if pro { 100 } else { 1 }), |b| {
                    if kind == "integer" {
                        json!(b as i64)
                    } else {
                        json!(b)
                    }
                })
        }
        "boolean" => json!(false),
        "array" => json!([]),
        "null" => Value::Null,
        _ => {
            let properties = schema["properties"].as_object();
            let required: Vec<&str> = match schema["required"].as_array() {
                Some(r) => r.iter().filter_map(Value::as_str).collect(),
                None => properties.map_or(Vec::new(), |p| p.keys().map(String::as_str).collect()),
            };
            let mut out = Map::new();
            for name in required {
                let sub = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_owned(), instance(sub, model, depth + 1));
            }
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numerical() -> Value {
        json!({"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
            "type": "OBJECT", "required": ["complexity_reasoning", "complexity_score"],
            "properties": {"complexity_reasoning": {"type": "STRING"},
                           "complexity_score": {"type": "INTEGER"}}}}})
    }

    #[test]
    fn a_router_gets_an_answer_that_follows_the_recorded_model() {
        let body = numerical();
        let s = schema(Provider::Gemini, &body).expect("a schema");
        let low: Value = serde_json::from_str(&answer(s, Some("gemini-3.5-flash-lite"))).unwrap();
        assert_eq!(
            low,
            json!({"complexity_reasoning": "replay", "complexity_score": 1})
        );
        let high: Value = serde_json::from_str(&answer(s, Some("gemini-3.1-pro-preview"))).unwrap();
        assert_eq!(high["complexity_score"], 100);
        let choice = json!({"type": "object", "properties": {"reasoning": {"type": "string"},
            "model_choice": {"type": "string", "enum": ["flash", "pro"]}},
            "required": ["reasoning", "model_choice"]});
        let pro: Value = serde_json::from_str(&answer(&choice, Some("gemini-2.5-pro"))).unwrap();
        assert_eq!(pro["model_choice"], "pro");
        let first: Value = serde_json::from_str(&answer(&choice, None)).unwrap();
        assert_eq!(first["model_choice"], "flash");
    }

    #[test]
    fn only_a_toolless_request_asking_for_a_schema_is_a_structured_side_request() {
        let mut body = numerical();
        body["tools"] = json!([{"functionDeclarations": [{"name": "read_file"}]}]);
        assert!(schema(Provider::Gemini, &body).is_none());
        assert!(schema(Provider::Gemini, &json!({"contents": []})).is_none());
        let responses =
            json!({"text": {"format": {"type": "json_schema", "schema": {"type": "object"}}}});
        assert!(schema(Provider::OpenAiResponses, &responses).is_some());
        assert!(schema(Provider::Anthropic, &json!({"messages": []})).is_none());
    }

    #[test]
    fn deep_or_odd_schemas_end() {
        let mut deep = json!({"type": "string"});
        for _ in 0..100 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let text = answer(&deep, None);
        assert!(text.contains("null"), "{text}");
        assert_eq!(answer(&json!({"type": "array"}), None), "[]");
        assert_eq!(answer(&json!({"enum": []}), None), "null");
        assert_eq!(
            answer(&json!({"type": "number", "minimum": 0.5}), None),
            "0.5"
        );
    }
}
