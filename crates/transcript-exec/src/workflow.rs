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
//!   - name: target
//!     default: release
//! outputs:                         # rendered into run.completed.result
//!   binary: "{{steps.compile.output}}"
//! steps:                           # every step: name, type, timeout_ms?, continue_on_error?
//!   - name: compile
//!     type: command                # a string runs with sh -c; every {{value}} is
//!     command: "cargo build --{{inputs.target}}"   # shell-quoted ({{x | raw}} opts out)
//!   - name: show
//!     type: command                # a list runs without a shell, one argument per element
//!     command: ["printf", "%s\n", "{{steps.compile.output}}"]
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
//!     steps: [ { name: show, type: command, command: "echo {{loop.index}} {{loop.item}}" } ]
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
//!     env: { ANTHROPIC_BASE_URL: "http://127.0.0.1:8080" }  # no command: the provider's
//!                                  # preset runs the real CLI (crate::preset)
//!   - name: stamp
//!     type: my_custom_type         # any registered custom type; parameters under `with`
//!     with: { label: x }
//!   - name: done
//!     type: terminal               # status: success | failure
//!     status: success
//!     message: "built {{steps.compile.output}}"
//! ```
//!
//! Fields of another kind are rejected (a typo is an error, not a no-op).
//! Plain YAML scalars follow YAML 1.1-style typing in places (`y`, `no`):
//! quote strings that could read as booleans.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::template::{Condition, Reference, Template, templates_in};

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

/// A declared workflow input.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputDef {
    /// The input's name (`{{inputs.NAME}}`).
    pub name: String,
    /// The value used when the caller gives none; without a default the
    /// input is required.
    #[serde(default)]
    pub default: Option<Value>,
}

/// A workflow: named steps run in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// The workflow name (`run.*` payload name, decision 2).
    pub name: String,
    /// Declared inputs.
    pub inputs: Vec<InputDef>,
    /// Output templates, rendered at the end of a successful run into
    /// `run.completed.result`.
    pub outputs: BTreeMap<String, String>,
    /// The top-level steps.
    pub steps: Vec<Step>,
    /// External tool plugins the workflow needs (argv each), started by the
    /// runner with the workflow's directory as working directory.
    pub plugins: Vec<Vec<String>>,
    /// The directory of the workflow's file (`{{workflow.dir}}`); `None` for
    /// workflows built in Rust.
    pub dir: Option<PathBuf>,
}

/// An external plugin a workflow declares: its argv and the directory it
/// starts in (the declaring workflow's).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PluginSpec {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
}

impl Workflow {
    /// An empty workflow named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            inputs: Vec::new(),
            outputs: BTreeMap::new(),
            steps: Vec::new(),
            plugins: Vec::new(),
            dir: None,
        }
    }

    /// Adds a step.
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// Declares an input (with an optional default).
    pub fn input(mut self, name: impl Into<String>, default: Option<Value>) -> Self {
        self.inputs.push(InputDef {
            name: name.into(),
            default,
        });
        self
    }

    /// Declares an output template.
    pub fn output(mut self, name: impl Into<String>, template: impl Into<String>) -> Self {
        self.outputs.insert(name.into(), template.into());
        self
    }

    /// Parses YAML text; `file` names the source in errors. `call_workflow`
    /// targets are kept as written (see [`WorkflowSet::load`] for files).
    pub fn from_yaml(text: &str, file: &str) -> Result<Self, WorkflowError> {
        let def: WorkflowDef = serde_saphyr::from_str(text)
            .map_err(|e| WorkflowError::new(file, None, format!("invalid YAML: {e}")))?;
        def.into_workflow(file)
    }
}

/// One step: a name unique among its siblings, a kind, and common options.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The step name (last segment of its path, decision 4).
    pub name: String,
    /// What the step does.
    pub kind: StepKind,
    /// Fails the step (closing everything it opened) when it runs longer.
    pub timeout: Option<Duration>,
    /// When true, a failure is recorded but the enclosing sequence goes on.
    pub continue_on_error: bool,
}

impl Step {
    /// A step with default options.
    pub fn new(name: impl Into<String>, kind: StepKind) -> Self {
        Self {
            name: name.into(),
            kind,
            timeout: None,
            continue_on_error: false,
        }
    }

    /// A `command` step run by `sh -c` (interpolated values are quoted).
    pub fn command(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self::new(
            name,
            StepKind::Command {
                command: CommandLine::Shell(command.into()),
            },
        )
    }

    /// A `command` step run without a shell: program and arguments, each
    /// element rendered as exactly one argument.
    pub fn command_argv<S: Into<String>>(
        name: impl Into<String>,
        argv: impl IntoIterator<Item = S>,
    ) -> Self {
        Self::new(
            name,
            StepKind::Command {
                command: CommandLine::Argv(argv.into_iter().map(Into::into).collect()),
            },
        )
    }

    /// An `operation` step calling `tool` through the router.
    pub fn operation(name: impl Into<String>, tool: impl Into<String>, input: Value) -> Self {
        Self::new(
            name,
            StepKind::Operation {
                tool: tool.into(),
                input,
            },
        )
    }

    /// A `terminal` step.
    pub fn terminal(name: impl Into<String>, success: bool, message: impl Into<String>) -> Self {
        Self::new(
            name,
            StepKind::Terminal {
                success,
                message: message.into(),
            },
        )
    }

    /// A `parallel` step.
    pub fn parallel(name: impl Into<String>, mode: ParallelMode, branches: Vec<Step>) -> Self {
        Self::new(name, StepKind::Parallel { mode, branches })
    }

    /// A `for_each` step over `items`.
    pub fn for_each(name: impl Into<String>, items: Items, steps: Vec<Step>) -> Self {
        Self::new(name, StepKind::ForEach { items, steps })
    }

    /// A `while` step.
    pub fn while_loop(
        name: impl Into<String>,
        condition: impl Into<String>,
        max_iterations: u64,
        steps: Vec<Step>,
    ) -> Self {
        Self::new(
            name,
            StepKind::While {
                condition: condition.into(),
                max_iterations,
                steps,
            },
        )
    }

    /// A `call_workflow` step.
    pub fn call_workflow(
        name: impl Into<String>,
        workflow: impl Into<String>,
        inputs: BTreeMap<String, Value>,
    ) -> Self {
        Self::new(
            name,
            StepKind::CallWorkflow {
                workflow: workflow.into(),
                inputs,
            },
        )
    }

    /// A custom step of a type registered from Rust.
    pub fn custom(name: impl Into<String>, type_name: impl Into<String>, params: Value) -> Self {
        Self::new(
            name,
            StepKind::Custom {
                type_name: type_name.into(),
                params,
            },
        )
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Lets the enclosing sequence continue after this step fails.
    pub fn continue_on_error(mut self) -> Self {
        self.continue_on_error = true;
        self
    }
}

/// How a `parallel` block judges its branches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParallelMode {
    /// Every branch runs to its end; the block fails if any branch failed.
    #[default]
    AllSucceed,
    /// The block succeeds with the first branch that succeeds; the others
    /// are cancelled (or, in deterministic mode, not started).
    FirstSuccess,
}

/// What a `for_each` iterates over.
#[derive(Debug, Clone, PartialEq)]
pub enum Items {
    /// A literal list (string items are rendered as templates).
    List(Vec<Value>),
    /// A template rendering to a JSON array, or else to lines.
    Template(String),
}

/// An agent invocation (the agent seam).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentSpec {
    /// Provider registry name (`claude`, `codex`, `gemini`, `copilot`,
    /// `openai`…); selects the normalizer and the agent runner.
    pub provider: String,
    /// argv of a CLI agent (templated); empty for HTTP agents.
    pub command: Vec<String>,
    /// The user prompt (templated).
    pub prompt: String,
    /// The system prompt (templated); omitted from `message.user` when empty.
    pub system_prompt: Option<String>,
    /// The model to ask for, when the runner takes one.
    pub model: Option<String>,
    /// Upper bound of tool-loop turns for HTTP agents.
    pub max_turns: Option<u32>,
    /// Tools offered to an HTTP agent (router tool names); for a CLI
    /// preset, what the CLI may run without asking ([`crate::preset`]).
    pub tools: Vec<String>,
    /// Extra environment of a CLI agent's process (values templated), on
    /// top of the runner's: a preset's endpoint and credentials.
    pub env: BTreeMap<String, String>,
}

/// What a `command` step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLine {
    /// A string given to `sh -c`; every interpolated value is shell-quoted
    /// for where it lands unless marked `| raw` (see [`crate::shell`]).
    Shell(String),
    /// A program and its arguments run without a shell; each element is
    /// rendered as one argument (values are never split or interpreted).
    Argv(Vec<String>),
}

/// The step kinds (FR-004).
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// An AI agent (CLI subprocess or HTTP), see [`AgentSpec`].
    Agent(AgentSpec),
    /// A command run in the workspace, through `sh -c` or as an argv.
    Command {
        /// The command (templated).
        command: CommandLine,
    },
    /// A tool operation through the tools router.
    Operation {
        /// The router tool name.
        tool: String,
        /// Its input (string leaves templated).
        input: Value,
    },
    /// Ends the run with success or failure and a message.
    Terminal {
        /// Whether the run succeeds.
        success: bool,
        /// The message (templated); the run's error on failure.
        message: String,
    },
    /// Branches (each a step) run concurrently, or one at a time in
    /// deterministic mode.
    Parallel {
        /// How success is judged.
        mode: ParallelMode,
        /// The branches, in declaration order.
        branches: Vec<Step>,
    },
    /// A body run once per item.
    ForEach {
        /// The items.
        items: Items,
        /// The body.
        steps: Vec<Step>,
    },
    /// A body run while a condition holds, at most `max_iterations` times.
    While {
        /// The condition, evaluated before each iteration.
        condition: String,
        /// The iteration limit; reaching it with the condition still true
        /// fails the step.
        max_iterations: u64,
        /// The body.
        steps: Vec<Step>,
    },
    /// Another workflow of the set, run as a child run with its own id and file.
    CallWorkflow {
        /// The target's key in the [`WorkflowSet`].
        workflow: String,
        /// Inputs for the child (string leaves templated).
        inputs: BTreeMap<String, Value>,
    },
    /// A step type registered from Rust by name.
    Custom {
        /// The registered type name (the `kind` on the wire).
        type_name: String,
        /// Parameters (string leaves templated).
        params: Value,
    },
}

impl StepKind {
    /// The wire `kind` of the step.
    pub fn kind_name(&self) -> &str {
        match self {
            StepKind::Agent(_) => "agent",
            StepKind::Command { .. } => "command",
            StepKind::Operation { .. } => "operation",
            StepKind::Terminal { .. } => "terminal",
            StepKind::Parallel { .. } => "parallel",
            StepKind::ForEach { .. } => "for_each",
            StepKind::While { .. } => "while",
            StepKind::CallWorkflow { .. } => "call_workflow",
            StepKind::Custom { type_name, .. } => type_name,
        }
    }

    /// The nested steps of composite kinds (branches or loop body).
    pub fn children(&self) -> &[Step] {
        match self {
            StepKind::Parallel { branches, .. } => branches,
            StepKind::ForEach { steps, .. } | StepKind::While { steps, .. } => steps,
            _ => &[],
        }
    }
}

/// The kinds with built-in meaning; any other `type` is a custom step.
pub const BUILTIN_KINDS: &[&str] = &[
    "agent",
    "command",
    "operation",
    "terminal",
    "parallel",
    "for_each",
    "while",
    "call_workflow",
];

// ---------------------------------------------------------------- YAML form

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkflowDef {
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    inputs: Vec<InputDef>,
    #[serde(default)]
    outputs: BTreeMap<String, String>,
    #[serde(default)]
    plugins: Vec<Vec<String>>,
    steps: Vec<StepDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepDef {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    continue_on_error: bool,
    // command
    #[serde(default)]
    command: Option<Value>,
    // operation
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    // terminal
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    message: Option<String>,
    // parallel
    #[serde(default)]
    mode: Option<ParallelMode>,
    #[serde(default)]
    branches: Option<Vec<StepDef>>,
    // for_each / while
    #[serde(default)]
    items: Option<Value>,
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    max_iterations: Option<u64>,
    #[serde(default)]
    steps: Option<Vec<StepDef>>,
    // call_workflow
    #[serde(default)]
    workflow: Option<String>,
    #[serde(default)]
    inputs: Option<BTreeMap<String, Value>>,
    // agent
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    max_turns: Option<u32>,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    // custom
    #[serde(default)]
    with: Option<Value>,
}

impl WorkflowDef {
    fn into_workflow(self, file: &str) -> Result<Workflow, WorkflowError> {
        let steps = self
            .steps
            .into_iter()
            .map(|s| s.into_step(file, ""))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(empty) = self.plugins.iter().position(Vec::is_empty) {
            return Err(WorkflowError::new(
                file,
                None,
                format!("plugins[{empty}]: empty command"),
            ));
        }
        Ok(Workflow {
            name: self.name,
            inputs: self.inputs,
            outputs: self.outputs,
            steps,
            plugins: self.plugins,
            dir: None,
        })
    }
}

impl StepDef {
    fn into_step(self, file: &str, prefix: &str) -> Result<Step, WorkflowError> {
        let path = join_path(prefix, &self.name);
        let err = |reason: String| WorkflowError::new(file, Some(&path), reason);
        let need = |field: &str| err(format!("a '{}' step needs '{field}'", self.kind));
        let mut used: Vec<&str> = Vec::new();
        let kind = match self.kind.as_str() {
            "command" => {
                used.push("command");
                let command = match self.command.clone() {
                    Some(Value::String(s)) => CommandLine::Shell(s),
                    Some(Value::Array(a)) if !a.is_empty() => CommandLine::Argv(
                        a.into_iter()
                            .map(|v| match v {
                                Value::String(s) => Ok(s),
                                _ => Err(err("a 'command' list must hold strings (argv)".into())),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    Some(_) => {
                        return Err(err(
                            "'command' must be a string (run by sh -c) or a non-empty list of strings (argv, no shell)".into(),
                        ));
                    }
                    None => return Err(need("command")),
                };
                StepKind::Command { command }
            }
            "operation" => {
                used.extend(["tool", "input"]);
                StepKind::Operation {
                    tool: self.tool.clone().ok_or_else(|| need("tool"))?,
                    input: self
                        .input
                        .clone()
                        .unwrap_or(Value::Object(Default::default())),
                }
            }
            "terminal" => {
                used.extend(["status", "message"]);
                let success = match self.status.as_deref() {
                    Some("success") => true,
                    Some("failure") => false,
                    Some(other) => {
                        return Err(err(format!(
                            "terminal status must be 'success' or 'failure', not '{other}'"
                        )));
                    }
                    None => return Err(need("status")),
                };
                StepKind::Terminal {
                    success,
                    message: self.message.clone().unwrap_or_default(),
                }
            }
            "parallel" => {
                used.extend(["mode", "branches"]);
                let branches = self.branches.ok_or_else(|| need("branches"))?;
                StepKind::Parallel {
                    mode: self.mode.unwrap_or_default(),
                    branches: branches
                        .into_iter()
                        .map(|b| b.into_step(file, &path))
                        .collect::<Result<_, _>>()?,
                }
            }
            "for_each" => {
                used.extend(["items", "steps"]);
                let items = match self.items.clone() {
                    Some(Value::Array(a)) => Items::List(a),
                    Some(Value::String(s)) => Items::Template(s),
                    Some(_) => {
                        return Err(err("'items' must be a list or a template string".into()));
                    }
                    None => return Err(need("items")),
                };
                let steps = self.steps.ok_or_else(|| need("steps"))?;
                StepKind::ForEach {
                    items,
                    steps: steps
                        .into_iter()
                        .map(|b| b.into_step(file, &path))
                        .collect::<Result<_, _>>()?,
                }
            }
            "while" => {
                used.extend(["condition", "max_iterations", "steps"]);
                let condition = self.condition.clone().ok_or_else(|| need("condition"))?;
                let max_iterations = self.max_iterations.ok_or_else(|| need("max_iterations"))?;
                let steps = self.steps.ok_or_else(|| need("steps"))?;
                StepKind::While {
                    condition,
                    max_iterations,
                    steps: steps
                        .into_iter()
                        .map(|b| b.into_step(file, &path))
                        .collect::<Result<_, _>>()?,
                }
            }
            "call_workflow" => {
                used.extend(["workflow", "inputs"]);
                StepKind::CallWorkflow {
                    workflow: self.workflow.clone().ok_or_else(|| need("workflow"))?,
                    inputs: self.inputs.clone().unwrap_or_default(),
                }
            }
            "agent" => {
                used.extend([
                    "provider",
                    "command",
                    "prompt",
                    "system_prompt",
                    "model",
                    "max_turns",
                    "tools",
                    "env",
                ]);
                let command = match self.command.clone() {
                    None => Vec::new(),
                    Some(Value::Array(a)) => a
                        .into_iter()
                        .map(|v| match v {
                            Value::String(s) => Ok(s),
                            _ => Err(err("agent 'command' must be a list of strings".into())),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => {
                        return Err(err(
                            "agent 'command' must be a list of strings (argv)".into()
                        ));
                    }
                };
                StepKind::Agent(AgentSpec {
                    provider: self.provider.clone().ok_or_else(|| need("provider"))?,
                    command,
                    prompt: self.prompt.clone().ok_or_else(|| need("prompt"))?,
                    system_prompt: self.system_prompt.clone(),
                    model: self.model.clone(),
                    max_turns: self.max_turns,
                    tools: self.tools.clone().unwrap_or_default(),
                    env: self.env.clone().unwrap_or_default(),
                })
            }
            other => {
                used.push("with");
                StepKind::Custom {
                    type_name: other.to_owned(),
                    params: self.with.clone().unwrap_or(Value::Null),
                }
            }
        };
        // Fields of another kind are mistakes worth reporting, not ignoring.
        let present: [(&str, bool); 21] = [
            ("command", self.command.is_some()),
            ("tool", self.tool.is_some()),
            ("input", self.input.is_some()),
            ("status", self.status.is_some()),
            ("message", self.message.is_some()),
            ("mode", self.mode.is_some()),
            ("branches", false),
            ("items", self.items.is_some()),
            ("condition", self.condition.is_some()),
            ("max_iterations", self.max_iterations.is_some()),
            ("steps", false),
            ("workflow", self.workflow.is_some()),
            ("inputs", self.inputs.is_some()),
            ("provider", self.provider.is_some()),
            ("prompt", self.prompt.is_some()),
            ("system_prompt", self.system_prompt.is_some()),
            ("model", self.model.is_some()),
            ("max_turns", self.max_turns.is_some()),
            ("tools", self.tools.is_some()),
            ("env", self.env.is_some()),
            ("with", self.with.is_some()),
        ];
        if let Some((field, _)) = present.iter().find(|(f, p)| *p && !used.contains(f)) {
            return Err(err(format!(
                "field '{field}' does not apply to a '{}' step",
                self.kind
            )));
        }
        Ok(Step {
            name: self.name,
            kind,
            timeout: self.timeout_ms.map(Duration::from_millis),
            continue_on_error: self.continue_on_error,
        })
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

// ------------------------------------------------------------- workflow sets

/// A root workflow and every workflow reachable through `call_workflow`.
#[derive(Debug, Clone)]
pub struct WorkflowSet {
    root: String,
    workflows: HashMap<String, Arc<Workflow>>,
}

impl WorkflowSet {
    /// A set whose root is `workflow`, keyed `key` (used in errors).
    pub fn new(key: impl Into<String>, workflow: Workflow) -> Self {
        let key = key.into();
        let mut workflows = HashMap::new();
        workflows.insert(key.clone(), Arc::new(workflow));
        Self {
            root: key,
            workflows,
        }
    }

    /// Adds a workflow that `call_workflow` steps can name by `key`.
    pub fn with(mut self, key: impl Into<String>, workflow: Workflow) -> Self {
        self.workflows.insert(key.into(), Arc::new(workflow));
        self
    }

    /// Loads a YAML workflow file and, recursively, the files its
    /// `call_workflow` steps name (relative to the naming file). Keys are
    /// the files' canonical paths; targets are rewritten to those keys.
    /// Runs [`WorkflowSet::validate`] with no custom step types known to
    /// catch every structural problem early; the service validates again
    /// with its registry before a run.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, WorkflowError> {
        let mut workflows = HashMap::new();
        let root = load_file(path.as_ref(), &mut workflows)?;
        let set = Self { root, workflows };
        set.validate_structure()?;
        Ok(set)
    }

    /// Every plugin the set's workflows declare, once each, root first.
    pub fn plugins(&self) -> Vec<PluginSpec> {
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort_by_key(|k| (*k != &self.root, (*k).clone()));
        let mut out: Vec<PluginSpec> = Vec::new();
        for key in keys {
            if let Some(wf) = self.workflows.get(key) {
                for argv in &wf.plugins {
                    let spec = PluginSpec {
                        argv: argv.clone(),
                        cwd: wf.dir.clone(),
                    };
                    if !out.contains(&spec) {
                        out.push(spec);
                    }
                }
            }
        }
        out
    }

    /// The root workflow's key.
    pub fn root_key(&self) -> &str {
        &self.root
    }

    /// The root workflow.
    pub fn root(&self) -> Option<&Arc<Workflow>> {
        self.workflows.get(&self.root)
    }

    /// A workflow by key.
    pub fn get(&self, key: &str) -> Option<&Arc<Workflow>> {
        self.workflows.get(key)
    }

    /// Full validation: structure plus every custom kind known to `is_custom`.
    pub fn validate(&self, is_custom: &dyn Fn(&str) -> bool) -> Result<(), WorkflowError> {
        self.validate_structure()?;
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort();
        for key in keys {
            let Some(wf) = self.workflows.get(key) else {
                continue;
            };
            check_kinds(key, "", &wf.steps, is_custom)?;
        }
        Ok(())
    }

    /// Runs `check` on every step of every workflow (keys sorted, steps in
    /// document order); the first `Some(reason)` becomes the error.
    pub fn check_steps(
        &self,
        check: &dyn Fn(&Step) -> Option<String>,
    ) -> Result<(), WorkflowError> {
        fn walk(
            file: &str,
            prefix: &str,
            steps: &[Step],
            check: &dyn Fn(&Step) -> Option<String>,
        ) -> Result<(), WorkflowError> {
            for s in steps {
                let path = join_path(prefix, &s.name);
                if let Some(reason) = check(s) {
                    return Err(WorkflowError::new(file, Some(&path), reason));
                }
                walk(file, &path, s.kind.children(), check)?;
            }
            Ok(())
        }
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort();
        for key in keys {
            if let Some(wf) = self.workflows.get(key) {
                walk(key, "", &wf.steps, check)?;
            }
        }
        Ok(())
    }

    fn validate_structure(&self) -> Result<(), WorkflowError> {
        if !self.workflows.contains_key(&self.root) {
            return Err(WorkflowError::new(
                &self.root,
                None,
                "root workflow missing from the set",
            ));
        }
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort();
        for key in &keys {
            if let Some(wf) = self.workflows.get(*key) {
                validate_workflow(key, wf, &self.workflows)?;
            }
        }
        // call_workflow cycles (static; the runtime depth limit is separate).
        let mut done = HashSet::new();
        for key in keys {
            let mut stack = Vec::new();
            self.find_cycle(key, &mut stack, &mut done)?;
        }
        Ok(())
    }

    fn find_cycle(
        &self,
        key: &str,
        stack: &mut Vec<String>,
        done: &mut HashSet<String>,
    ) -> Result<(), WorkflowError> {
        if done.contains(key) {
            return Ok(());
        }
        if let Some(pos) = stack.iter().position(|k| k == key) {
            let mut cycle: Vec<String> = stack[pos..].to_vec();
            cycle.push(key.to_owned());
            return Err(WorkflowError::new(
                &stack[stack.len() - 1],
                None,
                format!("call_workflow cycle: {}", cycle.join(" -> ")),
            ));
        }
        let Some(wf) = self.workflows.get(key) else {
            return Ok(());
        };
        stack.push(key.to_owned());
        let mut calls = Vec::new();
        collect_calls(&wf.steps, "", &mut calls);
        for (_, target) in calls {
            self.find_cycle(&target, stack, done)?;
        }
        stack.pop();
        done.insert(key.to_owned());
        Ok(())
    }
}

fn collect_calls(steps: &[Step], prefix: &str, out: &mut Vec<(String, String)>) {
    for s in steps {
        let path = join_path(prefix, &s.name);
        if let StepKind::CallWorkflow { workflow, .. } = &s.kind {
            out.push((path.clone(), workflow.clone()));
        }
        collect_calls(s.kind.children(), &path, out);
    }
}

fn load_file(
    path: &Path,
    workflows: &mut HashMap<String, Arc<Workflow>>,
) -> Result<String, WorkflowError> {
    let shown = path.display().to_string();
    let canonical = path
        .canonicalize()
        .map_err(|e| WorkflowError::new(&shown, None, format!("cannot open: {e}")))?;
    let key = canonical.display().to_string();
    if workflows.contains_key(&key) {
        return Ok(key);
    }
    let text = std::fs::read_to_string(&canonical)
        .map_err(|e| WorkflowError::new(&shown, None, format!("cannot read: {e}")))?;
    let mut wf = Workflow::from_yaml(&text, &shown)?;
    // Placeholder so a cycle back to this file terminates loading.
    workflows.insert(key.clone(), Arc::new(Workflow::new(wf.name.clone())));
    let dir = canonical
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    rewrite_calls(&mut wf.steps, "", &dir, &shown, workflows)?;
    wf.dir = Some(dir);
    workflows.insert(key.clone(), Arc::new(wf));
    Ok(key)
}

fn rewrite_calls(
    steps: &mut [Step],
    prefix: &str,
    dir: &Path,
    file: &str,
    workflows: &mut HashMap<String, Arc<Workflow>>,
) -> Result<(), WorkflowError> {
    for s in steps {
        let path = join_path(prefix, &s.name);
        match &mut s.kind {
            StepKind::CallWorkflow { workflow, .. } => {
                let target = dir.join(&*workflow);
                if !target.is_file() {
                    return Err(WorkflowError::new(
                        file,
                        Some(&path),
                        format!(
                            "call_workflow target '{workflow}' not found ({})",
                            target.display()
                        ),
                    ));
                }
                *workflow = load_file(&target, workflows)?;
            }
            StepKind::Parallel { branches: c, .. }
            | StepKind::ForEach { steps: c, .. }
            | StepKind::While { steps: c, .. } => {
                rewrite_calls(c, &path, dir, file, workflows)?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_kinds(
    file: &str,
    prefix: &str,
    steps: &[Step],
    is_custom: &dyn Fn(&str) -> bool,
) -> Result<(), WorkflowError> {
    for s in steps {
        let path = join_path(prefix, &s.name);
        if let StepKind::Custom { type_name, .. } = &s.kind
            && !is_custom(type_name)
        {
            return Err(WorkflowError::new(
                file,
                Some(&path),
                format!("unknown step kind '{type_name}' (not built in and not registered)"),
            ));
        }
        check_kinds(file, &path, s.kind.children(), is_custom)?;
    }
    Ok(())
}

/// What templates may see at a point of the workflow.
#[derive(Clone, Default)]
struct Visible {
    steps: HashSet<String>,
    /// Innermost loop: Some(true) for for_each (has item), Some(false) for while.
    innermost_loop: Option<bool>,
}

fn validate_workflow(
    key: &str,
    wf: &Workflow,
    all: &HashMap<String, Arc<Workflow>>,
) -> Result<(), WorkflowError> {
    if wf.name.trim().is_empty() {
        return Err(WorkflowError::new(key, None, "workflow has no name"));
    }
    let inputs: HashSet<&str> = wf.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut visible = Visible::default();
    validate_seq(key, "", &wf.steps, &inputs, &mut visible, all)?;
    // Outputs may read any step of the top-level sequence (and inputs).
    for (name, text) in &wf.outputs {
        let t = Template::parse(text)
            .map_err(|e| WorkflowError::new(key, None, format!("output '{name}': {e}")))?;
        check_refs(t.references(), &inputs, &visible).map_err(|reason| {
            WorkflowError::new(key, None, format!("output '{name}': {reason}"))
        })?;
    }
    Ok(())
}

fn validate_seq(
    file: &str,
    prefix: &str,
    steps: &[Step],
    inputs: &HashSet<&str>,
    visible: &mut Visible,
    all: &HashMap<String, Arc<Workflow>>,
) -> Result<(), WorkflowError> {
    let mut names = HashSet::new();
    for s in steps {
        let path = join_path(prefix, &s.name);
        let err = |reason: String| WorkflowError::new(file, Some(&path), reason);
        if s.name.is_empty() || s.name.contains('.') {
            return Err(err(
                "step names must be non-empty and contain no '.' (paths are dot-separated)".into(),
            ));
        }
        if !names.insert(s.name.as_str()) {
            return Err(err(format!("duplicate step name '{}'", s.name)));
        }
        let check = |text: &str, what: &str, vis: &Visible| -> Result<(), WorkflowError> {
            let t = Template::parse(text).map_err(|e| err(format!("{what}: {e}")))?;
            check_refs(t.references(), inputs, vis).map_err(|r| err(format!("{what}: {r}")))
        };
        let check_json = |v: &Value, what: &str, vis: &Visible| -> Result<(), WorkflowError> {
            for t in templates_in(v).map_err(|e| err(format!("{what}: {e}")))? {
                check_refs(t.references(), inputs, vis).map_err(|r| err(format!("{what}: {r}")))?;
            }
            Ok(())
        };
        match &s.kind {
            StepKind::Command {
                command: CommandLine::Shell(command),
            } => {
                check(command, "command", visible)?;
                Template::parse(command)
                    .and_then(|t| t.check_shell())
                    .map_err(|e| err(format!("command: {e}")))?;
            }
            StepKind::Command {
                command: CommandLine::Argv(argv),
            } => {
                if argv.is_empty() {
                    return Err(err("command: the argv list is empty".into()));
                }
                for arg in argv {
                    check(arg, "command", visible)?;
                }
            }
            StepKind::Operation { tool, input } => {
                if tool.is_empty() {
                    return Err(err("operation needs a tool name".into()));
                }
                check_json(input, "input", visible)?;
                if tool == crate::tools::SHELL_TOOL
                    && let Some(Value::String(line)) = input.get("command")
                {
                    Template::parse(line)
                        .and_then(|t| t.check_shell())
                        .map_err(|e| err(format!("input: {e}")))?;
                }
            }
            StepKind::Terminal { message, .. } => check(message, "message", visible)?,
            StepKind::Agent(a) => {
                check(&a.prompt, "prompt", visible)?;
                if let Some(sp) = &a.system_prompt {
                    check(sp, "system_prompt", visible)?;
                }
                for arg in &a.command {
                    check(arg, "command", visible)?;
                }
                for value in a.env.values() {
                    check(value, "env", visible)?;
                }
                if a.provider.is_empty() {
                    return Err(err("agent needs a provider".into()));
                }
                if a.command.is_empty()
                    && let Some(preset) = crate::preset::Preset::of(&a.provider)
                {
                    preset
                        .check(a.max_turns, &a.tools)
                        .map_err(|e| err(e.to_string()))?;
                }
            }
            StepKind::Custom { params, .. } => check_json(params, "with", visible)?,
            StepKind::CallWorkflow {
                workflow,
                inputs: ci,
            } => {
                let Some(target) = all.get(workflow) else {
                    return Err(err(format!(
                        "call_workflow target '{workflow}' is not in the workflow set"
                    )));
                };
                for (k, v) in ci {
                    if !target.inputs.iter().any(|i| &i.name == k) {
                        return Err(err(format!(
                            "input '{k}' is not declared by workflow '{}'",
                            target.name
                        )));
                    }
                    check_json(v, &format!("input '{k}'"), visible)?;
                }
                for i in &target.inputs {
                    if i.default.is_none() && !ci.contains_key(&i.name) {
                        return Err(err(format!(
                            "required input '{}' of workflow '{}' is not given",
                            i.name, target.name
                        )));
                    }
                }
            }
            StepKind::Parallel { branches, .. } => {
                if branches.is_empty() {
                    return Err(err("parallel needs at least one branch".into()));
                }
                // Branches see what precedes the block, never each other.
                let mut names = HashSet::new();
                for b in branches {
                    if !names.insert(b.name.as_str()) {
                        return Err(err(format!("duplicate branch name '{}'", b.name)));
                    }
                    let mut vis = visible.clone();
                    validate_seq(file, &path, std::slice::from_ref(b), inputs, &mut vis, all)?;
                }
                for b in branches {
                    visible.steps.insert(b.name.clone());
                }
            }
            StepKind::ForEach { items, steps } => {
                match items {
                    Items::List(list) => {
                        for v in list {
                            check_json(v, "items", visible)?;
                        }
                    }
                    Items::Template(t) => check(t, "items", visible)?,
                }
                let mut vis = visible.clone();
                vis.innermost_loop = Some(true);
                validate_seq(file, &path, steps, inputs, &mut vis, all)?;
            }
            StepKind::While {
                condition,
                max_iterations,
                steps,
            } => {
                if *max_iterations == 0 {
                    return Err(err("max_iterations must be at least 1".into()));
                }
                let mut vis = visible.clone();
                vis.innermost_loop = Some(false);
                // The condition may read the body's steps (previous iteration).
                let mut cond_vis = vis.clone();
                collect_names(steps, &mut cond_vis.steps);
                let cond =
                    Condition::parse(condition).map_err(|e| err(format!("condition: {e}")))?;
                check_refs(cond.references(), inputs, &cond_vis)
                    .map_err(|r| err(format!("condition: {r}")))?;
                validate_seq(file, &path, steps, inputs, &mut vis, all)?;
            }
        }
        visible.steps.insert(s.name.clone());
    }
    Ok(())
}

fn collect_names(steps: &[Step], out: &mut HashSet<String>) {
    for s in steps {
        out.insert(s.name.clone());
    }
}

fn check_refs<'a>(
    refs: impl Iterator<Item = &'a Reference>,
    inputs: &HashSet<&str>,
    vis: &Visible,
) -> Result<(), String> {
    for r in refs {
        match r {
            Reference::Input(n) if !inputs.contains(n.as_str()) => {
                return Err(format!("'{{{{{r}}}}}' names an undeclared input"));
            }
            Reference::Step { step, .. } if !vis.steps.contains(step) => {
                return Err(format!(
                    "'{{{{{r}}}}}' names no step that has run before this point"
                ));
            }
            Reference::LoopIndex if vis.innermost_loop.is_none() => {
                return Err(format!("'{{{{{r}}}}}' used outside a loop body"));
            }
            Reference::LoopItem(_) if vis.innermost_loop != Some(true) => {
                return Err(format!("'{{{{{r}}}}}' used outside a for_each body"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml_err(text: &str) -> String {
        match Workflow::from_yaml(text, "t.yaml") {
            Err(e) => e.to_string(),
            Ok(wf) => WorkflowSet::new("t.yaml", wf)
                .validate(&|k| k == "known")
                .unwrap_err()
                .to_string(),
        }
    }

    #[test]
    fn parses_every_kind() {
        let text = r#"
name: all
inputs:
  - name: who
    default: world
outputs:
  greeting: "{{steps.hello.output}}"
steps:
  - name: hello
    type: command
    command: "echo hi {{inputs.who}}"
    timeout_ms: 500
  - name: op
    type: operation
    tool: read_file
    input: { path: "{{steps.hello.output}}" }
    continue_on_error: true
  - name: par
    type: parallel
    mode: first_success
    branches:
      - name: a
        type: known
        with: { x: 1 }
      - name: b
        type: for_each
        items: [1, 2]
        steps:
          - name: inner
            type: command
            command: "echo {{loop.item}} {{loop.index}}"
  - name: w
    type: while
    condition: "{{steps.c.output}} != 3"
    max_iterations: 5
    steps:
      - name: c
        type: command
        command: "echo {{loop.index}}"
  - name: ag
    type: agent
    provider: claude
    command: ["cat", "x.jsonl"]
    prompt: "do {{steps.par.output}}"
    system_prompt: "be brief"
  - name: end
    type: terminal
    status: success
    message: done
"#;
        let wf = Workflow::from_yaml(text, "t.yaml").unwrap();
        assert_eq!(wf.steps.len(), 6);
        assert_eq!(wf.steps[0].timeout, Some(Duration::from_millis(500)));
        assert!(wf.steps[1].continue_on_error);
        assert_eq!(wf.steps[2].kind.children()[0].kind.kind_name(), "known");
        let set = WorkflowSet::new("t.yaml", wf);
        set.validate(&|k| k == "known").unwrap();
        assert_eq!(set.root().unwrap().name, "all");
    }

    #[test]
    fn rejects_with_file_step_and_reason() {
        let e = yaml_err("name: x\nsteps:\n  - name: a\n    type: bogus\n");
        assert_eq!(
            e,
            "t.yaml: step 'a': unknown step kind 'bogus' (not built in and not registered)"
        );
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{steps.b.output}}\"\n  - name: b\n    type: command\n    command: x\n",
        );
        assert!(e.starts_with("t.yaml: step 'a': command:"), "{e}");
        assert!(e.contains("names no step"), "{e}");
        let e = yaml_err("name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{\"\n");
        assert!(e.contains("unclosed"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{loop.item}}\"\n",
        );
        assert!(e.contains("outside a for_each body"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{inputs.q}}\"\n",
        );
        assert!(e.contains("undeclared input"), "{e}");
        let e = yaml_err("name: x\nsteps:\n  - name: a\n    type: command\n");
        assert!(e.contains("needs 'command'"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: x\n    tool: y\n",
        );
        assert!(e.contains("'tool' does not apply"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: x\n  - name: a\n    type: command\n    command: z\n",
        );
        assert!(e.contains("duplicate step name"), "{e}");
        let e = yaml_err("name: x\nsteps: [\n");
        assert!(e.starts_with("t.yaml: invalid YAML"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: p\n    type: parallel\n    branches:\n      - name: a\n        type: command\n        command: x\n      - name: b\n        type: command\n        command: \"{{steps.a.output}}\"\n",
        );
        assert!(e.contains("step 'p.b'"), "{e}");
    }

    #[test]
    fn command_lists_are_argv() {
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: [printf, '%s', '{{inputs.q}}']\n",
        );
        assert!(e.contains("undeclared input"), "{e}");
        let wf = Workflow::from_yaml(
            "name: x\ninputs: [{name: q}]\nsteps:\n  - name: a\n    type: command\n    command: [printf, '%s', '{{inputs.q}}']\n",
            "t.yaml",
        )
        .unwrap();
        assert_eq!(
            wf.steps[0].kind,
            StepKind::Command {
                command: CommandLine::Argv(vec![
                    "printf".into(),
                    "%s".into(),
                    "{{inputs.q}}".into()
                ])
            }
        );
        for bad in ["[]", "[1]", "{a: b}"] {
            let e = yaml_err(&format!(
                "name: x\nsteps:\n  - name: a\n    type: command\n    command: {bad}\n"
            ));
            assert!(e.contains("'command'"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_documented_yaml_example_parses() {
        let src = include_str!("workflow.rs");
        let start = src.find("//! ```yaml\n").unwrap() + "//! ```yaml\n".len();
        let end = start + src[start..].find("//! ```\n").unwrap();
        let yaml: String = src[start..end]
            .lines()
            .map(|l| l.strip_prefix("//! ").unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let wf = Workflow::from_yaml(&yaml, "doc.yaml").unwrap();
        let kinds: Vec<&str> = wf.steps.iter().map(|s| s.kind.kind_name()).collect();
        assert_eq!(
            kinds,
            [
                "command",
                "command",
                "operation",
                "parallel",
                "for_each",
                "while",
                "call_workflow",
                "agent",
                "my_custom_type",
                "terminal"
            ]
        );
        let set = WorkflowSet::new("doc.yaml", wf)
            .with("child.yaml", Workflow::new("child").input("text", None));
        set.validate(&|k| k == "my_custom_type").unwrap();
    }

    #[test]
    fn detects_call_cycles_and_missing_targets() {
        let a = Workflow::new("a").step(Step::call_workflow("c", "b", BTreeMap::new()));
        let b = Workflow::new("b").step(Step::call_workflow("c", "a", BTreeMap::new()));
        let e = WorkflowSet::new("a", a.clone())
            .with("b", b)
            .validate(&|_| false)
            .unwrap_err();
        assert!(e.reason.contains("cycle: a -> b -> a"), "{e}");
        let e = WorkflowSet::new("a", a).validate(&|_| false).unwrap_err();
        assert!(e.reason.contains("not in the workflow set"), "{e}");
        let child = Workflow::new("child").input("need", None);
        let p = Workflow::new("p").step(Step::call_workflow("c", "child", BTreeMap::new()));
        let e = WorkflowSet::new("p", p)
            .with("child", child)
            .validate(&|_| false)
            .unwrap_err();
        assert!(e.reason.contains("required input 'need'"), "{e}");
        let _ = json!(null);
    }
    #[test]
    fn agent_env_is_parsed_templated_and_checked_and_presets_refuse_what_their_cli_lacks() {
        let text = r#"
name: p
inputs: [ { name: url } ]
steps:
  - name: ask
    type: agent
    provider: claude
    prompt: hi
    max_turns: 2
    tools: [read_file, Grep]
    env: { ANTHROPIC_BASE_URL: "{{inputs.url}}" }
"#;
        let wf = Workflow::from_yaml(text, "t.yaml").unwrap();
        let StepKind::Agent(a) = &wf.steps[0].kind else {
            panic!("an agent step")
        };
        assert_eq!(a.env["ANTHROPIC_BASE_URL"], "{{inputs.url}}");
        WorkflowSet::new("t.yaml", wf).validate(&|_| false).unwrap();
        let bad_ref = text.replace("inputs.url", "inputs.nope");
        assert!(yaml_err(&bad_ref).contains("env"), "{}", yaml_err(&bad_ref));
        let codex = text.replace("provider: claude", "provider: codex");
        let e = yaml_err(&codex);
        assert!(
            e.contains("the codex preset has no max_turns option"),
            "{e}"
        );
        // A command of one's own: the preset's limits do not apply.
        let own = codex.replace("prompt: hi", "prompt: hi\n    command: [codex]");
        let wf = Workflow::from_yaml(&own, "t.yaml").unwrap();
        WorkflowSet::new("t.yaml", wf).validate(&|_| false).unwrap();
        let on_command =
            "name: p\nsteps:\n  - name: c\n    type: command\n    command: ls\n    env: { A: b }\n";
        assert!(yaml_err(on_command).contains("field 'env' does not apply"));
    }
}

#[cfg(test)]
mod declared_plugins_tests {
    use super::*;

    #[test]
    fn plugins_and_workflow_dir_come_from_the_file() {
        let dir = std::env::temp_dir().join(format!("wf-plugins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("p.yaml");
        std::fs::write(
            &file,
            "name: p\nplugins:\n  - [\"python3\", \"tool.py\"]\n  - [\"python3\", \"tool.py\"]\nsteps:\n  - name: s\n    type: command\n    command: \"cat {{workflow.dir}}/data.txt\"\n",
        )
        .unwrap();
        let set = WorkflowSet::load(&file).unwrap();
        let specs = set.plugins();
        assert_eq!(specs.len(), 1, "declared twice, started once");
        assert_eq!(specs[0].argv, ["python3", "tool.py"]);
        assert_eq!(
            specs[0].cwd.as_deref(),
            Some(dir.canonicalize().unwrap().as_path())
        );
        assert_eq!(set.root().unwrap().dir, specs[0].cwd);
        let empty =
            Workflow::from_yaml("name: e\nplugins: [[]]\nsteps: []\n", "e.yaml").unwrap_err();
        assert!(
            empty.reason.contains("plugins[0]: empty command"),
            "{empty}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn workflow_dir_template_reads_the_scope() {
        let t = crate::template::Template::parse("{{workflow.dir}}/agents").unwrap();
        let scope = crate::template::Scope::new(serde_json::Map::new())
            .with_workflow_dir(Some(Path::new("/srv/flows")));
        assert_eq!(t.render(&scope), "/srv/flows/agents");
        let rust_built = crate::template::Scope::new(serde_json::Map::new());
        assert_eq!(t.render(&rust_built), "/agents");
    }
}
