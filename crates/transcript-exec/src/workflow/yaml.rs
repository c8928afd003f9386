//! The YAML layer of a step: a tagged enum ([`StepDef`], tag `type`) with one
//! struct per kind, each `deny_unknown_fields`, so a field of another kind
//! (or a typo) is rejected by construction. Unknown `type`s are custom steps
//! and get their own strict struct (`with` only).
//!
//! Why not `#[serde(tag = "type")]` with an untagged custom fallback: serde
//! buffers the mapping, then reports "data did not match any variant" for
//! every mistake, losing the reason and the position. So the tag is
//! dispatched by hand: keys up to `type` are held back, then the kind's
//! derived `Deserialize` reads them and the rest of the mapping straight from
//! serde-saphyr, whose errors (an unknown field included) carry the line and
//! column of the offending key, nested steps too.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::ParallelMode;

/// Declares a kind's struct: the fields every step has, then its own.
macro_rules! step_struct {
    ($(#[$doc:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct $name {
            pub(super) name: String,
            #[serde(default)]
            pub(super) timeout_ms: Option<u64>,
            #[serde(default)]
            pub(super) continue_on_error: bool,
            #[serde(default)]
            pub(super) sandbox: Option<Value>,
            #[serde(default)]
            pub(super) network: Option<Value>,
            $($(#[$fm])* pub(super) $field: $ty,)*
        }
    };
}

step_struct!(
    /// `type: command`.
    CommandDef {
        command: Value,
        #[serde(default)]
        env: BTreeMap<String, String>,
        #[serde(default)]
        stdin: Option<String>,
    }
);
step_struct!(
    /// `type: operation`.
    OperationDef {
        tool: String,
        #[serde(default)]
        input: Option<Value>,
    }
);
step_struct!(
    /// `type: terminal`.
    TerminalDef {
        status: String,
        #[serde(default)]
        message: Option<String>,
    }
);
step_struct!(
    /// `type: parallel`.
    ParallelDef {
        #[serde(default)]
        mode: ParallelMode,
        branches: Vec<StepDef>,
    }
);
step_struct!(
    /// `type: for_each`.
    ForEachDef { items: Value, steps: Vec<StepDef> }
);
step_struct!(
    /// `type: while`.
    WhileDef {
        condition: String,
        max_iterations: u64,
        steps: Vec<StepDef>,
    }
);
step_struct!(
    /// `type: call_workflow`.
    CallDef {
        workflow: String,
        #[serde(default)]
        inputs: BTreeMap<String, Value>,
    }
);
step_struct!(
    /// `type: agent`.
    AgentDef {
        provider: String,
        #[serde(default)]
        command: Option<Value>,
        prompt: String,
        #[serde(default)]
        system_prompt: Option<String>,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        max_turns: Option<u32>,
        #[serde(default)]
        tools: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        #[serde(default)]
        mcp_servers: Vec<super::mcp_servers::McpServerDef>,
    }
);
step_struct!(
    /// Any other `type`: a custom step, parameters under `with`.
    CustomDef {
        #[serde(default)]
        with: Option<Value>,
    }
);

/// One step as written, by kind.
#[derive(Debug)]
pub(super) enum StepDef {
    Command(CommandDef),
    Operation(OperationDef),
    Terminal(TerminalDef),
    Parallel(ParallelDef),
    ForEach(ForEachDef),
    While(WhileDef),
    CallWorkflow(CallDef),
    Agent(AgentDef),
    /// The `type` as written and its fields.
    Custom(String, CustomDef),
}

impl<'de> Deserialize<'de> for StepDef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(StepVisitor)
    }
}

struct StepVisitor;

impl<'de> Visitor<'de> for StepVisitor {
    type Value = StepDef;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a step (a mapping with `name` and `type`)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StepDef, A::Error> {
        // Keys before `type` are held back; the common ones are read with
        // their Rust type so `name: y` stays the string "y".
        let mut before = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match key.as_str() {
                "type" => {
                    let kind: String = map.next_value()?;
                    let rest = Chained {
                        before: before.into_iter(),
                        pending: None,
                        rest: map,
                    };
                    return StepDef::read(kind, MapAccessDeserializer::new(rest));
                }
                "name" => Value::String(map.next_value()?),
                "timeout_ms" => Value::from(map.next_value::<u64>()?),
                "continue_on_error" => Value::Bool(map.next_value()?),
                _ => map.next_value()?,
            };
            before.push((key, value));
        }
        Err(de::Error::missing_field("type"))
    }
}

impl StepDef {
    /// The rest of the mapping, read by the kind's derived `Deserialize`.
    fn read<'de, D: Deserializer<'de>>(kind: String, rest: D) -> Result<Self, D::Error> {
        Ok(match kind.as_str() {
            "command" => Self::Command(CommandDef::deserialize(rest)?),
            "operation" => Self::Operation(OperationDef::deserialize(rest)?),
            "terminal" => Self::Terminal(TerminalDef::deserialize(rest)?),
            "parallel" => Self::Parallel(ParallelDef::deserialize(rest)?),
            "for_each" => Self::ForEach(ForEachDef::deserialize(rest)?),
            "while" => Self::While(WhileDef::deserialize(rest)?),
            "call_workflow" => Self::CallWorkflow(CallDef::deserialize(rest)?),
            "agent" => Self::Agent(AgentDef::deserialize(rest)?),
            _ => {
                let def = CustomDef::deserialize(rest)?;
                Self::Custom(kind, def)
            }
        })
    }
}

/// The held-back entries, then the rest of the step's mapping straight from
/// the YAML deserializer (so its errors keep their line and column).
struct Chained<A> {
    before: std::vec::IntoIter<(String, Value)>,
    pending: Option<Value>,
    rest: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Chained<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        if let Some((key, value)) = self.before.next() {
            self.pending = Some(value);
            return seed.deserialize(StringDeserializer::new(key)).map(Some);
        }
        self.rest.next_key_seed(seed)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.pending.take() {
            Some(value) => seed.deserialize(value).map_err(de::Error::custom),
            None => self.rest.next_value_seed(seed),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::workflow::BUILTIN_KINDS;

    #[test]
    fn every_builtin_kind_has_its_own_struct_and_other_kinds_are_custom() {
        for kind in BUILTIN_KINDS {
            // `with` belongs to custom steps only: a built-in kind refuses it.
            let text = format!("name: a\ntype: {kind}\nwith: 1\n");
            let e = serde_saphyr::from_str::<StepDef>(&text).unwrap_err();
            assert!(
                e.to_string().contains("unknown field `with`"),
                "{kind}: {e}"
            );
        }
        let def: StepDef = serde_saphyr::from_str("name: a\ntype: stamp\nwith: 1\n").unwrap();
        assert!(matches!(def, StepDef::Custom(kind, _) if kind == "stamp"));
    }
}
