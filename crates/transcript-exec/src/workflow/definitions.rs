//! What each step of a workflow text says, keyed by its path (#58): the values a diff compares
//! so that a changed prompt, model, tool list, command or `env:` name is a difference at its
//! step even when the recorded events would not show it.
//!
//! The text is the one `run.started` records (wire decision 20), read as YAML into JSON values
//! without validating it (an older or newer runner's workflow is still compared). A step's
//! definition is its mapping without `name` and without its nested steps (`steps:`,
//! `branches:`, each a definition of its own under `<path>.<name>`, the paths the engine
//! records, wire decision 4); an `env:` mapping is reduced to its sorted names (its values are
//! templates or literals that can be secrets, and a value's change shows in what the step did);
//! and `network` is the effective one (the step's own, else its enclosing step's, else the
//! workflow's `defaults:`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::WorkflowError;

/// The keys under which a step nests other steps.
const NESTED: [&str; 2] = ["steps", "branches"];

/// Each step's definition in the workflow text a run's `run.started` keeps (wire decision 20),
/// by path; empty when it keeps none (an older run, a text past the bound, a workflow built in
/// Rust).
pub fn recorded_step_definitions(
    events: &[transcript_domain::DecodedEvent],
) -> Result<BTreeMap<String, Value>, WorkflowError> {
    let source = events
        .iter()
        .find_map(|e| e.step().and_then(|s| s.workflow.as_ref()));
    match source {
        Some(transcript_domain::WorkflowSource {
            path,
            text: Some(text),
            ..
        }) => step_definitions(text, path),
        _ => Ok(BTreeMap::new()),
    }
}

/// Each step's definition in the workflow `text` (shown as `file` in an error), by path.
pub fn step_definitions(text: &str, file: &str) -> Result<BTreeMap<String, Value>, WorkflowError> {
    let doc: Value = serde_saphyr::from_str(text)
        .map_err(|e| WorkflowError::new(file, None, format!("cannot read as YAML: {e}")))?;
    let mut out = BTreeMap::new();
    let network = doc.pointer("/defaults/network").cloned();
    if let Some(steps) = doc.get("steps").and_then(Value::as_array) {
        collect(steps, "", network.as_ref(), &mut out);
    }
    Ok(out)
}

fn collect(
    steps: &[Value],
    prefix: &str,
    network: Option<&Value>,
    out: &mut BTreeMap<String, Value>,
) {
    for step in steps {
        let Some(map) = step.as_object() else {
            continue;
        };
        let Some(name) = map.get("name").and_then(Value::as_str) else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}.{name}")
        };
        let own_network = map.get("network").or(network);
        let mut def = Map::new();
        for (key, value) in map {
            if key == "name" || NESTED.contains(&key.as_str()) {
                continue;
            }
            def.insert(key.clone(), definition_value(key, value));
        }
        if let Some(n) = own_network {
            def.insert("network".to_owned(), n.clone());
        }
        for key in NESTED {
            if let Some(nested) = map.get(key).and_then(Value::as_array) {
                collect(nested, &path, own_network, out);
            }
        }
        out.insert(path, Value::Object(def));
    }
}

/// A value as a definition keeps it: `env:` mappings (at any depth, an MCP server's too) by
/// their names only.
fn definition_value(key: &str, value: &Value) -> Value {
    match value {
        Value::Object(m) if key == "env" => {
            let mut names: Vec<Value> = m.keys().map(|k| Value::String(k.clone())).collect();
            names.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            Value::Array(names)
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), definition_value(k, v)))
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| definition_value("", v)).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::step_definitions;

    const TEXT: &str = r#"
name: w
defaults: { network: ["api.example.com:443"] }
steps:
  - name: ask
    type: agent
    provider: claude
    model: claude-sonnet-4-5
    prompt: "Read {{ inputs.file }}"
    tools: [Read]
    env: { TOKEN: "s3cret", A: "1" }
  - name: fan
    type: parallel
    network: all
    branches:
      - name: one
        type: command
        command: "echo 1"
  - name: each
    type: for_each
    items: [1, 2]
    steps:
      - name: cell
        type: command
        command: ["echo", "{{ loop.item }}"]
"#;

    #[test]
    fn every_step_by_its_engine_path_env_by_names_network_inherited() {
        let defs = step_definitions(TEXT, "w.yaml").unwrap();
        assert_eq!(
            defs.keys().collect::<Vec<_>>(),
            ["ask", "each", "each.cell", "fan", "fan.one"]
        );
        assert_eq!(
            defs["ask"],
            json!({"type": "agent", "provider": "claude", "model": "claude-sonnet-4-5",
                "prompt": "Read {{ inputs.file }}", "tools": ["Read"], "env": ["A", "TOKEN"],
                "network": ["api.example.com:443"]})
        );
        assert!(!defs["ask"].to_string().contains("s3cret"));
        assert_eq!(defs["fan.one"]["network"], json!("all"));
        assert_eq!(defs["each.cell"]["network"], json!(["api.example.com:443"]));
        assert!(defs["fan"].get("branches").is_none());
    }

    #[test]
    fn a_changed_model_changes_only_its_step() {
        let a = step_definitions(TEXT, "w.yaml").unwrap();
        let b = step_definitions(&TEXT.replace("sonnet-4-5", "opus-4-1"), "w.yaml").unwrap();
        let changed: Vec<_> = a.keys().filter(|k| a[*k] != b[*k]).collect();
        assert_eq!(changed, ["ask"]);
    }

    #[test]
    fn a_runs_definitions_come_from_the_text_its_run_started_keeps() {
        let line = |workflow: serde_json::Value| {
            let l = json!({"seq": 1, "run_id": "00000000-0000-4000-8000-000000000001",
                "type": "run.started", "timestamp": "2026-01-01T00:00:00.000Z",
                "payload": {"name": "w", "kind": "workflow", "workflow": workflow}});
            vec![
                transcript_domain::decode_line(l.to_string().as_bytes())
                    .unwrap()
                    .event,
            ]
        };
        let kept = line(json!({"path": "w.yaml", "sha256": "00", "text": TEXT}));
        let defs = super::recorded_step_definitions(&kept).unwrap();
        assert_eq!(defs, step_definitions(TEXT, "w.yaml").unwrap());
        let stub = line(json!({"path": "w.yaml", "sha256": "00", "text_omitted_bytes": 300000}));
        assert!(super::recorded_step_definitions(&stub).unwrap().is_empty());
        assert!(super::recorded_step_definitions(&[]).unwrap().is_empty());
    }

    #[test]
    fn text_that_is_not_yaml_or_has_no_steps() {
        let e = step_definitions("steps: [unclosed", "bad.yaml").unwrap_err();
        assert_eq!(e.file, "bad.yaml");
        assert!(step_definitions("name: x\n", "w.yaml").unwrap().is_empty());
        assert!(
            step_definitions("steps: [1, {type: command}, {name: ok}]", "w.yaml")
                .unwrap()
                .contains_key("ok")
        );
    }
}
