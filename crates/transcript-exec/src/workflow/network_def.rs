//! A step's `network:` as written (#57), and the workflow's `defaults: { network: … }`:
//! `all` (the host's network), `none` or `[]` (nothing), or a list of literal `host:port`
//! destinations. Never a template: what a step may reach is the author's, never its data's.

use serde_json::Value;

use super::Step;
use crate::sandbox::net::{Destination, StepNetwork};

/// Reads `network:` (absent: `None`, inherited).
pub(super) fn parse(value: Option<Value>) -> Result<Option<StepNetwork>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value {
        Value::String(s) if s == "all" => Ok(Some(StepNetwork::All)),
        Value::String(s) if s == "none" => Ok(Some(StepNetwork::Allow(Vec::new()))),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(s) if s.contains("{{") || s.contains("{%") => Err(format!(
                    "network: '{s}' is a template: destinations are literal host:port (what a \
                     step may reach is never chosen by data)"
                )),
                Value::String(s) => s
                    .parse::<Destination>()
                    .map_err(|e| format!("network: {e}")),
                other => Err(format!(
                    "network: expected a \"host:port\" string, not {other}"
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|list| Some(StepNetwork::Allow(list))),
        other => Err(format!(
            "network: expected `all`, `none` or a list of \"host:port\", not {other}"
        )),
    }
}

/// Gives every step without its own `network:` the enclosing step's, and the top-level ones
/// `default` (the workflow's `defaults:`).
pub(super) fn inherit(steps: &mut [Step], default: Option<&StepNetwork>) {
    for step in steps {
        if step.network.is_none() {
            step.network = default.cloned();
        }
        let own = step.network.clone();
        inherit(step.kind.children_mut(), own.as_ref());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_forms_and_their_refusals() {
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some(json!("all"))).unwrap(), Some(StepNetwork::All));
        assert_eq!(
            parse(Some(json!("none"))).unwrap(),
            Some(StepNetwork::Allow(vec![]))
        );
        assert_eq!(
            parse(Some(json!(["api.github.com:443", "127.0.0.1:8080"]))).unwrap(),
            Some(StepNetwork::Allow(vec![
                "api.github.com:443".parse().unwrap(),
                "127.0.0.1:8080".parse().unwrap()
            ]))
        );
        for bad in [
            json!("everything"),
            json!(["{{ inputs.host }}:443"]),
            json!(["api.github.com"]),
            json!([443]),
            json!({"allow": []}),
            json!(true),
        ] {
            assert!(parse(Some(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_reach_every_step_without_its_own_and_nested_steps_inherit() {
        let yaml = r#"
name: w
defaults:
  network: ["api.github.com:443"]
steps:
  - name: plain
    type: command
    command: ["true"]
  - name: own
    type: command
    command: ["true"]
    network: none
  - name: loop
    type: for_each
    items: [1]
    network: all
    steps:
      - name: inner
        type: command
        command: ["true"]
"#;
        let wf = crate::workflow::Workflow::from_yaml(yaml, "w.yaml").unwrap();
        let gh = StepNetwork::Allow(vec!["api.github.com:443".parse().unwrap()]);
        assert_eq!(wf.steps[0].network, Some(gh));
        assert_eq!(wf.steps[1].network, Some(StepNetwork::Allow(vec![])));
        assert_eq!(wf.steps[2].network, Some(StepNetwork::All));
        assert_eq!(
            wf.steps[2].kind.children()[0].network,
            Some(StepNetwork::All)
        );
        let bad = "name: w\nsteps:\n  - name: s\n    type: command\n    command: [\"true\"]\n    network: [\"{{ inputs.h }}:1\"]\n";
        let e = crate::workflow::Workflow::from_yaml(bad, "w.yaml").unwrap_err();
        assert!(e.to_string().contains("template"), "{e}");
        let bad = "name: w\ndefaults:\n  network: everything\nsteps: []\n";
        assert!(crate::workflow::Workflow::from_yaml(bad, "w.yaml").is_err());
    }
}
