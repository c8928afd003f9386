//! The workflow model: [`Workflow`], [`Step`] and its kinds ([`StepKind`]),
//! as built in Rust or parsed from YAML (`parse.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::compiled::{ConditionText, TemplateJson, TemplateText};
use crate::provider::AgentProvider;
use transcript_domain::WorkflowSource;

pub use super::input::{InputDef, InputType};

/// A workflow: named steps run in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// The workflow name (`run.*` payload name, decision 2).
    pub name: String,
    /// What the workflow is for, in words (the YAML `description:`), for
    /// people and tools listing workflows; the engine does not use it.
    pub description: Option<String>,
    /// Declared inputs.
    pub inputs: Vec<InputDef>,
    /// Output templates, rendered at the end of a successful run into
    /// `run.completed.result`.
    pub outputs: BTreeMap<String, TemplateText>,
    /// The top-level steps.
    pub steps: Vec<Step>,
    /// External tool plugins the workflow needs (argv each), started by the
    /// runner with the workflow's directory as working directory.
    pub plugins: Vec<Vec<String>>,
    /// The directory of the workflow's file (`{{workflow.dir}}`); `None` for
    /// workflows built in Rust.
    pub dir: Option<PathBuf>,
    /// The file the workflow was loaded from, with the sha256 of its bytes, recorded in
    /// `run.started` (wire decision 16); `None` for workflows built in Rust.
    pub source: Option<WorkflowSource>,
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
            description: None,
            inputs: Vec::new(),
            outputs: BTreeMap::new(),
            steps: Vec::new(),
            plugins: Vec::new(),
            dir: None,
            source: None,
        }
    }

    /// Adds a step.
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// Declares an input (with an optional default).
    pub fn input(mut self, name: impl Into<String>, default: Option<Value>) -> Self {
        self.inputs.push(InputDef::new(name, default));
        self
    }

    /// Declares an input with its shape (`type:`, `pattern`, `values`, `secret`, #48).
    pub fn declare(mut self, input: InputDef) -> Self {
        self.inputs.push(input);
        self
    }

    /// Declares an output template.
    pub fn output(mut self, name: impl Into<String>, template: impl Into<String>) -> Self {
        self.outputs
            .insert(name.into(), TemplateText::new(template.into()));
        self
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
    /// What the step's processes may reach beyond the default bounds, or `off`
    /// (`sandbox:`, #56; see [`crate::sandbox`]).
    pub sandbox: crate::sandbox::StepSandbox,
    /// What the step's processes may reach on the network (`network:`, #57; see
    /// [`crate::sandbox::net`]): `None` inherits the enclosing step's, then the workflow's
    /// `defaults: { network: … }` (applied when the workflow loads), then nothing.
    pub network: Option<crate::sandbox::net::StepNetwork>,
}

impl Step {
    /// A step with default options.
    pub fn new(name: impl Into<String>, kind: StepKind) -> Self {
        Self {
            name: name.into(),
            kind,
            timeout: None,
            continue_on_error: false,
            sandbox: crate::sandbox::StepSandbox::default(),
            network: None,
        }
    }

    /// A `command` step run by `/bin/sh -c`: the string is shell source,
    /// which takes no `{{…}}` value (only `| raw` ones, the author's own
    /// shell code); values reach it through [`Step::with_env`].
    ///
    /// Its `output` (`{{steps.NAME.output}}`) is what the command printed
    /// on stdout without its trailing newline (one `\n`; other whitespace
    /// stays); its recorded `result` keeps the whole stdout, the exit code
    /// and the command that ran. A non-zero exit fails the step.
    pub fn command(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self::new(
            name,
            StepKind::Command {
                command: CommandLine::Shell(TemplateText::new(command.into())),
                env: BTreeMap::new(),
                stdin: None,
            },
        )
    }

    /// A `command` step run without a shell: program and arguments, each
    /// element rendered as exactly one argument.
    /// Its `output` is stdout without its trailing newline, as for
    /// [`Step::command`].
    pub fn command_argv<S: Into<String>>(
        name: impl Into<String>,
        argv: impl IntoIterator<Item = S>,
    ) -> Self {
        Self::new(
            name,
            StepKind::Command {
                command: CommandLine::Argv(
                    argv.into_iter()
                        .map(|a| TemplateText::new(a.into()))
                        .collect(),
                ),
                env: BTreeMap::new(),
                stdin: None,
            },
        )
    }

    /// Sets what a `command` step's process reads on its standard input (templated): how
    /// free text reaches a program as data (#48).
    pub fn stdin(mut self, text: impl Into<String>) -> Self {
        if let StepKind::Command { stdin, .. } = &mut self.kind {
            *stdin = Some(TemplateText::new(text.into()));
        }
        self
    }

    /// Adds an environment variable (value templated) to a `command` step:
    /// how a value reaches a shell command as data (`"$NAME"` in the
    /// script). Does nothing on other kinds.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let StepKind::Command { env, .. } = &mut self.kind {
            env.insert(name.into(), TemplateText::new(value.into()));
        }
        self
    }

    /// An `operation` step calling `tool` through the router.
    pub fn operation(name: impl Into<String>, tool: impl Into<String>, input: Value) -> Self {
        Self::new(
            name,
            StepKind::Operation {
                tool: tool.into(),
                input: TemplateJson::new(input),
            },
        )
    }

    /// A `terminal` step.
    pub fn terminal(name: impl Into<String>, success: bool, message: impl Into<String>) -> Self {
        Self::new(
            name,
            StepKind::Terminal {
                success,
                message: TemplateText::new(message.into()),
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
                condition: ConditionText::new(condition.into()),
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
                inputs: inputs
                    .into_iter()
                    .map(|(k, v)| (k, TemplateJson::new(v)))
                    .collect(),
            },
        )
    }

    /// A custom step of a type registered from Rust.
    pub fn custom(name: impl Into<String>, type_name: impl Into<String>, params: Value) -> Self {
        Self::new(
            name,
            StepKind::Custom {
                type_name: type_name.into(),
                params: TemplateJson::new(params),
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

    /// Sets what the step's processes may reach on the network (`network:`, see
    /// [`crate::sandbox::net`]).
    pub fn with_network(mut self, network: crate::sandbox::net::StepNetwork) -> Self {
        self.network = Some(network);
        self
    }

    /// Sets what the step's processes may reach (`sandbox:`, see [`crate::sandbox`]).
    pub fn with_sandbox(mut self, sandbox: crate::sandbox::StepSandbox) -> Self {
        self.sandbox = sandbox;
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
    List(Vec<TemplateJson>),
    /// A template rendering to a JSON array, or else to lines.
    Template(TemplateText),
}

impl Items {
    /// A literal list of `items` (string leaves compiled as templates).
    pub fn list(items: impl IntoIterator<Item = Value>) -> Self {
        Self::List(items.into_iter().map(TemplateJson::new).collect())
    }
}

/// An agent invocation (the agent seam).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentSpec {
    /// Provider registry name (`claude`, `codex`, `gemini`, `copilot`,
    /// `openai`…, or a registered runner's name), parsed once; selects the
    /// normalizer and the agent runner.
    pub provider: AgentProvider,
    /// argv of a CLI agent (templated); empty for HTTP agents.
    pub command: Vec<TemplateText>,
    /// The user prompt (templated).
    pub prompt: TemplateText,
    /// The system prompt (templated); omitted from `message.user` when empty.
    pub system_prompt: Option<TemplateText>,
    /// The model to ask for, when the runner takes one.
    pub model: Option<String>,
    /// Upper bound of tool-loop turns for HTTP agents.
    pub max_turns: Option<u32>,
    /// Tools offered to an HTTP agent (router tool names); for a CLI
    /// preset, what the CLI may run without asking ([`crate::preset`]).
    pub tools: Vec<String>,
    /// Extra environment of a CLI agent's process (values templated), on
    /// top of the runner's: a preset's endpoint and credentials.
    pub env: BTreeMap<String, TemplateText>,
    /// MCP servers of a CLI preset step (`claude`, `codex`, `gemini`), reached by the CLI
    /// through the service's recording, allowlisting MCP proxy.
    pub mcp_servers: Vec<super::mcp_servers::McpServerSpec>,
}

/// What a `command` step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLine {
    /// Shell source given to `/bin/sh -c`. It takes no `{{…}}` value but
    /// `| raw` ones (refused at load otherwise): values reach the script
    /// through the step's `env` (`"$NAME"`), never spliced into its text.
    Shell(TemplateText),
    /// A program and its arguments run without a shell; each element is
    /// rendered as one argument (values are never split or interpreted).
    Argv(Vec<TemplateText>),
}

/// The step kinds (FR-004).
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// An AI agent (CLI subprocess or HTTP), see [`AgentSpec`].
    Agent(AgentSpec),
    /// A command run in the workspace, through `/bin/sh -c` or as an argv;
    /// its `output` is stdout without its trailing newline.
    Command {
        /// The command: shell source (no values but `| raw`) or an argv
        /// (each element templated, one argument each).
        command: CommandLine,
        /// Environment variables added to the process (values templated):
        /// how values reach a shell command as data.
        env: BTreeMap<String, TemplateText>,
        /// What the process reads on its standard input (templated; free text welcome):
        /// written whole, then closed (#48). `None`: standard input is `/dev/null`.
        stdin: Option<TemplateText>,
    },
    /// A tool operation through the tools router.
    Operation {
        /// The router tool name.
        tool: String,
        /// Its input (string leaves templated).
        input: TemplateJson,
    },
    /// Ends the run with success or failure and a message.
    Terminal {
        /// Whether the run succeeds.
        success: bool,
        /// The message (templated); the run's error on failure.
        message: TemplateText,
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
        condition: ConditionText,
        /// The iteration limit; reaching it with the condition still true
        /// fails the step.
        max_iterations: u64,
        /// The body.
        steps: Vec<Step>,
    },
    /// Another workflow of the set, run as a child run with its own id and file.
    CallWorkflow {
        /// The target's key in the [`WorkflowSet`](super::WorkflowSet).
        workflow: String,
        /// Inputs for the child (string leaves templated).
        inputs: BTreeMap<String, TemplateJson>,
    },
    /// A step type registered from Rust by name.
    Custom {
        /// The registered type name (the `kind` on the wire).
        type_name: String,
        /// Parameters (string leaves templated).
        params: TemplateJson,
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

    /// The nested steps, to change them.
    pub fn children_mut(&mut self) -> &mut [Step] {
        match self {
            StepKind::Parallel { branches, .. } => branches,
            StepKind::ForEach { steps, .. } | StepKind::While { steps, .. } => steps,
            _ => &mut [],
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
