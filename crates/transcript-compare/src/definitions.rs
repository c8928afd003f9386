//! Step definitions as part of a diff: what each side's workflow said a step is (its prompt,
//! model, tools, command, environment names, provider, …), given by the caller as one JSON
//! value per step, so that a changed definition is a change at that step even when what the
//! step recorded is otherwise equal (a replay under an edited workflow, a prompt changed
//! between two runs).
//!
//! The crate does not read workflows: the caller computes each side's [`StepDefinitions`]
//! (the CLI from the workflow text in `run.started`) and passes them to
//! [`crate::diff_with_definitions`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::changes::{Changes, change};
use crate::values::json_eq;

/// One run's step definitions: per step name, a canonical JSON value of the step's
/// definition in that run's workflow (an object whose top-level keys are the definition's
/// fields: `prompt`, `model`, `tools`, `command`, `env`, `provider`, …).
///
/// A step's name is the one [`crate::RunRecord::walk`] and `check` use: its dot-separated
/// path (`build`, `par.x`), prefixed by `<call path>/` for each child run it is in
/// (`sub/inner` is step `inner` of the run the step `sub` called). Loop iterations and
/// re-runs of a path share its definition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepDefinitions(pub BTreeMap<String, Value>);

impl StepDefinitions {
    /// Whether no step is defined (a run whose workflow is not known): such a side is not
    /// compared.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Both sides' definitions, when both are known.
#[derive(Clone, Copy)]
pub struct Definitions<'a> {
    /// Run A's.
    pub a: &'a StepDefinitions,
    /// Run B's.
    pub b: &'a StepDefinitions,
}

impl<'a> Definitions<'a> {
    /// The pair, or `None` when either side defines nothing (its workflow is unknown).
    pub fn known(a: &'a StepDefinitions, b: &'a StepDefinitions) -> Option<Self> {
        (!a.is_empty() && !b.is_empty()).then_some(Definitions { a, b })
    }
}

impl Changes {
    /// The changes of step `name`'s definition: one per changed top-level key
    /// (`definition.<key>`, a line diff for texts), or `definition` itself when a side does not
    /// define the step or a definition is not an object.
    pub fn definition(&mut self, name: &str, defs: Definitions<'_>) {
        match (defs.a.0.get(name), defs.b.0.get(name)) {
            (None, None) => {}
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                let null = Value::Null;
                for key in keys {
                    let (p, q) = (x.get(key).unwrap_or(&null), y.get(key).unwrap_or(&null));
                    self.definition_field(&format!("definition.{key}"), p, q);
                }
            }
            (x, y) => {
                let null = Value::Null;
                self.definition_field("definition", x.unwrap_or(&null), y.unwrap_or(&null));
            }
        }
    }

    fn definition_field(&mut self, field: &str, a: &Value, b: &Value) {
        match (a, b) {
            (Value::String(x), Value::String(y)) => self.text(field, Some(x), Some(y)),
            _ if json_eq(a, b) => {}
            _ => self.0.push(change(field, a.clone(), b.clone())),
        }
    }
}
