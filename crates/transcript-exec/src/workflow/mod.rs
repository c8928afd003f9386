//! The workflow model: steps and their kinds, YAML loading (serde-saphyr)
//! and validation before a run.
//!
//! A [`WorkflowSet`] is a root workflow plus every workflow its
//! `call_workflow` steps reach, keyed by name (Rust-built sets) or by
//! canonical file path (YAML). Validation rejects unknown kinds, missing
//! references, bad templates, duplicate names and `call_workflow` cycles,
//! naming the file, the step path and the reason.
//!
//! # YAML format
//!
//! ```yaml
//! name: build                      # run.* payload name
//! inputs:                          # {{inputs.NAME}}; no default = required
//!   - name: target                 # type: string | integer | number | boolean | enum |
//!     type: enum                   # path | url (none, or a string without `pattern`, is
//!     values: [release, dev]       # free text: never an argv element, see below)
//!     default: release
//!   - name: token
//!     secret: true                 # masked ("***") in every record, export and message
//! outputs:                         # rendered into run.completed.result
//!   binary: "{{steps.compile.output}}"
//! steps:                           # every step: name, type, timeout_ms?, continue_on_error?
//!   - name: compile
//!     type: command                # a string is shell source run by /bin/sh -c: it takes
//!     command: 'cargo build --profile "$TARGET"'  # no {{value}}; values come through env:
//!     env: { TARGET: "{{inputs.target}}" }        # (a {{x}} in the string is refused at load)
//!   - name: show
//!     type: command                # a list runs without a shell, one argument per element;
//!     command: ["tee", "--", "{{ inputs.target | path }}"]  # only typed values stand there
//!     stdin: "{{steps.compile.output}}"  # free text goes to stdin:, env: or `| file`
//!   - name: read
//!     type: operation              # tool + input (string leaves templated)
//!     tool: read_file
//!     input: { path: Cargo.toml }
//!   - name: checks
//!     type: parallel               # mode: all_succeed (default) | first_success
//!     branches: [ { name: lint, type: command, command: "cargo clippy" } ]
//!   - name: each
//!     type: for_each               # items: a list, or a template giving a JSON array or lines
//!     items: [a, b]
//!     steps: [ { name: show, type: command, command: ["echo", "{{loop.index}}", "{{loop.item}}"] } ]
//!                                  # (items of a literal list are the author's: typed)
//!   - name: poll
//!     type: while                  # condition: "A == B", "A != B" or a truth value; the
//!                                  # operator is read from this text, values are data
//!     condition: "{{steps.probe.output}} != ready"
//!     max_iterations: 5
//!     steps: [ { name: probe, type: command, command: "cat status" } ]
//!   - name: sub
//!     type: call_workflow          # a file relative to this one, with inputs
//!     workflow: child.yaml
//!     inputs: { text: "{{steps.read.output}}" }
//!   - name: review
//!     type: agent                  # provider, prompt, system_prompt?, command? (argv),
//!     provider: claude             # model?, max_turns?, tools? (the router tools the agent may call),
//!     prompt: "Review {{steps.read.output}}; keep {% raw %}{{ .Values }}{% endraw %} as is"
//!     tools: [read_file]           # env? (extra process environment, values templated);
//!     env: { ANTHROPIC_BASE_URL: "http://127.0.0.1:8080", ANTHROPIC_API_KEY: "{{inputs.token}}" }
//!                                  # (literals and secret inputs only); no command: the provider's
//!                                  # preset runs the real CLI (crate::preset)
//!   - name: stamp
//!     type: my_custom_type         # any registered custom type; parameters under `with`
//!     with: { label: x }
//!   - name: done
//!     type: terminal               # status: succeeded | failed (success | failure: older spelling)
//!     status: succeeded
//!     message: "built {{steps.compile.output}}"
//! ```
//!
//! Each kind takes exactly its own fields: a field of another kind (`steps`
//! on a `command`) or a typo is an error naming the field, its line and its
//! column, not a no-op. Keys other than `name`, `timeout_ms` and
//! `continue_on_error` written before `type` are read untyped (and reported
//! at `type`): write `type` right after `name`.
//! Plain YAML scalars follow YAML 1.1-style typing in places (`y`, `no`):
//! quote strings that could read as booleans.

pub(crate) mod argv_rule;
mod definitions;
mod env_rule;
mod inline_script;
mod input;
mod mcp_servers;
mod model;
mod network_def;
mod options;
mod parse;
mod sandbox_def;
mod set;
mod validate;
mod yaml;

pub use definitions::{recorded_step_definitions, step_definitions};
pub use mcp_servers::{McpServerSpec, McpTransport, check_servers, server_name_problem};
pub use model::{
    AgentSpec, BUILTIN_KINDS, CommandLine, InputDef, InputType, Items, ParallelMode, PluginSpec,
    Step, StepKind, Workflow,
};
pub use set::WorkflowSet;

/// A workflow rejected before its run: which file, which step, why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {}{reason}", step.as_ref().map(|s| format!("step '{s}': ")).unwrap_or_default())]
pub struct WorkflowError {
    /// The workflow file (or the workflow's key for Rust-built workflows).
    pub file: String,
    /// The dotted step path, when the problem is in a step.
    pub step: Option<String>,
    /// What is wrong.
    pub reason: String,
}

impl WorkflowError {
    fn new(file: &str, step: Option<&str>, reason: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            step: step.map(str::to_owned),
            reason: reason.into(),
        }
    }
}

/// `prefix.name` (or `name` at the top level), decision 4.
pub fn join_path(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        let mut p = String::with_capacity(prefix.len() + 1 + name.len());
        p.push_str(prefix);
        p.push('.');
        p.push_str(name);
        p
    }
}

/// `KEY=VALUE` inputs given on a command line, as a run's inputs: a value that parses as
/// JSON is that JSON, any other is a string.
pub fn given_inputs(inputs: &[(String, String)]) -> serde_json::Map<String, serde_json::Value> {
    inputs
        .iter()
        .map(|(k, v)| {
            let value =
                serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.clone()));
            (k.clone(), value)
        })
        .collect()
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
